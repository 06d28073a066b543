//! The pre-token cache: pre-token bytes -> ids, kept per thread and per encoder, bounded.
//!
//! Text repeats its pre-tokens: a corpus of hundreds of millions of pre-tokens has only a
//! million or so distinct ones, so a small table of recent pieces answers most of them without
//! segmenting again. Segmenting is a function of the piece alone, so a hit gives exactly the ids
//! a miss computes: the cache changes time, never ids. Each thread has its own tables (no locks;
//! rayon's workers keep theirs between calls), one per encoder recently used on that thread,
//! told apart by the encoder's serial number (never reused, unlike an address).
use std::cell::RefCell;

use rustc_hash::FxHashMap;

/// Pieces longer than this are never cached: they are rare, and storing their bytes would let
/// a few huge pieces take the memory the bound is meant to cap.
pub const MAX_CACHED_PIECE: usize = 64;

/// Encoders whose tables a thread keeps at once (the least recently used one is dropped).
const TABLES_PER_THREAD: usize = 4;

/// Ids of a piece: up to three inline, or (marked by INDIRECT) a span of `PieceCache::spill`.
#[derive(Clone, Copy)]
struct Entry {
    length: u32,
    ids: [u32; 3],
}

const INDIRECT: u32 = 1 << 31;

/// One encoder's table on one thread. Pieces of up to 15 bytes (almost all) are keyed by
/// their bytes packed into a u128, so a lookup hashes and compares integers.
pub struct PieceCache {
    owner: u64,
    short: FxHashMap<u128, Entry>,
    long: FxHashMap<Box<[u8]>, Entry>,
    /// The ids of pieces with more than three, back to back.
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

impl PieceCache {
    fn new(owner: u64) -> Self {
        PieceCache {
            owner,
            short: FxHashMap::default(),
            long: FxHashMap::default(),
            spill: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
        self.spill.clear();
    }

    /// The number of pieces held.
    fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    /// Appends the cached ids of `piece` (at most MAX_CACHED_PIECE bytes) to `out`; false if
    /// the piece is not cached.
    #[inline(always)]
    pub fn extend(&self, piece: &[u8], out: &mut Vec<u32>) -> bool {
        let entry = if piece.len() < 16 {
            self.short.get(&packed(piece))
        } else {
            self.long.get(piece)
        };
        let Some(entry) = entry else {
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

    /// Stores `ids` as the cut of `piece` (at most MAX_CACHED_PIECE bytes); a full table
    /// (`capacity` pieces) is emptied first.
    pub fn insert(&mut self, piece: &[u8], ids: &[u32], capacity: usize) {
        if self.len() >= capacity {
            self.clear();
        }
        let entry = if ids.len() <= 3 {
            let mut inline = [0; 3];
            inline[..ids.len()].copy_from_slice(ids);
            Entry {
                length: ids.len() as u32,
                ids: inline,
            }
        } else {
            let start = self.spill.len() as u32;
            self.spill.extend_from_slice(ids);
            Entry {
                length: ids.len() as u32 | INDIRECT,
                ids: [start, 0, 0],
            }
        };
        if piece.len() < 16 {
            self.short.insert(packed(piece), entry);
        } else {
            self.long.insert(piece.into(), entry);
        }
    }
}

thread_local! {
    /// This thread's tables, most recently used first.
    static TABLES: RefCell<Vec<PieceCache>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` with this thread's table for the encoder numbered `owner`.
pub fn with_table<T>(owner: u64, work: impl FnOnce(&mut PieceCache) -> T) -> T {
    TABLES.with(|tables| {
        let mut tables = tables.borrow_mut();
        match tables.iter().position(|table| table.owner == owner) {
            Some(0) => {}
            Some(index) => tables[..=index].rotate_right(1),
            None => {
                if tables.len() == TABLES_PER_THREAD {
                    tables.pop();
                }
                tables.insert(0, PieceCache::new(owner));
            }
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
}
