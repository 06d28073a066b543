//! Counting pre-tokens: the unique pre-tokens of a corpus with their 64-bit counts, in memory
//! close to the size of the result.
//!
//! The counter is split into `SHARDS` shards by the hash of a pre-token, so each distinct
//! pre-token lives in exactly one shard and the threads fill disjoint shards. A shard holds every
//! distinct pre-token once, back to back in one byte arena, with their `u32` end offsets (a
//! shard's arena holds at most `MAX_SHARD_BYTES`, 4 GiB) and `u64` counts in parallel arrays,
//! and an open-addressing table of `u32` indices into them: 12 bytes of offset and count and 5 to
//! 11 bytes of table per distinct pre-token besides its bytes, and no allocation per pre-token.
//!
//! A batch of documents is counted in two parallel steps: each thread counts a group of the
//! documents into small maps (one per shard) whose keys borrow the documents' bytes, through two
//! direct-mapped tables of recent pieces of up to 31 bytes in front of them (`Recent`), then each
//! thread adds those maps' entries into the shards it owns. `into_sorted` moves the shards into
//! one arena and one pair of arrays (the end offsets still `u32` below 4 GiB of data), freeing
//! each shard as it goes, and sorts an index of the pre-tokens; the sorted data is then written
//! straight into its destination, and the end offsets and counts are permuted in place into the
//! result's offsets and counts, so the counts are never held twice. Counts are exact sums and the
//! result is sorted bytewise, so it does not depend on the number of threads or on the batches.
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use rayon::prelude::*;
use rustc_hash::FxHasher;

use crate::pretokenize::{PreTokenizer, Segment};
use crate::segment::cache::key_in;

/// The counter's shards: the top `SHARD_BITS` bits of a pre-token's hash pick its shard.
const SHARD_BITS: u32 = 5;
const SHARDS: usize = 1 << SHARD_BITS;
/// An empty slot of a shard's table.
const EMPTY: u32 = u32::MAX;
/// The most distinct pre-tokens a counter holds (indices are `u32`, and `EMPTY` is not one).
pub const MAX_DISTINCT: usize = EMPTY as usize - 1;
/// The most bytes of distinct pre-tokens one shard holds (its end offsets are `u32`).
pub const MAX_SHARD_BYTES: usize = u32::MAX as usize;

/// The 64-bit hash of a pre-token (FxHash of the bytes, then a finaliser that spreads every bit,
/// as the shard comes from the top bits and the table slot from the bottom ones).
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    let mut hash = hasher.finish();
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

fn shard_of(hash: u64) -> usize {
    (hash >> (64 - SHARD_BITS)) as usize
}

/// A pre-token of a batch with its hash, computed once per occurrence.
#[derive(Clone, Copy)]
struct Piece<'a> {
    hash: u64,
    bytes: &'a [u8],
}

impl PartialEq for Piece<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.bytes == other.bytes
    }
}

impl Eq for Piece<'_> {}

impl Hash for Piece<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Hashes a `Piece` to the hash it carries.
#[derive(Default)]
struct CarriedHash(u64);

impl Hasher for CarriedHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is called (by `Piece::hash`); fold anything else in all the same.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// The counts of one group of a batch, for one shard.
type BatchCounts<'a> = HashMap<Piece<'a>, u64, BuildHasherDefault<CarriedHash>>;

/// Slots of each table of recent pieces (`Recent`) a group counts into first.
const RECENT_BITS: u32 = 13;

/// The longest piece the short table holds: its bytes and length pack into one u128 (`key_in`).
const SHORT_LONGEST: usize = 15;

/// The longest piece the wide table holds: its first and last 16 bytes and its length tell it
/// apart from any other piece of 16 to WIDE_LONGEST bytes.
const WIDE_LONGEST: usize = 31;

/// The key of a piece of 16 to WIDE_LONGEST bytes: its first and its last 16 bytes (which
/// overlap), and its length.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct WideKey(u128, u128, usize);

impl WideKey {
    fn of(piece: &[u8]) -> Self {
        let first = u128::from_le_bytes(piece[..16].try_into().unwrap());
        let last = u128::from_le_bytes(piece[piece.len() - 16..].try_into().unwrap());
        WideKey(first, last, piece.len())
    }
}

/// One slot of `Recent`: a piece's key (the default key: an empty slot), its count so far, and
/// the piece where it was first seen in the documents.
#[derive(Clone, Copy)]
struct RecentSlot<'a, K> {
    key: K,
    count: u64,
    bytes: &'a [u8],
}

/// A direct-mapped table of recent pieces in front of the shard maps. Most occurrences are of
/// short, frequent pieces: counting one here costs a few loads and one cache line, where the
/// maps cost a hash of all its bytes and a probe into one of SHARDS large tables. A piece that
/// takes an occupied slot sends the count there to the maps, and `flush` sends the rest, so the
/// maps end with the same sums whatever the order.
struct Recent<'a, K> {
    slots: Vec<RecentSlot<'a, K>>,
}

impl<'a, K: Copy + PartialEq + Default> Recent<'a, K> {
    fn new() -> Self {
        Recent { slots: vec![RecentSlot { key: K::default(), count: 0, bytes: &[] }; 1 << RECENT_BITS] }
    }

    /// Counts one occurrence of `bytes`, whose key is `key` (never the default) and whose bits
    /// `mixed` (spread by a multiply) pick its slot.
    #[inline(always)]
    fn add(&mut self, key: K, mixed: u64, bytes: &'a [u8], maps: &mut [BatchCounts<'a>]) {
        let slot = &mut self.slots[(mixed >> (64 - RECENT_BITS)) as usize];
        if slot.key == key {
            slot.count += 1;
            return;
        }
        if slot.key != K::default() {
            add_to_maps(maps, slot.bytes, slot.count);
        }
        *slot = RecentSlot { key, count: 1, bytes };
    }

    /// Sends every count still here to the maps.
    fn flush(self, maps: &mut [BatchCounts<'a>]) {
        for slot in self.slots {
            if slot.key != K::default() {
                add_to_maps(maps, slot.bytes, slot.count);
            }
        }
    }
}

/// Spreads the bits of two words over the top bits of one.
#[inline(always)]
fn mix(low: u64, high: u64) -> u64 {
    (low ^ high.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Adds `count` occurrences of `bytes` to the map of its shard.
#[inline(always)]
fn add_to_maps<'a>(maps: &mut [BatchCounts<'a>], bytes: &'a [u8], count: u64) {
    let hash = hash_bytes(bytes);
    *maps[shard_of(hash)].entry(Piece { hash, bytes }).or_insert(0) += count;
}

/// The counts of a group of documents of one batch, one map per shard.
fn count_group<'a, D: AsRef<[u8]>>(
    pretokenizer: &PreTokenizer,
    documents: &'a [D],
) -> Vec<BatchCounts<'a>> {
    let mut maps: Vec<BatchCounts<'a>> = (0..SHARDS).map(|_| BatchCounts::default()).collect();
    let mut short: Recent<u128> = Recent::new();
    let mut wide: Recent<WideKey> = Recent::new();
    for document in documents {
        let document = document.as_ref();
        pretokenizer.for_each_segment(document, |segment| {
            if let Segment::Text(text) = segment {
                pretokenizer.for_each_piece(text, |bytes| match bytes.len() {
                    0 => {}
                    1..=SHORT_LONGEST => {
                        let key = key_in(document, bytes);
                        short.add(key, mix(key as u64, (key >> 64) as u64), bytes, &mut maps);
                    }
                    16..=WIDE_LONGEST => {
                        let key = WideKey::of(bytes);
                        let mixed = mix(key.0 as u64 ^ (key.1 >> 64) as u64, (key.0 >> 64) as u64 ^ key.1 as u64);
                        wide.add(key, mixed, bytes, &mut maps);
                    }
                    _ => add_to_maps(&mut maps, bytes, 1),
                });
            }
        });
    }
    short.flush(&mut maps);
    wide.flush(&mut maps);
    maps
}

/// `documents` cut into at most `groups` runs of about equal bytes, in order: each document goes
/// to the run where its middle byte falls when the bytes are split evenly (two documents of a
/// chunk each make two runs, one per thread).
fn groups_of<D: AsRef<[u8]>>(documents: &[D], groups: usize) -> Vec<&[D]> {
    let total: usize = documents
        .iter()
        .map(|document| document.as_ref().len())
        .sum();
    let groups = groups.max(1) as u128;
    let mut runs = Vec::with_capacity(groups as usize);
    let (mut start, mut before, mut current) = (0, 0, 0);
    for (index, document) in documents.iter().enumerate() {
        let length = document.as_ref().len();
        let middle = (before + length / 2) as u128;
        let group = if total == 0 {
            0
        } else {
            middle * groups / total as u128
        };
        if group != current && index > start {
            runs.push(&documents[start..index]);
            start = index;
        }
        current = group;
        before += length;
    }
    if start < documents.len() {
        runs.push(&documents[start..]);
    }
    runs
}

/// The smallest table of shard `index` (its arrays start at this many pre-tokens too): the sizes
/// of the shards are spread over one octave, so that they do not all double in the same batch
/// (which would hold the old and new arrays of every shard at once).
fn first_size(index: usize) -> usize {
    64 + 2 * index
}

/// Makes room for `more` items in `vec`: at least `first`, else doubling (exactly, so that the
/// shards' capacities stay spread as `first_size` spreads them).
fn reserve<T>(vec: &mut Vec<T>, more: usize, first: usize) {
    if vec.len() + more > vec.capacity() {
        let wanted = (2 * vec.capacity()).max(first).max(vec.len() + more);
        vec.reserve_exact(wanted - vec.len());
    }
}

/// The slot of `hash` in a table of `size` slots (from the low 32 bits, as the shard is chosen
/// by the top ones).
fn slot_of(hash: u64, size: usize) -> usize {
    (((hash & 0xffff_ffff) * size as u64) >> 32) as usize
}

/// The distinct pre-tokens of one shard: pre-token `i` is `arena[ends[i - 1]..ends[i]]` (from 0
/// for the first), seen `counts[i]` times; `slots` is a linear-probing table of their indices.
/// The arena holds at most `MAX_SHARD_BYTES` (the counter checks that before it adds).
struct Shard {
    first: usize,
    slots: Vec<u32>,
    arena: Vec<u8>,
    ends: Vec<u32>,
    counts: Vec<u64>,
}

impl Shard {
    fn new(index: usize) -> Self {
        Shard {
            first: first_size(index),
            slots: Vec::new(),
            arena: Vec::new(),
            ends: Vec::new(),
            counts: Vec::new(),
        }
    }

    fn pre_token(&self, index: usize) -> &[u8] {
        let start = if index == 0 {
            0
        } else {
            self.ends[index - 1] as usize
        };
        &self.arena[start..self.ends[index] as usize]
    }

    /// Adds `count` occurrences of the pre-token `bytes` whose hash is `hash`; the arena must
    /// have room for it.
    fn add(&mut self, hash: u64, bytes: &[u8], count: u64) {
        // At most 3/4 full, so that probe runs stay short.
        if 4 * (self.counts.len() + 1) > 3 * self.slots.len() {
            self.grow();
        }
        let size = self.slots.len();
        let mut slot = slot_of(hash, size);
        loop {
            let index = self.slots[slot];
            if index == EMPTY {
                debug_assert!(self.arena.len() + bytes.len() <= MAX_SHARD_BYTES);
                self.slots[slot] = self.counts.len() as u32;
                reserve(&mut self.arena, bytes.len(), 8 * self.first);
                self.arena.extend_from_slice(bytes);
                reserve(&mut self.ends, 1, self.first);
                self.ends.push(self.arena.len() as u32);
                reserve(&mut self.counts, 1, self.first);
                self.counts.push(count);
                return;
            }
            if self.pre_token(index as usize) == bytes {
                self.counts[index as usize] += count;
                return;
            }
            slot = if slot + 1 == size { 0 } else { slot + 1 };
        }
    }

    /// Doubles the table (from `first` slots) and places every pre-token again.
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(self.first);
        // The old table goes first, so that the two are not held together.
        self.slots = Vec::new();
        let mut slots = vec![EMPTY; size];
        for index in 0..self.counts.len() {
            let mut slot = slot_of(hash_bytes(self.pre_token(index)), size);
            while slots[slot] != EMPTY {
                slot = if slot + 1 == size { 0 } else { slot + 1 };
            }
            slots[slot] = index as u32;
        }
        self.slots = slots;
    }
}

/// Hands the memory that was freed back to the operating system (glibc keeps freed blocks
/// inside its heaps, where the peak memory would count them; other allocators return it
/// themselves).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim only returns free pages of glibc's heaps to the kernel.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Why a counter cannot take more: it would hold more than `MAX_DISTINCT` distinct pre-tokens,
/// or more than `MAX_SHARD_BYTES` bytes of them in one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterFull {
    Distinct,
    ShardBytes,
}

/// Whether a counter of `held` distinct pre-tokens, whose largest shard holds `largest_shard`
/// bytes, has room for `new` more pre-tokens of `new_bytes` bytes in all.
fn check_room(
    held: usize,
    new: usize,
    largest_shard: usize,
    new_bytes: usize,
) -> Result<(), CounterFull> {
    if held + new > MAX_DISTINCT {
        return Err(CounterFull::Distinct);
    }
    if largest_shard + new_bytes > MAX_SHARD_BYTES {
        return Err(CounterFull::ShardBytes);
    }
    Ok(())
}

/// Accumulates pre-token counts over any number of batches.
pub struct Counter {
    pretokenizer: PreTokenizer,
    shards: Vec<Shard>,
    /// Batches added since freed memory was last handed back.
    untrimmed: usize,
}

/// Freed memory is handed back at least once every this many batches.
const TRIM_BATCHES: usize = 8;

impl Counter {
    pub fn new(pretokenizer: PreTokenizer) -> Self {
        Counter {
            pretokenizer,
            shards: (0..SHARDS).map(Shard::new).collect(),
            untrimmed: 0,
        }
    }

    /// The number of distinct pre-tokens counted so far.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.counts.len()).sum()
    }

    /// The items the shards have room for, in all their arrays (it changes when one grows).
    fn reserved(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard.slots.capacity()
                    + shard.arena.capacity()
                    + shard.ends.capacity()
                    + shard.counts.capacity()
            })
            .sum()
    }

    /// The bytes of distinct pre-tokens in the fullest shard.
    fn largest_shard(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.arena.len())
            .max()
            .unwrap_or(0)
    }

    /// Counts a batch of documents (in parallel on the current rayon pool). Nothing is counted
    /// if the batch could take the counter past `MAX_DISTINCT` distinct pre-tokens or a shard
    /// past `MAX_SHARD_BYTES`.
    pub fn add<D: AsRef<[u8]> + Sync>(&mut self, documents: &[D]) -> Result<(), CounterFull> {
        let pretokenizer = &self.pretokenizer;
        let groups = groups_of(documents, rayon::current_num_threads());
        let batches: Vec<Vec<BatchCounts>> = groups
            .par_iter()
            .map(|group| count_group(pretokenizer, group))
            .collect();
        // The new pre-tokens are slices of the documents, so they are at most their bytes.
        check_room(
            self.len(),
            batches.iter().flatten().map(HashMap::len).sum(),
            self.largest_shard(),
            documents
                .iter()
                .map(|document| document.as_ref().len())
                .sum(),
        )?;
        let reserved = self.reserved();
        self.shards
            .par_iter_mut()
            .enumerate()
            .for_each(|(index, shard)| {
                for batch in &batches {
                    for (piece, &count) in &batch[index] {
                        shard.add(piece.hash, piece.bytes, count);
                    }
                }
            });
        drop(batches);
        // What a shard frees when it grows (its old arrays) goes back to the system at once;
        // what the maps held, every `TRIM_BATCHES` batches (the next batch's maps reuse most of
        // it, but the heaps' free pages would slowly spread).
        self.untrimmed += 1;
        if self.reserved() != reserved || self.untrimmed == TRIM_BATCHES {
            release_freed_memory();
            self.untrimmed = 0;
        }
        Ok(())
    }

    /// Adds counted pre-tokens (e.g. another shard's counts), in parallel by shard. Nothing is
    /// added if they could take the counter past `MAX_DISTINCT` distinct pre-tokens or a shard
    /// past `MAX_SHARD_BYTES`.
    pub fn add_counts(&mut self, counts: &PreTokenCounts) -> Result<(), CounterFull> {
        check_room(
            self.len(),
            counts.len(),
            self.largest_shard(),
            counts.data.len(),
        )?;
        let hashes: Vec<u64> = (0..counts.len())
            .into_par_iter()
            .map(|index| hash_bytes(counts.pre_token(index)))
            .collect();
        self.shards
            .par_iter_mut()
            .enumerate()
            .for_each(|(index, shard)| {
                for (pre_token, &hash) in hashes.iter().enumerate() {
                    if shard_of(hash) == index {
                        shard.add(hash, counts.pre_token(pre_token), counts.counts[pre_token]);
                    }
                }
            });
        drop(hashes);
        release_freed_memory();
        Ok(())
    }

    /// The counts so far, sorted bytewise; the counter's arrays become the result's.
    pub fn into_sorted(self) -> SortedCounts {
        let pre_tokens = self.len();
        let bytes: usize = self.shards.iter().map(|shard| shard.arena.len()).sum();
        // Reserved, not touched: the pages fill as the shards are moved in and freed.
        let mut arena = Vec::with_capacity(bytes);
        let mut ends = if bytes <= u32::MAX as usize {
            Ends::Narrow(Vec::with_capacity(pre_tokens))
        } else {
            Ends::Wide(Vec::with_capacity(pre_tokens))
        };
        let mut counts = Vec::with_capacity(pre_tokens);
        for shard in self.shards {
            let base = arena.len();
            drop(shard.slots);
            arena.extend_from_slice(&shard.arena);
            drop(shard.arena);
            match &mut ends {
                // base + end <= bytes, which fits in a u32 here.
                Ends::Narrow(ends) => ends.extend(shard.ends.iter().map(|&end| end + base as u32)),
                Ends::Wide(ends) => {
                    ends.extend(shard.ends.iter().map(|&end| i64::from(end) + base as i64))
                }
            }
            drop(shard.ends);
            counts.extend_from_slice(&shard.counts);
            drop(shard.counts);
            release_freed_memory();
        }
        let order = match &ends {
            Ends::Narrow(ends) => sorted_order(&arena, ends),
            Ends::Wide(ends) => sorted_order(&arena, ends),
        };
        SortedCounts {
            arena,
            ends,
            counts,
            order,
        }
    }
}

/// The end offsets of the pre-tokens in one arena: `u32` while it holds at most 4 GiB.
enum Ends {
    Narrow(Vec<u32>),
    Wide(Vec<i64>),
}

/// An end offset into an arena.
trait End: Copy + Send + Sync + Into<i64> + std::ops::Sub<Output = Self> {}

impl End for u32 {}

impl End for i64 {}

/// Pre-token `index` of `arena`, whose pre-tokens end at `ends`.
fn pre_token_of<'a, E: End>(arena: &'a [u8], ends: &[E], index: usize) -> &'a [u8] {
    let start = if index == 0 {
        0
    } else {
        ends[index - 1].into() as usize
    };
    &arena[start..ends[index].into() as usize]
}

/// The indices of the pre-tokens of `arena` (which end at `ends`) in bytewise order.
fn sorted_order<E: End>(arena: &[u8], ends: &[E]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..ends.len() as u32).collect();
    // Pre-tokens are distinct, so an unstable sort is still deterministic.
    order.par_sort_unstable_by(|&left, &right| {
        pre_token_of(arena, ends, left as usize).cmp(pre_token_of(arena, ends, right as usize))
    });
    order
}

/// Writes the pre-tokens of `arena` (which end at `ends`) back to back into `out` in `order`.
fn write_in_order<E: End>(arena: &[u8], ends: &[E], order: &[u32], out: &mut [u8]) {
    let mut position = 0;
    for &index in order {
        let pre_token = pre_token_of(arena, ends, index as usize);
        out[position..position + pre_token.len()].copy_from_slice(pre_token);
        position += pre_token.len();
    }
}

/// The offsets from 0 (`len + 1`) and counts of the pre-tokens in `order`, made from their ends
/// and counts in counting order: the lengths and counts are permuted in place, so the counts are
/// never held twice.
fn offsets_and_counts_in_order<E: End>(
    mut ends: Vec<E>,
    mut counts: Vec<u64>,
    mut order: Vec<u32>,
) -> (Vec<i64>, Vec<u64>) {
    // The ends become lengths...
    for index in (1..ends.len()).rev() {
        ends[index] = ends[index] - ends[index - 1];
    }
    // ...which, with the counts, move to their sorted places: position k takes the entry
    // order[k], following each cycle of the permutation once (visited places get EMPTY).
    for start in 0..order.len() {
        if order[start] == EMPTY {
            continue;
        }
        let (first_length, first_count) = (ends[start], counts[start]);
        let mut position = start;
        loop {
            let next = order[position] as usize;
            order[position] = EMPTY;
            if next == start {
                ends[position] = first_length;
                counts[position] = first_count;
                break;
            }
            ends[position] = ends[next];
            counts[position] = counts[next];
            position = next;
        }
    }
    drop(order);
    // ...and the sorted lengths become offsets from 0.
    let mut offsets = Vec::with_capacity(ends.len() + 1);
    offsets.push(0);
    let mut offset = 0;
    for &length in &ends {
        offset += length.into();
        offsets.push(offset);
    }
    (offsets, counts)
}

/// The counter's pre-tokens in their counting order with the order that sorts them: write the
/// sorted data out (`write_data`), then take the offsets and counts (`into_offsets_and_counts`).
pub struct SortedCounts {
    arena: Vec<u8>,
    ends: Ends,
    counts: Vec<u64>,
    order: Vec<u32>,
}

impl SortedCounts {
    /// The bytes of all the pre-tokens together.
    pub fn data_len(&self) -> usize {
        self.arena.len()
    }

    /// Writes the pre-tokens, sorted, back to back into `out` (`data_len` bytes).
    pub fn write_data(&self, out: &mut [u8]) {
        match &self.ends {
            Ends::Narrow(ends) => write_in_order(&self.arena, ends, &self.order, out),
            Ends::Wide(ends) => write_in_order(&self.arena, ends, &self.order, out),
        }
    }

    /// The offsets (`len + 1`) and counts of the sorted pre-tokens, made in place from the
    /// counter's arrays (the data is freed first).
    pub fn into_offsets_and_counts(self) -> (Vec<i64>, Vec<u64>) {
        let SortedCounts {
            arena,
            ends,
            counts,
            order,
        } = self;
        drop(arena);
        release_freed_memory();
        match ends {
            Ends::Narrow(ends) => offsets_and_counts_in_order(ends, counts, order),
            Ends::Wide(ends) => offsets_and_counts_in_order(ends, counts, order),
        }
    }
}

/// Why flat count buffers are not well formed: the facts, for the caller to word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountsError {
    /// There must be one more offset than counts.
    OffsetsLength { offsets: usize, counts: usize },
    /// The offsets must run from 0 to the data length.
    OffsetsEnds { first: i64, last: i64, data: usize },
    /// `offsets[index] > offsets[index + 1]`.
    OffsetsDecrease { index: usize },
    /// Pre-token `index` is empty (sorted counts hold none).
    EmptyPreToken { index: usize },
    /// Pre-tokens `index - 1` and `index` are not in strictly increasing byte order.
    Unsorted { index: usize },
}

/// Counted pre-tokens as flat buffers: pre-token i is `data[offsets[i]..offsets[i + 1]]`,
/// seen `counts[i]` times. Checked once, in `new`, so every algorithm can index it freely.
#[derive(Clone, Copy)]
pub struct PreTokenCounts<'a> {
    data: &'a [u8],
    offsets: &'a [i64],
    counts: &'a [u64],
}

impl<'a> PreTokenCounts<'a> {
    /// Checks that there is one more offset than counts and that the offsets rise (never fall)
    /// from 0 to the data length.
    pub fn new(data: &'a [u8], offsets: &'a [i64], counts: &'a [u64]) -> Result<Self, CountsError> {
        if offsets.len() != counts.len() + 1 {
            return Err(CountsError::OffsetsLength {
                offsets: offsets.len(),
                counts: counts.len(),
            });
        }
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        if first != 0 || last != data.len() as i64 {
            return Err(CountsError::OffsetsEnds {
                first,
                last,
                data: data.len(),
            });
        }
        if let Some(index) = offsets.windows(2).position(|pair| pair[0] > pair[1]) {
            return Err(CountsError::OffsetsDecrease { index });
        }
        Ok(PreTokenCounts {
            data,
            offsets,
            counts,
        })
    }

    /// Checks what a merge of sorted counts relies on: pre-tokens non-empty and in strictly
    /// increasing byte order (what `Counter::sorted` produces).
    pub fn check_sorted(&self) -> Result<(), CountsError> {
        if let Some(index) = (0..self.len()).find(|&i| self.offsets[i] == self.offsets[i + 1]) {
            return Err(CountsError::EmptyPreToken { index });
        }
        if let Some(index) = (1..self.len()).find(|&i| self.pre_token(i - 1) >= self.pre_token(i)) {
            return Err(CountsError::Unsorted { index });
        }
        Ok(())
    }

    /// The number of pre-tokens.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Pre-token `i`.
    pub fn pre_token(&self, i: usize) -> &'a [u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// All pre-tokens in order, as slices of the data.
    pub fn pre_tokens(&self) -> Vec<&'a [u8]> {
        (0..self.len()).map(|i| self.pre_token(i)).collect()
    }

    pub fn offsets(&self) -> &'a [i64] {
        self.offsets
    }

    pub fn counts(&self) -> &'a [u64] {
        self.counts
    }
}

/// Calls `emit` with each pre-token of the sum of two sorted count lists and its count, in order.
fn merge_walk(left: &PreTokenCounts, right: &PreTokenCounts, mut emit: impl FnMut(&[u8], u64)) {
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        let (a, b) = (left.pre_token(i), right.pre_token(j));
        match a.cmp(b) {
            std::cmp::Ordering::Less => {
                emit(a, left.counts[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                emit(b, right.counts[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                emit(a, left.counts[i] + right.counts[j]);
                i += 1;
                j += 1;
            }
        }
    }
    for k in i..left.len() {
        emit(left.pre_token(k), left.counts[k]);
    }
    for k in j..right.len() {
        emit(right.pre_token(k), right.counts[k]);
    }
}

/// The number of pre-tokens and of data bytes of the sum of two sorted count lists.
pub fn merged_sizes(left: &PreTokenCounts, right: &PreTokenCounts) -> (usize, usize) {
    let (mut pre_tokens, mut bytes) = (0, 0);
    merge_walk(left, right, |pre_token, _| {
        pre_tokens += 1;
        bytes += pre_token.len();
    });
    (pre_tokens, bytes)
}

/// The sum of two sorted count lists, by a linear merge: the data is written into `data`
/// (sized by `merged_sizes`), the offsets and counts are returned.
pub fn merge_sorted_into(
    left: &PreTokenCounts,
    right: &PreTokenCounts,
    data: &mut [u8],
) -> (Vec<i64>, Vec<u64>) {
    let (pre_tokens, _) = merged_sizes(left, right);
    let mut offsets = Vec::with_capacity(pre_tokens + 1);
    offsets.push(0);
    let mut counts = Vec::with_capacity(pre_tokens);
    let mut position = 0;
    merge_walk(left, right, |pre_token, count| {
        data[position..position + pre_token.len()].copy_from_slice(pre_token);
        position += pre_token.len();
        offsets.push(position as i64);
        counts.push(count);
    });
    (offsets, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::Preset;

    /// Sorted counts as flat arrays: `data` holds them back to back, `offsets` their bounds.
    struct FlatCounts {
        data: Vec<u8>,
        offsets: Vec<i64>,
        counts: Vec<u64>,
    }

    fn into_flat(sorted: SortedCounts) -> FlatCounts {
        let mut data = vec![0; sorted.data_len()];
        sorted.write_data(&mut data);
        let (offsets, counts) = sorted.into_offsets_and_counts();
        FlatCounts {
            data,
            offsets,
            counts,
        }
    }

    fn merge_sorted(left: &PreTokenCounts, right: &PreTokenCounts) -> FlatCounts {
        let (_, bytes) = merged_sizes(left, right);
        let mut data = vec![0; bytes];
        let (offsets, counts) = merge_sorted_into(left, right, &mut data);
        FlatCounts {
            data,
            offsets,
            counts,
        }
    }

    #[test]
    fn malformed_buffers_name_the_fact() {
        let data = b"abcd";
        let check =
            |offsets: &[i64], counts: &[u64]| PreTokenCounts::new(data, offsets, counts).err();
        assert_eq!(
            check(&[0, 4], &[1, 1]),
            Some(CountsError::OffsetsLength {
                offsets: 2,
                counts: 2
            })
        );
        assert_eq!(
            check(&[0, 2, 5], &[1, 1]),
            Some(CountsError::OffsetsEnds {
                first: 0,
                last: 5,
                data: 4
            })
        );
        assert_eq!(
            check(&[0, 3, 2, 4], &[1, 1, 1]),
            Some(CountsError::OffsetsDecrease { index: 1 })
        );
        assert_eq!(check(&[0, 2, 2, 4], &[1, 1, 1]), None);
        let empty = PreTokenCounts::new(data, &[0, 2, 2, 4], &[1, 1, 1]).unwrap();
        assert_eq!(
            empty.check_sorted(),
            Err(CountsError::EmptyPreToken { index: 1 })
        );
        let unsorted = PreTokenCounts::new(b"ba", &[0, 1, 2], &[1, 1]).unwrap();
        assert_eq!(
            unsorted.check_sorted(),
            Err(CountsError::Unsorted { index: 1 })
        );
    }

    #[test]
    fn merging_sums_the_counts_of_equal_pre_tokens() {
        let left = PreTokenCounts::new(b"ab", &[0, 1, 2], &[1, 2]).unwrap();
        let right = PreTokenCounts::new(b"bc", &[0, 1, 2], &[3, 4]).unwrap();
        let merged = merge_sorted(&left, &right);
        assert_eq!(
            (merged.data, merged.offsets, merged.counts),
            (b"abc".to_vec(), vec![0, 1, 2, 3], vec![1, 5, 4])
        );
    }

    fn counted(documents: &[&[u8]], threads: usize) -> FlatCounts {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut counter = Counter::new(
                PreTokenizer::new(Some(Preset::Cl100k.pattern()), vec![b"<|s|>".to_vec()]).unwrap(),
            );
            for batch in documents.chunks(2) {
                counter.add(batch).unwrap();
            }
            into_flat(counter.into_sorted())
        })
    }

    #[test]
    fn the_counter_sums_across_batches_and_sorts_whatever_the_threads() {
        let documents: Vec<Vec<u8>> = (0..40)
            .map(|i| {
                format!("the cat {i} sat<|s|> on the mat {} \u{e9}t\u{e9}\n", i % 7).into_bytes()
            })
            .chain([b"\xff\xfe the".to_vec(), Vec::new()])
            .collect();
        assert_counts_equal_a_plain_count(&documents);
    }

    #[test]
    fn pieces_that_outnumber_the_recent_table_are_counted_exactly() {
        // Far more distinct pieces of every length than `Recent` has slots, so they take each other's
        // slots all the time, between long pieces that bypass it; a few pieces recur throughout.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let documents: Vec<Vec<u8>> = (0..6)
            .map(|_| {
                let mut text = String::new();
                for _ in 0..12_000 {
                    let word: String = (0..1 + next() % 40).map(|_| (b'a' + (next() % 5) as u8) as char).collect();
                    text.push_str(&format!(" {word} {} the", next() % 50_000));
                }
                text.into_bytes()
            })
            .collect();
        assert!(documents.iter().map(Vec::len).sum::<usize>() > 32 << RECENT_BITS);
        assert_counts_equal_a_plain_count(&documents);
    }

    /// The counter's result on `documents`, on 1 to 3 threads, equals a BTreeMap's count of the
    /// pre-tokeniser's pieces.
    fn assert_counts_equal_a_plain_count(documents: &[Vec<u8>]) {
        let documents: Vec<&[u8]> = documents.iter().map(Vec::as_slice).collect();
        let mut expected: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        let pretokenizer =
            PreTokenizer::new(Some(Preset::Cl100k.pattern()), vec![b"<|s|>".to_vec()]).unwrap();
        for document in &documents {
            pretokenizer.for_each_segment(document, |segment| {
                if let Segment::Text(text) = segment {
                    pretokenizer.for_each_piece(text, |piece| {
                        *expected.entry(piece.to_vec()).or_insert(0) += 1
                    });
                }
            });
        }
        for threads in [1, 2, 3] {
            let flat = counted(&documents, threads);
            let view = PreTokenCounts::new(&flat.data, &flat.offsets, &flat.counts).unwrap();
            view.check_sorted().unwrap();
            let got: Vec<(Vec<u8>, u64)> = (0..view.len())
                .map(|i| (view.pre_token(i).to_vec(), flat.counts[i]))
                .collect();
            assert_eq!(got, expected.clone().into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn groups_split_the_bytes_evenly_and_keep_the_order() {
        let sized = |lengths: &[usize], groups: usize| -> Vec<Vec<usize>> {
            let documents: Vec<Vec<u8>> =
                lengths.iter().map(|&length| vec![b'a'; length]).collect();
            groups_of(&documents, groups)
                .iter()
                .map(|run| run.iter().map(Vec::len).collect())
                .collect()
        };
        assert_eq!(sized(&[100, 99], 2), vec![vec![100], vec![99]]);
        assert_eq!(sized(&[99, 100], 2), vec![vec![99], vec![100]]);
        assert_eq!(sized(&[10, 10, 10], 2), vec![vec![10], vec![10, 10]]);
        assert_eq!(
            sized(&[1, 1, 1, 1, 50], 2),
            vec![vec![1, 1, 1, 1], vec![50]]
        );
        assert_eq!(sized(&[5, 5], 4), vec![vec![5], vec![5]]);
        assert_eq!(sized(&[0, 0], 2), vec![vec![0, 0]]);
        assert_eq!(sized(&[7, 8, 9], 1), vec![vec![7, 8, 9]]);
        assert!(sized(&[], 2).is_empty());
    }

    #[test]
    fn shard_tables_grow_and_keep_every_pre_token() {
        let mut shard = Shard::new(3);
        for round in 0..3u64 {
            for i in 0..5000u64 {
                let pre_token = i.to_string().into_bytes();
                shard.add(hash_bytes(&pre_token), &pre_token, round + 1);
            }
        }
        assert_eq!(shard.counts.len(), 5000);
        assert!(shard.slots.len() >= 5000 * 4 / 3);
        assert!(shard.counts.iter().all(|&count| count == 6));
        assert_eq!(shard.pre_token(1234), b"1234");
    }

    #[test]
    fn a_full_counter_refuses_more_distinct_pre_tokens_or_shard_bytes() {
        assert_eq!(check_room(MAX_DISTINCT - 2, 2, 0, 2), Ok(()));
        assert_eq!(
            check_room(MAX_DISTINCT - 2, 3, 0, 3),
            Err(CounterFull::Distinct)
        );
        assert_eq!(check_room(5, 2, MAX_SHARD_BYTES - 5, 5), Ok(()));
        assert_eq!(
            check_room(5, 2, MAX_SHARD_BYTES - 5, 6),
            Err(CounterFull::ShardBytes)
        );
    }

    #[test]
    fn narrow_and_wide_ends_sort_alike() {
        let arena = b"dogcatsabeetle".to_vec();
        let narrow: Vec<u32> = vec![3, 7, 8, 14];
        let wide: Vec<i64> = narrow.iter().map(|&end| i64::from(end)).collect();
        let counts = vec![4, 3, 2, 1];
        let order = sorted_order(&arena, &narrow);
        assert_eq!(order, sorted_order(&arena, &wide));
        assert_eq!(order, vec![2, 3, 1, 0]);
        let (mut from_narrow, mut from_wide) = (vec![0; 14], vec![0; 14]);
        write_in_order(&arena, &narrow, &order, &mut from_narrow);
        write_in_order(&arena, &wide, &order, &mut from_wide);
        assert_eq!(from_narrow, b"abeetlecatsdog".to_vec());
        assert_eq!(from_wide, from_narrow);
        let expected = (vec![0, 1, 7, 11, 14], vec![2, 1, 3, 4]);
        assert_eq!(
            offsets_and_counts_in_order(narrow, counts.clone(), order.clone()),
            expected
        );
        assert_eq!(offsets_and_counts_in_order(wide, counts, order), expected);
    }

    #[test]
    fn added_counts_sum_with_counted_documents() {
        let mut counter = Counter::new(PreTokenizer::new(Some(r" ?[a-z]+"), Vec::new()).unwrap());
        counter.add(&[b"a b a".as_slice()]).unwrap();
        let other = PreTokenCounts::new(b" a c", &[0, 2, 4], &[5, 1 << 40]).unwrap();
        counter.add_counts(&other).unwrap();
        let flat = into_flat(counter.into_sorted());
        assert_eq!(flat.data, b" a b ca".to_vec());
        assert_eq!(flat.offsets, vec![0, 2, 4, 6, 7]);
        assert_eq!(flat.counts, vec![6, 1, 1 << 40, 1]);
        assert_eq!(
            into_flat(Counter::new(PreTokenizer::new(None, Vec::new()).unwrap()).into_sorted())
                .offsets,
            vec![0]
        );
    }
}
