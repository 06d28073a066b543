//! The `merges` segmenter (BPE): start from single bytes and repeatedly join the adjacent pair
//! with the lowest rank until no adjacent pair has one.
//!
//! Two rules say what a pair's rank is:
//! - `ByteRanks` (tiktoken's rule): the rank of the concatenated bytes, if they are a token; the
//!   merged id is that rank. Used for vocabularies that come without a merge list (tiktoken files).
//! - `PairMerges` (the merge list replayed): the pair of ids (left, right) has rank k if it is the
//!   k-th merge, and joins into that merge's id. This is BPE's own definition. Merge k's result
//!   only takes part in merges after k, so "always join the lowest-ranked pair, leftmost first"
//!   performs merge k at every place, left to right, before any later merge: exactly a replay of
//!   the list in order. For merge lists that BPE training produces the two rules gave the same
//!   ids on every test text and generated input (tests/peers); a hand-made list can make them
//!   differ, e.g. when two merges produce the same bytes, which only `PairMerges` can express.
//!
//! Short pieces use a flat array scanned for the minimum (O(n^2), fastest for the few bytes of a
//! typical pre-token); long ones a heap over a linked list (O(n log n)), so a megabyte of one
//! letter stays fast.
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use super::dropout::segment_with_dropout;
use super::rng::SplitMix64;
use super::{ByteRole, RandomKind, RandomSegmenter, Segmenter, VocabularyError};

/// No merge: the rank of a pair that is not a token (also marks "no right neighbour").
const NONE: u32 = u32::MAX;

/// Pieces longer than this use the heap version. Measured on random Latin pieces: the flat scan
/// at 96 bytes costs ~20% less per byte than the heap at 97; past that its quadratic cost grows.
const FLAT_SCAN_MAX_LEN: usize = 96;

/// How adjacent tokens join: the rank and merged id of the pair made of `left` and `right`,
/// whose bytes together are `piece[start..end]`, or `(NONE, NONE)`. `tokens` maps every token
/// that the segmenter answers whole to its id.
pub trait MergeRule: Send + Sync {
    fn join(
        &self,
        tokens: &TokenMap,
        piece: &[u8],
        start: usize,
        end: usize,
        left: u32,
        right: u32,
    ) -> (u32, u32);
}

/// Byte strings -> ids. Strings of up to 7 bytes (most pre-tokens and tokens) are packed into a
/// u64 key and those of up to 15 into a u128, so a lookup hashes and compares integers instead of
/// slices. Lookups are about a third of encoding time once the pre-tokeniser is fast, and they are
/// bound by memory latency: an open-addressing table tried in place of hashbrown measured the same.
#[derive(Default)]
pub struct TokenMap {
    small: FxHashMap<u64, u32>,
    medium: FxHashMap<u128, u32>,
    long: FxHashMap<Box<[u8]>, u32>,
}

#[inline]
fn small_key(bytes: &[u8]) -> u64 {
    let mut packed = [0u8; 8];
    packed[..bytes.len()].copy_from_slice(bytes);
    packed[7] = bytes.len() as u8;
    u64::from_le_bytes(packed)
}

#[inline]
fn medium_key(bytes: &[u8]) -> u128 {
    let mut packed = [0u8; 16];
    packed[..bytes.len()].copy_from_slice(bytes);
    packed[15] = bytes.len() as u8;
    u128::from_le_bytes(packed)
}

impl TokenMap {
    /// Inserts `bytes -> id`; returns false (and keeps the old id) if `bytes` is already there.
    fn insert(&mut self, bytes: &[u8], id: u32) -> bool {
        if self.get(bytes).is_some() {
            return false;
        }
        match bytes.len() {
            0..=7 => self.small.insert(small_key(bytes), id),
            8..=15 => self.medium.insert(medium_key(bytes), id),
            _ => self.long.insert(bytes.into(), id),
        };
        true
    }

    #[inline]
    fn get(&self, bytes: &[u8]) -> Option<u32> {
        match bytes.len() {
            0..=7 => self.small.get(&small_key(bytes)).copied(),
            8..=15 => self.medium.get(&medium_key(bytes)).copied(),
            _ => self.long.get(bytes).copied(),
        }
    }
}

/// tiktoken's rule: a pair joins if its bytes are a token; rank and merged id are that token's id.
/// The ranks are the segmenter's whole-token map (rank = id), so it is not stored twice.
pub struct ByteRanks;

impl MergeRule for ByteRanks {
    #[inline]
    fn join(
        &self,
        tokens: &TokenMap,
        piece: &[u8],
        start: usize,
        end: usize,
        _left: u32,
        _right: u32,
    ) -> (u32, u32) {
        match tokens.get(&piece[start..end]) {
            Some(rank) => (rank, rank),
            None => (NONE, NONE),
        }
    }
}

/// The merge list's rule: pair (left, right) joins if it is a merge, with that merge's rank.
pub struct PairMerges {
    /// (left << 32 | right) -> (rank, merged id)
    pairs: FxHashMap<u64, (u32, u32)>,
}

impl MergeRule for PairMerges {
    #[inline]
    fn join(
        &self,
        _tokens: &TokenMap,
        _piece: &[u8],
        _start: usize,
        _end: usize,
        left: u32,
        right: u32,
    ) -> (u32, u32) {
        match self.pairs.get(&(((left as u64) << 32) | right as u64)) {
            Some(&joined) => joined,
            None => (NONE, NONE),
        }
    }
}

/// One token of a piece being merged: where it starts, its id, and how it joins its right neighbour.
#[derive(Clone, Copy, Default)]
struct Part {
    start: u32,
    id: u32,
    rank: u32,
    merged: u32,
}

thread_local! {
    /// Scratch space reused across pieces, so merging a piece allocates nothing.
    static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
    /// Recently merged pieces -> (segmenter serial, ids). A piece that is not a whole token
    /// recurs often (a quarter to half of such pieces in the handbook texts) and a lookup is
    /// cheaper than merging again: measured 1.3-2.4x faster encoding of German and Chinese text.
    /// An entry counts only for the segmenter whose serial it carries.
    static MERGED: RefCell<FxHashMap<Box<[u8]>, (u64, Box<[u32]>)>> = RefCell::new(FxHashMap::default());
}

/// Serial numbers of segmenters (unlike addresses, never reused), for the merged-piece cache.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

/// The cache is cleared when it reaches this many pieces, which bounds its memory per thread.
const MERGED_CACHE_MAX: usize = 1 << 15;

pub struct MergesSegmenter<R: MergeRule> {
    serial: u64,
    rule: R,
    byte_ids: [u32; 256],
    /// Pieces that are one whole token (and that merging would reach anyway): answered directly.
    whole: TokenMap,
}

/// Builds the segmenter for a vocabulary without a merge list: tiktoken's rule with rank = id.
/// `tokens[id]` are the bytes of id; every single byte must be a token.
pub fn from_ranks(tokens: &[Vec<u8>]) -> Result<MergesSegmenter<ByteRanks>, VocabularyError> {
    let mut ranks = TokenMap::default();
    for (id, token) in tokens.iter().enumerate() {
        if !ranks.insert(token, id as u32) {
            return Err(VocabularyError::RepeatedToken { id });
        }
    }
    let byte_ids = byte_ids(tokens)?;
    // tiktoken answers any piece that is itself a token with that token, so `whole` is all of them.
    Ok(MergesSegmenter {
        serial: next_serial(),
        rule: ByteRanks,
        byte_ids,
        whole: ranks,
    })
}

/// Builds the segmenter for a merge list: `merges[k] = (left, right, merged)` is the k-th merge.
pub fn from_merges(
    tokens: &[Vec<u8>],
    merges: &[(u32, u32, u32)],
) -> Result<MergesSegmenter<PairMerges>, VocabularyError> {
    let mut pairs = FxHashMap::default();
    for (rank, &(left, right, merged)) in merges.iter().enumerate() {
        let key = ((left as u64) << 32) | right as u64;
        if pairs.insert(key, (rank as u32, merged)).is_some() {
            return Err(VocabularyError::RepeatedMerge { rank, left, right });
        }
    }
    let byte_ids = byte_ids(tokens)?;
    let mut segmenter = MergesSegmenter {
        serial: next_serial(),
        rule: PairMerges { pairs },
        byte_ids,
        whole: TokenMap::default(),
    };
    // A token answers a whole piece only if replaying the merges on its bytes reaches it (true for
    // every token BPE trained, but a hand-made list may hold tokens no merge sequence reaches).
    let mut whole = TokenMap::default();
    let mut ids = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        ids.clear();
        segmenter.segment(token, &mut ids);
        if ids.len() == 1 && ids[0] == id as u32 {
            whole.insert(token, id as u32);
        }
    }
    segmenter.whole = whole;
    Ok(segmenter)
}

fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

fn byte_ids(tokens: &[Vec<u8>]) -> Result<[u32; 256], VocabularyError> {
    let mut byte_ids = [NONE; 256];
    // The lowest id wins if a byte appears twice, as `token_id` does.
    for (id, token) in tokens.iter().enumerate().rev() {
        if let [byte] = token[..] {
            byte_ids[byte as usize] = id as u32;
        }
    }
    match byte_ids.iter().position(|&id| id == NONE) {
        Some(byte) => Err(VocabularyError::MissingByte {
            byte: byte as u8,
            role: ByteRole::Any,
        }),
        None => Ok(byte_ids),
    }
}

impl<R: MergeRule> RandomSegmenter for MergesSegmenter<R> {
    fn kind(&self) -> RandomKind {
        RandomKind::Dropout
    }

    /// BPE-dropout with probability `dropout`. At 0 this is exactly `segment` (which also answers
    /// a piece that is a whole token directly, as tiktoken does, even where merging would not
    /// reach it).
    fn segment_random(&self, piece: &[u8], dropout: f64, rng: &mut SplitMix64, out: &mut Vec<u32>) {
        if dropout <= 0.0 {
            return self.segment(piece, out);
        }
        let merge_of = |piece: &[u8], start, end, left, right| {
            let (rank, merged) = self.rule.join(&self.whole, piece, start, end, left, right);
            (rank != NONE).then_some((rank, merged))
        };
        segment_with_dropout(piece, &self.byte_ids, merge_of, dropout, rng, out);
    }
}

impl<R: MergeRule> Segmenter for MergesSegmenter<R> {
    fn random(&self) -> Option<&dyn RandomSegmenter> {
        Some(self)
    }

    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
        } else if let Some(id) = self.whole.get(piece) {
            out.push(id);
        } else if piece.len() <= FLAT_SCAN_MAX_LEN {
            MERGED.with(|cache| {
                let mut cache = cache.borrow_mut();
                if let Some((serial, ids)) = cache.get(piece) {
                    if *serial == self.serial {
                        out.extend_from_slice(ids);
                        return;
                    }
                }
                let start = out.len();
                PARTS.with(|parts| self.merge_flat(piece, &mut parts.borrow_mut(), out));
                if cache.len() >= MERGED_CACHE_MAX {
                    cache.clear();
                }
                cache.insert(piece.into(), (self.serial, out[start..].into()));
            });
        } else {
            self.merge_heap(piece, out);
        }
    }
}

impl<R: MergeRule> MergesSegmenter<R> {
    /// The flat version: `parts` holds the current tokens plus a sentinel at the end of the piece.
    fn merge_flat(&self, piece: &[u8], parts: &mut Vec<Part>, out: &mut Vec<u32>) {
        parts.clear();
        for (i, &byte) in piece.iter().enumerate() {
            parts.push(Part {
                start: i as u32,
                id: self.byte_ids[byte as usize],
                rank: NONE,
                merged: NONE,
            });
        }
        parts.push(Part {
            start: piece.len() as u32,
            id: NONE,
            rank: NONE,
            merged: NONE,
        });
        for i in 0..piece.len() - 1 {
            (parts[i].rank, parts[i].merged) =
                self.rule
                    .join(&self.whole, piece, i, i + 2, parts[i].id, parts[i + 1].id);
        }
        loop {
            // The leftmost pair of lowest rank; the sentinel and the last token have rank NONE.
            let mut best = NONE;
            let mut at = 0;
            for (i, part) in parts[..parts.len() - 2].iter().enumerate() {
                if part.rank < best {
                    best = part.rank;
                    at = i;
                }
            }
            if best == NONE {
                break;
            }
            parts[at].id = parts[at].merged;
            parts.remove(at + 1);
            self.rejoin(piece, parts, at);
            if at > 0 {
                self.rejoin(piece, parts, at - 1);
            }
        }
        out.extend(parts[..parts.len() - 1].iter().map(|part| part.id));
    }

    /// Recomputes how `parts[i]` joins its right neighbour (none if that is the sentinel).
    #[inline]
    fn rejoin(&self, piece: &[u8], parts: &mut [Part], i: usize) {
        (parts[i].rank, parts[i].merged) = if i + 2 < parts.len() {
            let end = parts[i + 2].start as usize;
            self.rule.join(
                &self.whole,
                piece,
                parts[i].start as usize,
                end,
                parts[i].id,
                parts[i + 1].id,
            )
        } else {
            (NONE, NONE)
        };
    }

    /// The heap version: tokens form a linked list indexed by their start byte; the heap holds
    /// (rank, start) of candidate pairs, and entries made stale by a merge are skipped on pop.
    fn merge_heap(&self, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        // next[i] is the end of the token starting at i (= the start of its right neighbour).
        let mut next: Vec<u32> = (1..=n as u32).collect();
        let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect();
        let mut ids: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut ranks = vec![NONE; n];
        let mut merged = vec![NONE; n];
        let mut heap = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            (ranks[i], merged[i]) =
                self.rule
                    .join(&self.whole, piece, i, i + 2, ids[i], ids[i + 1]);
            if ranks[i] != NONE {
                heap.push(Reverse((ranks[i], i as u32)));
            }
        }
        let mut alive = vec![true; n];
        let join_at = |i: usize, next: &[u32], ids: &[u32]| -> (u32, u32) {
            let right = next[i] as usize;
            if right >= n {
                return (NONE, NONE);
            }
            self.rule.join(
                &self.whole,
                piece,
                i,
                next[right] as usize,
                ids[i],
                ids[right],
            )
        };
        while let Some(Reverse((rank, i))) = heap.pop() {
            let i = i as usize;
            if !alive[i] || ranks[i] != rank {
                continue;
            }
            let right = next[i] as usize;
            ids[i] = merged[i];
            alive[right] = false;
            next[i] = next[right];
            if (next[i] as usize) < n {
                prev[next[i] as usize] = i as u32;
            }
            (ranks[i], merged[i]) = join_at(i, &next, &ids);
            if ranks[i] != NONE {
                heap.push(Reverse((ranks[i], i as u32)));
            }
            if i > 0 {
                let left = prev[i] as usize;
                (ranks[left], merged[left]) = join_at(left, &next, &ids);
                if ranks[left] != NONE {
                    heap.push(Reverse((ranks[left], left as u32)));
                }
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i] as usize;
        }
    }
}
