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

#[inline(always)]
fn packed(piece: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    bytes[..piece.len()].copy_from_slice(piece);
    bytes[15] = piece.len() as u8;
    u128::from_le_bytes(bytes)
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
