//! The pre-token cache: pre-token bytes -> ids, kept per thread and per encoder, bounded.
//!
//! Text repeats its pre-tokens: a corpus of hundreds of millions of pre-tokens has only a
//! million or so distinct ones, so a small table of recent pieces answers most of them without
//! segmenting again. Segmenting is a function of the piece alone, so a hit gives exactly the ids
//! a miss computes: the cache changes time, never ids. Each thread has its own tables (no locks;
//! rayon's workers keep theirs between calls), one per encoder recently used on that thread,
//! told apart by the encoder's serial number (never reused, unlike an address).
//!
//! Almost every piece has at most 7 bytes and 2 ids: those live in a four-way set-associative
//! array whose sets are one cache line each (the piece's bytes packed into a u64 are the key),
//! so a hit usually reads one line. A new piece takes the first free slot of its line or of the
//! next PROBE_LINES - 1 lines (slots are never freed, so a lookup stops at the first line with a
//! free slot); when all of them are full it evicts the oldest piece of its own line, so a working
//! set larger than the table loses only its rarest pieces. Pieces of up to 15 bytes and 3 ids
//! live in a second such array (two slots a line, u128 keys); the rest in a hash map emptied
//! when full.
use std::cell::RefCell;

use rustc_hash::FxHashMap;

/// Pieces longer than this are never cached. Long pieces are rare but costly to merge (a clause
/// of Chinese or Japanese text without punctuation is one piece); the map's bytes are bounded
/// (MAP_BYTES_PER_PIECE per piece of the configured size), so they cannot take more memory than
/// the bound allows.
pub const MAX_CACHED_PIECE: usize = 1024;

/// The bytes (piece and ids) the map may hold, per piece of the configured cache size.
const MAP_BYTES_PER_PIECE: usize = 16;

/// Encoders whose tables a thread keeps at once (the least recently used one is dropped).
const TABLES_PER_THREAD: usize = 4;

/// The most lines of an array (16 M), whatever the configured size.
const MAX_LINE_BITS: u32 = 24;

/// Lines a piece may take a free slot in, its own line first. Without this, the few lines that
/// more pieces hash to than they have slots would evict each other's pieces on every pass.
const PROBE_LINES: usize = 4;

/// No id: marks the unused second id of a narrow slot.
const NO_ID: u32 = u32::MAX;

/// A piece of up to 7 bytes (key: bytes and length packed, 0 for an empty slot) with one or two
/// ids (the second NO_ID if there is one).
#[derive(Clone, Copy)]
struct NarrowSlot {
    key: u64,
    ids: [u32; 2],
}

/// A piece of up to 15 bytes with up to three ids; key 0 (no piece packs to it) marks an empty slot.
#[derive(Clone, Copy)]
struct WideSlot {
    key: u128,
    count: u32,
    ids: [u32; 3],
}

/// One cache line of slots, the most recently stored first.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line<T: Copy, const N: usize>([T; N]);

impl<T: Copy, const N: usize> Line<T, N> {
    /// Stores `slot` first, dropping the last (oldest) one.
    #[inline(always)]
    fn store(&mut self, slot: T) {
        self.0.copy_within(..N - 1, 1);
        self.0[0] = slot;
    }
}

/// The slot that `found` picks among the lines from `home` on, stopping at the first line with
/// a free slot (`free`): a piece is never stored past one (see `place`).
#[inline(always)]
fn probe<T: Copy, const N: usize>(
    lines: &[Line<T, N>],
    home: usize,
    found: impl Fn(&T) -> bool,
    free: impl Fn(&T) -> bool,
) -> Option<&T> {
    let mask = lines.len() - 1;
    for step in 0..PROBE_LINES {
        let line = &lines[(home + step) & mask].0;
        // Every slot compared, then one branch: which slot holds a piece is not predictable.
        let mut hits = 0u32;
        for (index, slot) in line.iter().enumerate() {
            hits |= (found(slot) as u32) << index;
        }
        if hits != 0 {
            return Some(&line[hits.trailing_zeros() as usize]);
        }
        // Lines fill from the front, so a free slot anywhere means the last one is free.
        if free(&line[N - 1]) {
            return None;
        }
    }
    None
}

/// Stores `slot` in the first free slot of the lines from `home` on, or, when they are all
/// full, first in `home`, evicting its oldest. Slots never become free again (but when the
/// table is made afresh), so `probe` may stop at the first line with a free slot.
#[inline(always)]
fn place<T: Copy, const N: usize>(lines: &mut [Line<T, N>], home: usize, slot: T, free: impl Fn(&T) -> bool) {
    let mask = lines.len() - 1;
    for step in 0..PROBE_LINES {
        if let Some(empty) = lines[(home + step) & mask].0.iter_mut().find(|slot| free(slot)) {
            *empty = slot;
            return;
        }
    }
    lines[home].store(slot);
}

/// The line of a key in an array of 2^bits lines: the top bits of a multiplicative hash.
#[inline(always)]
fn line_of(key: u64, bits: u32) -> usize {
    ((key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize) & ((1 << bits) - 1)
}

/// Ids of a piece in the map: up to three inline, or (marked by INDIRECT) a span of `spill`.
#[derive(Clone, Copy)]
struct Entry {
    length: u32,
    ids: [u32; 3],
}

const INDIRECT: u32 = 1 << 31;

/// One encoder's table on one thread.
pub struct PieceCache {
    owner: u64,
    /// The configured size it was made for (see `with_table`).
    capacity: usize,
    narrow: Vec<Line<NarrowSlot, 4>>,
    narrow_bits: u32,
    wide: Vec<Line<WideSlot, 2>>,
    wide_bits: u32,
    /// The pieces the arrays do not take, and the most it holds before it is emptied.
    other: FxHashMap<Box<[u8]>, Entry>,
    other_capacity: usize,
    /// The bytes of the pieces and ids in `other`, and the most it holds before it is emptied.
    other_bytes: usize,
    other_budget: usize,
    /// The ids of pieces in `other` with more than three, back to back.
    spill: Vec<u32>,
}

/// The bytes of `bytes` (at most 15) as a little-endian integer, zero-padded, with the length
/// in the top byte: a key that tells apart any two strings of up to 15 bytes.
#[inline(always)]
pub fn packed(bytes: &[u8]) -> u128 {
    let (low, high) = le_words(bytes);
    (low as u128) | ((high as u128) << 64) | ((bytes.len() as u128) << 120)
}

/// Bytes 0..8 and 8..16 of `bytes` (at most 16) as little-endian words, zero-padded. Overlapping
/// fixed-size loads instead of a copy of variable length (a call to memcpy on every lookup).
#[inline(always)]
pub fn le_words(bytes: &[u8]) -> (u64, u64) {
    let n = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as u64;
    match n {
        0 => (0, 0),
        1..=3 => {
            let low = bytes[0] as u64
                | (bytes[n / 2] as u64) << (8 * (n / 2))
                | (bytes[n - 1] as u64) << (8 * (n - 1));
            (low, 0)
        }
        4..=7 => (half(0) | half(n - 4) << (8 * (n - 4)), 0),
        8 => (word(0), 0),
        _ => (word(0), word(n - 8) >> (8 * (16 - n))),
    }
}

/// `le_words(piece)` for a piece of at most 15 bytes that lies inside `text`: where 16 bytes of
/// `text` follow the piece's start, two fixed loads masked to its length (no branch on the
/// length); otherwise, and for a piece not inside `text`, `le_words`. Longer pieces, whose
/// words `extend` does not read, get (0, 0).
#[inline(always)]
pub fn le_words_in(text: &[u8], piece: &[u8]) -> (u64, u64) {
    let length = piece.len();
    if length >= 16 {
        return (0, 0);
    }
    let start = (piece.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    // Inside `text` (its address range), the piece is text[start..start + length] itself.
    let inside = piece.as_ptr() >= text.as_ptr() && start <= text.len() && length <= text.len() - start;
    match text.get(start..start.wrapping_add(16)) {
        Some(window) if inside => {
            let word = |at: usize| u64::from_le_bytes(window[at..at + 8].try_into().unwrap());
            // length 1..=15 keeps 8 * length bits of the 128: the low word's mask, then the high's.
            let bits = 8 * length as u32;
            let low_mask = if bits >= 64 { u64::MAX } else { u64::MAX >> (64 - bits) };
            let high_mask = if bits <= 64 { 0 } else { u64::MAX >> (128 - bits) };
            (word(0) & low_mask, word(8) & high_mask)
        }
        _ => le_words(piece),
    }
}

impl PieceCache {
    /// A table for about `capacity` pieces: half of them in the narrow array, a quarter in the
    /// wide one (each rounded down to a power of two, at least one line), a quarter in the map.
    fn new(owner: u64, capacity: usize) -> Self {
        let bits = |slots: usize, per_line: usize| (slots / per_line).max(1).ilog2().min(MAX_LINE_BITS);
        let (narrow_bits, wide_bits) = (bits(capacity / 2, 4), bits(capacity / 4, 2));
        let empty_narrow = NarrowSlot { key: 0, ids: [NO_ID; 2] };
        let empty_wide = WideSlot { key: 0, count: 0, ids: [0; 3] };
        PieceCache {
            owner,
            capacity,
            narrow: vec![Line([empty_narrow; 4]); 1 << narrow_bits],
            narrow_bits,
            wide: vec![Line([empty_wide; 2]); 1 << wide_bits],
            wide_bits,
            other: FxHashMap::default(),
            other_capacity: (capacity / 4).max(1),
            other_bytes: 0,
            other_budget: capacity.saturating_mul(MAP_BYTES_PER_PIECE),
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn wide_line(&self, key: u128) -> usize {
        line_of((key as u64) ^ ((key >> 64) as u64).rotate_left(29), self.wide_bits)
    }

    /// Appends the cached ids of `piece` (at most MAX_CACHED_PIECE bytes; `words` its
    /// `le_words`) to `out`; false if the piece is not cached.
    #[inline(always)]
    pub fn extend(&self, piece: &[u8], words: (u64, u64), out: &mut Vec<u32>) -> bool {
        if piece.len() < 8 {
            let key = words.0 | (piece.len() as u64) << 56;
            let home = line_of(key, self.narrow_bits);
            if let Some(slot) = probe(&self.narrow, home, |slot| slot.key == key, |slot| slot.key == 0) {
                push_ids(out, [slot.ids[0], slot.ids[1], 0], 1 + (slot.ids[1] != NO_ID) as usize);
                return true;
            }
        }
        if piece.len() < 16 {
            let key = (words.0 as u128) | ((words.1 as u128) << 64) | ((piece.len() as u128) << 120);
            let home = self.wide_line(key);
            if let Some(slot) = probe(&self.wide, home, |slot| slot.key == key, |slot| slot.key == 0) {
                push_ids(out, slot.ids, slot.count as usize);
                return true;
            }
            if self.other.is_empty() {
                return false;
            }
        }
        let Some(entry) = self.other.get(piece) else {
            return false;
        };
        if entry.length & INDIRECT == 0 {
            out.extend_from_slice(&entry.ids[..entry.length as usize]);
        } else {
            let start = entry.ids[0] as usize;
            let length = (entry.length & !INDIRECT) as usize;
            out.extend_from_slice(&self.spill[start..start + length]);
        }
        true
    }

    /// Stores `ids` as the cut of `piece` (at most MAX_CACHED_PIECE bytes, not cached yet): in
    /// an array (see `place`), or in the map, emptied first when full (in pieces or bytes).
    pub fn insert(&mut self, piece: &[u8], ids: &[u32]) {
        if piece.len() < 8 && ids.len() <= 2 {
            let key = narrow_key(piece);
            let second = ids.get(1).copied().unwrap_or(NO_ID);
            let home = line_of(key, self.narrow_bits);
            place(&mut self.narrow, home, NarrowSlot { key, ids: [ids[0], second] }, |slot| slot.key == 0);
            return;
        }
        if piece.len() < 16 && ids.len() <= 3 {
            let key = packed(piece);
            let mut inline = [0; 3];
            inline[..ids.len()].copy_from_slice(ids);
            let home = self.wide_line(key);
            let slot = WideSlot { key, count: ids.len() as u32, ids: inline };
            place(&mut self.wide, home, slot, |slot| slot.key == 0);
            return;
        }
        let cost = piece.len() + std::mem::size_of_val(ids);
        if cost > self.other_budget {
            return; // larger than the whole map may be
        }
        if self.other.len() >= self.other_capacity || self.other_bytes + cost > self.other_budget {
            self.other.clear();
            self.spill.clear();
            self.other_bytes = 0;
        }
        self.other_bytes += cost;
        let entry = if ids.len() <= 3 {
            let mut inline = [0; 3];
            inline[..ids.len()].copy_from_slice(ids);
            Entry { length: ids.len() as u32, ids: inline }
        } else {
            let start = self.spill.len() as u32;
            self.spill.extend_from_slice(ids);
            Entry { length: ids.len() as u32 | INDIRECT, ids: [start, 0, 0] }
        };
        self.other.insert(piece.into(), entry);
    }
}

/// The key of a piece of 1 to 7 bytes: its bytes, little-endian, with the length in the top byte.
#[inline(always)]
pub fn narrow_key(bytes: &[u8]) -> u64 {
    le_words(bytes).0 | (bytes.len() as u64) << 56
}

/// Appends the first `count` (at most 3) of `ids` to `out`: one fixed-size store instead of a
/// copy of variable length.
#[inline(always)]
fn push_ids(out: &mut Vec<u32>, ids: [u32; 3], count: usize) {
    out.reserve(3);
    let length = out.len();
    // SAFETY: `reserve` made room for three more ids; only the first `count` (<= 3) of them,
    // all written here, become part of the vector.
    unsafe {
        out.as_mut_ptr().add(length).cast::<[u32; 3]>().write_unaligned(ids);
        out.set_len(length + count);
    }
}

thread_local! {
    /// This thread's tables, most recently used first.
    static TABLES: RefCell<Vec<PieceCache>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` with this thread's table for the encoder numbered `owner`, made for `capacity`
/// pieces (a table made for another size is made afresh).
pub fn with_table<T>(owner: u64, capacity: usize, work: impl FnOnce(&mut PieceCache) -> T) -> T {
    TABLES.with(|tables| {
        let mut tables = tables.borrow_mut();
        match tables.iter().position(|table| table.owner == owner) {
            Some(0) => {}
            Some(index) => tables[..=index].rotate_right(1),
            None => {
                if tables.len() == TABLES_PER_THREAD {
                    tables.pop();
                }
                tables.insert(0, PieceCache::new(owner, capacity));
            }
        }
        if tables[0].capacity != capacity {
            tables[0] = PieceCache::new(owner, capacity);
        }
        work(&mut tables[0])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_keys_equal_a_plain_copy() {
        let text: Vec<u8> = (0..40u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for start in 0..8 {
            for length in 0..=15 {
                let bytes = &text[start..start + length];
                let mut plain = [0u8; 16];
                plain[..length].copy_from_slice(bytes);
                plain[15] = length as u8;
                assert_eq!(packed(bytes), u128::from_le_bytes(plain), "{bytes:?}");
            }
        }
        assert_ne!(packed(b"a"), packed(b"a\0"));
    }

    #[test]
    fn words_in_a_text_equal_a_plain_copy() {
        let text: Vec<u8> = (0..48u8).map(|i| i.wrapping_mul(151).wrapping_add(7)).collect();
        for start in 0..text.len() {
            for end in start + 1..=text.len().min(start + 15) {
                let piece = &text[start..end];
                assert_eq!(le_words_in(&text, piece), le_words(piece), "{start}..{end}");
            }
        }
        // A piece outside the text, or a text too short, falls back to the plain copy.
        let other = text.clone();
        assert_eq!(le_words_in(&text[..10], &other[2..9]), le_words(&other[2..9]));
        assert_eq!(le_words_in(&text[..10], &text[2..9]), le_words(&text[2..9]));
    }

    /// Pieces of 1 to 15 bytes and 1 to 3 ids, all distinct.
    fn pieces(count: usize) -> Vec<(Vec<u8>, Vec<u32>)> {
        (0..count)
            .map(|i| {
                let length = 1 + i % 15;
                let bytes = (0..length).map(|at| b'a' + ((i / 15 + at * 7) % 26) as u8).collect();
                let ids = (0..1 + i % 3).map(|k| (i * 3 + k) as u32).collect();
                (bytes, ids)
            })
            .collect()
    }

    #[test]
    fn every_piece_of_a_working_set_that_fits_stays_cached() {
        // 2,000 pieces in a table of 2,048 narrow and 1,024 wide slots: about 2 pieces a line,
        // so many lines get more pieces than they have slots; the next lines take them.
        let mut cache = PieceCache::new(0, 4096);
        let mut unique: Vec<(Vec<u8>, Vec<u32>)> = Vec::new();
        for (bytes, ids) in pieces(4000) {
            if !unique.iter().any(|(seen, _)| *seen == bytes) && unique.len() < 2000 {
                unique.push((bytes, ids));
            }
        }
        for (bytes, ids) in &unique {
            let mut out = Vec::new();
            if !cache.extend(bytes, le_words(bytes), &mut out) {
                cache.insert(bytes, ids);
            }
        }
        for (bytes, ids) in &unique {
            let mut out = vec![7];
            assert!(cache.extend(bytes, le_words(bytes), &mut out), "{bytes:?} was evicted");
            assert_eq!(out[1..], ids[..], "{bytes:?}");
        }
    }

    #[test]
    fn long_pieces_stay_within_the_bytes_of_the_map() {
        // 64 pieces: the map holds at most 16 pieces and 1,024 bytes.
        let mut cache = PieceCache::new(0, 64);
        let long: Vec<(Vec<u8>, Vec<u32>)> = (0..40)
            .map(|i| (vec![b'a' + (i % 26) as u8; 20 + 25 * i], (0..1 + i as u32).collect()))
            .collect();
        for round in 0..3 {
            for (bytes, ids) in &long {
                let mut out = Vec::new();
                if cache.extend(bytes, le_words_in(bytes, bytes), &mut out) {
                    assert_eq!(out, *ids, "round {round}, {} bytes", bytes.len());
                } else {
                    cache.insert(bytes, ids);
                }
                assert!(cache.other_bytes <= 1024 && cache.other.len() <= 16);
            }
        }
        // The last piece that fits is answered; one larger than the whole map never is.
        let (small, ids) = (vec![b'q'; 100], vec![1, 2, 3, 4, 5]);
        cache.insert(&small, &ids);
        let mut out = Vec::new();
        assert!(cache.extend(&small, (0, 0), &mut out) && out == ids);
        cache.insert(&[b'z'; 1030], &[9]);
        assert!(!cache.extend(&[b'z'; 1030], (0, 0), &mut Vec::new()));
    }

    #[test]
    fn a_full_table_answers_right_or_not_at_all() {
        let all = pieces(3000);
        let mut cache = PieceCache::new(0, 64);
        for round in 0..3 {
            for (bytes, ids) in &all {
                let mut out = Vec::new();
                if cache.extend(bytes, le_words(bytes), &mut out) {
                    assert_eq!(out, *ids, "round {round}, {bytes:?}");
                } else {
                    cache.insert(bytes, ids);
                }
            }
        }
    }
}
