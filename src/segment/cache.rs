//! The pre-token cache: pre-token bytes -> ids, kept per thread and per encoder, bounded.
//!
//! Text repeats its pre-tokens: a corpus of hundreds of millions of pre-tokens has only a
//! million or so distinct ones, so a table of recent pieces answers most of them without
//! segmenting again. Segmenting is a function of the piece alone, so a hit gives exactly the ids
//! a miss computes: the cache changes time, never ids. Each thread has its own tables (no locks;
//! rayon's workers keep theirs between calls), one per encoder recently used on that thread,
//! told apart by the encoder's serial number (never reused, unlike an address).
//!
//! Almost every piece has at most 15 bytes and 3 ids: those live in an array of 32-byte slots,
//! two to a cache line (the piece's bytes and length packed into a u128 are the key), so a hit
//! reads one line. The encoder looks pieces up a chunk at a time (`Chunk`): it gathers a chunk's
//! keys while pre-tokenising, asking for each piece's line as it goes, then reads the lines,
//! which have arrived by then, and writes every hit's ids without a branch on how many there
//! are. A new piece takes the first free slot of its line or of the next PROBE_LINES - 1 lines
//! (slots are never freed, so a lookup stops at the first line with a free slot); when all of
//! them are full it evicts the older piece of its own line, so a working set larger than the
//! table loses only its rarest pieces. Pieces of 16 to 31 bytes with up to six ids take a line
//! each in a second, smaller array (first come, first served; its line is asked for while
//! pre-tokenising too). The rest go to a hash map; the map and the second array are emptied
//! together when the map is full.
use std::cell::RefCell;
use std::mem::MaybeUninit;

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

/// The most lines of the array (16 M), whatever the configured size.
const MAX_LINE_BITS: u32 = 24;

/// Lines a piece may take a free slot in, its own line first. Without this, the few lines that
/// more pieces hash to than they have slots would evict each other's pieces on every pass.
const PROBE_LINES: usize = 4;

/// Pieces a `Chunk` gathers before their lines are read: enough that the first piece's line has
/// come from memory when the last piece's key is made, few enough that all the chunk's lines
/// stay in the first-level cache.
pub const CHUNK: usize = 128;

/// A piece of 1 to 15 bytes (key: bytes and length packed, 0 for an empty slot) with up to
/// three ids, the first `count` of them real. `count` follows the ids so that one 16-byte copy
/// writes the ids (and a dead word past them).
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    key: u128,
    ids: [u32; 3],
    count: u32,
}

/// One cache line of slots, the most recently stored first.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([Slot; 2]);

/// The most ids a `WideSlot` holds.
const WIDE_IDS: usize = 6;

/// A piece of 16 to 31 bytes, one cache line: its first and its last 16 bytes (which overlap)
/// and its length are the key (length 0: an empty slot), then up to WIDE_IDS ids.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct WideSlot {
    first: u128,
    last: u128,
    length: u32,
    count: u32,
    ids: [u32; WIDE_IDS],
}

impl WideSlot {
    const EMPTY: WideSlot = WideSlot { first: 0, last: 0, length: 0, count: 0, ids: [0; WIDE_IDS] };
}

/// Whether a piece of `length` bytes belongs in the wide array.
#[inline(always)]
fn is_wide(length: usize) -> bool {
    (16..32).contains(&length)
}

/// The first and the last 16 bytes of a piece of 16 to 31 bytes: with its length, they tell it
/// apart from any other such piece.
#[inline(always)]
fn wide_key(piece: &[u8]) -> (u128, u128) {
    let first = u128::from_le_bytes(piece[..16].try_into().unwrap());
    let last = u128::from_le_bytes(piece[piece.len() - 16..].try_into().unwrap());
    (first, last)
}


/// The slot holding `key` among the lines from `home` on, stopping at the first line with a
/// free slot: a piece is never stored past one (see `place`).
#[inline(always)]
fn probe(lines: &[Line], home: usize, key: u128) -> Option<&Slot> {
    let mask = lines.len() - 1;
    for step in 0..PROBE_LINES {
        let line = &lines[(home + step) & mask].0;
        if line[0].key == key {
            return Some(&line[0]);
        }
        if line[1].key == key {
            return Some(&line[1]);
        }
        // Lines fill from the front, so a free slot anywhere means the last one is free.
        if line[1].key == 0 {
            return None;
        }
    }
    None
}

/// Stores `slot` in the first free slot of the lines from `home` on, or, when they are all
/// full, first in `home`, evicting its older piece. Slots never become free again (but when the
/// table is made afresh), so `probe` may stop at the first line with a free slot.
#[inline(always)]
fn place(lines: &mut [Line], home: usize, slot: Slot) {
    let mask = lines.len() - 1;
    for step in 0..PROBE_LINES {
        if let Some(empty) = lines[(home + step) & mask].0.iter_mut().find(|slot| slot.key == 0) {
            *empty = slot;
            return;
        }
    }
    let line = &mut lines[home].0;
    line[1] = line[0];
    line[0] = slot;
}

/// The array's lines, zeroed (all slots free), in memory aligned to a huge page and, on Linux,
/// asked to be backed by huge pages before it is first touched: a table of megabytes read at
/// random then needs a few TLB entries instead of one per 4 KB page.
struct Lines {
    start: std::ptr::NonNull<Line>,
    count: usize,
}

// SAFETY: `Lines` owns its memory alone, as a Box<[Line]> would.
unsafe impl Send for Lines {}

impl Lines {
    const HUGE_PAGE: usize = 2 << 20;

    fn layout(count: usize) -> std::alloc::Layout {
        let bytes = count * std::mem::size_of::<Line>();
        let align = Self::HUGE_PAGE.min(bytes.next_power_of_two()).max(64);
        std::alloc::Layout::from_size_align(bytes, align).expect("cache table too large")
    }

    fn zeroed(count: usize) -> Self {
        let layout = Self::layout(count.max(1));
        // SAFETY: the layout has a nonzero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(start) = std::ptr::NonNull::new(raw.cast::<Line>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        #[cfg(target_os = "linux")]
        if layout.size() >= Self::HUGE_PAGE {
            // SAFETY: the range is this allocation; a refused hint changes nothing.
            unsafe { libc::madvise(raw.cast(), layout.size(), libc::MADV_HUGEPAGE) };
        }
        // SAFETY: `raw` holds layout.size() bytes; all-zero bytes are free slots.
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Lines { start, count: count.max(1) }
    }
}

impl std::ops::Deref for Lines {
    type Target = [Line];
    fn deref(&self) -> &[Line] {
        // SAFETY: `count` initialised lines from `start`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.count) }
    }
}

impl std::ops::DerefMut for Lines {
    fn deref_mut(&mut self) -> &mut [Line] {
        // SAFETY: as above, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.count) }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.start.as_ptr().cast(), Self::layout(self.count)) };
    }
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
    lines: Lines,
    /// 64 - log2(lines): `home` keeps the hash's top bits.
    home_shift: u32,
    /// Pieces of 16 to 31 bytes (see `WideSlot`), and 64 - log2 of their number.
    wide: Box<[WideSlot]>,
    wide_shift: u32,
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

/// The masks that keep the first n bytes of 16 (n = 0..16), for `key_in`.
const KEEP: [u128; 16] = {
    let mut masks = [0u128; 16];
    let mut n = 1;
    while n < 16 {
        masks[n] = u128::MAX >> (128 - 8 * n);
        n += 1;
    }
    masks
};

/// The cache key of a piece that lies inside `text`: `packed(piece)` for a piece of 1 to 15
/// bytes, 0 for longer ones (which the wide array or the map answers). Where 16 bytes of `text` follow the
/// piece's start, one 16-byte load masked to its length; otherwise, and for a piece not inside
/// `text`, `le_words`.
#[inline(always)]
pub fn key_in(text: &[u8], piece: &[u8]) -> u128 {
    let length = piece.len();
    if length >= 16 {
        return 0;
    }
    let start = (piece.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    // A window of 16 bytes of `text` at the piece's address holds the piece (length < 16): the
    // same address is the same bytes. A piece before `text` wraps `start` past its end.
    match text.get(start..start.wrapping_add(16)) {
        Some(window) => {
            let bytes = u128::from_le_bytes(window.try_into().unwrap());
            (bytes & KEEP[length]) | ((length as u128) << 120)
        }
        None => packed(piece),
    }
}

/// Asks for the cache line at `address` ahead of its use (no effect where there is no hint).
#[inline(always)]
fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and faults on no address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(address.cast::<i8>(), _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The longest piece a `Chunk` takes (its length is kept in 32 bits); a longer one is cut
/// directly, after the chunk is emptied.
pub const MAX_PENDING: usize = u32::MAX as usize;

/// A piece waiting in a `Chunk`: its key, bytes (start and length) and home line, in 32 bytes.
#[derive(Clone, Copy)]
struct Pending<'a> {
    key: u128,
    start: *const u8,
    length: u32,
    home: u32,
    piece: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> Pending<'a> {
    #[inline(always)]
    fn piece(&self) -> &'a [u8] {
        // SAFETY: made in `Chunk::push` from a slice that lives for 'a.
        unsafe { std::slice::from_raw_parts(self.start, self.length as usize) }
    }
}

/// Up to CHUNK pieces whose lines have been asked for, to be looked up together. The first
/// `length` entries are written; the rest are never read, so a new chunk is not filled in (one
/// is made on the stack for every encode call, short ones included).
pub struct Chunk<'a> {
    pending: [MaybeUninit<Pending<'a>>; CHUNK],
    length: usize,
}

impl<'a> Chunk<'a> {
    /// An empty chunk.
    pub fn new() -> Self {
        Chunk { pending: [MaybeUninit::uninit(); CHUNK], length: 0 }
    }

    /// Adds `piece` (key `key`, see `key_in`; at most MAX_PENDING bytes), asking for its line;
    /// true when the chunk is full.
    #[inline(always)]
    pub fn push(&mut self, table: &PieceCache, piece: &'a [u8], key: u128) -> bool {
        self.put(self.length, table, piece, key);
        self.length += 1;
        self.length == CHUNK
    }

    /// The number of pieces waiting.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.length
    }

    /// Says that `length` (at most CHUNK) pieces wait: those that `put` wrote at 0..length.
    #[inline(always)]
    pub fn set_len(&mut self, length: usize) {
        debug_assert!(length <= CHUNK);
        self.length = length;
    }

    /// `push` with the count kept by the caller (in a register, where `push` keeps it in the
    /// chunk: a load that waits for the previous push's store): writes `piece` as the piece at
    /// `index` (below CHUNK); `set_len` says how many wait.
    #[inline(always)]
    pub fn put(&mut self, index: usize, table: &PieceCache, piece: &'a [u8], key: u128) {
        let home = table.home(key);
        if key != 0 {
            prefetch(table.lines.as_ptr().wrapping_add(home));
        } else if is_wide(piece.len()) {
            prefetch(table.wide.as_ptr().wrapping_add(table.wide_home(piece)));
        }
        // The caller's promise (a check here cost ~2% of one-thread encoding: its panic path
        // keeps the pre-tokeniser's state out of registers).
        debug_assert!(piece.len() <= MAX_PENDING, "a piece of more than MAX_PENDING bytes is not pushed");
        let (start, length) = (piece.as_ptr(), piece.len() as u32);
        let pending = Pending { key, start, length, home: home as u32, piece: std::marker::PhantomData };
        // `index` < CHUNK here: a full chunk is emptied by `PieceCache::emit` before the next push.
        self.pending[index % CHUNK].write(pending);
    }
}

impl PieceCache {
    /// A table for about `capacity` pieces: three quarters of them, rounded down to a power of
    /// two (at least two lines), in the array, a quarter in the map, and a line for every 16
    /// (at least two) in the wide array.
    fn new(owner: u64, capacity: usize) -> Self {
        let line_bits = (capacity / 4 * 3 / 2).max(2).ilog2().min(MAX_LINE_BITS);
        let wide_bits = (capacity / 16).max(2).ilog2().min(MAX_LINE_BITS);
        PieceCache {
            owner,
            capacity,
            lines: Lines::zeroed(1 << line_bits),
            home_shift: 64 - line_bits,
            wide: vec![WideSlot::EMPTY; 1 << wide_bits].into_boxed_slice(),
            wide_shift: 64 - wide_bits,
            other: FxHashMap::default(),
            other_capacity: (capacity / 4).max(1),
            other_bytes: 0,
            other_budget: capacity.saturating_mul(MAP_BYTES_PER_PIECE),
            spill: Vec::new(),
        }
    }

    /// The home line of a key: the top log2(lines) bits of a multiplicative hash of its two words.
    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        let mixed = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.home_shift) as usize
    }

    /// The line of a piece of 16 to 31 bytes in the wide array: a multiplicative hash, as `home`.
    #[inline(always)]
    fn wide_home(&self, piece: &[u8]) -> usize {
        let (first, last) = wide_key(piece);
        let mixed = (first as u64)
            ^ ((first >> 64) as u64).rotate_left(17)
            ^ (last as u64).rotate_left(34)
            ^ ((last >> 64) as u64).rotate_left(51)
            ^ piece.len() as u64;
        (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.wide_shift) as usize
    }

    /// The wide slot holding `piece` (16 to 31 bytes), if any.
    #[inline]
    fn wide_slot(&self, piece: &[u8]) -> Option<&WideSlot> {
        let slot = &self.wide[self.wide_home(piece)];
        let (first, last) = wide_key(piece);
        (slot.length as usize == piece.len() && slot.first == first && slot.last == last).then_some(slot)
    }

    /// Appends the ids of every piece of `chunk` to `out`, in order, and empties it. A piece
    /// found in its home line costs one read of that line and one 16-byte write; any other
    /// (a long piece, one in a later line, one not cached) goes to `miss` with its key, which
    /// appends its ids through `extend` and `insert`.
    #[inline(always)]
    pub fn emit<'a>(
        &mut self,
        chunk: &mut Chunk<'a>,
        out: &mut Vec<u32>,
        mut miss: impl FnMut(&mut Self, &'a [u8], u128, &mut Vec<u32>),
    ) {
        let count = chunk.length.min(CHUNK);
        chunk.length = 0;
        // Room for four ids a piece: every hit writes four (the first `count` of them real).
        out.reserve(4 * count);
        let mut written = out.len();
        let mut base = out.as_mut_ptr();
        for pending in &chunk.pending[..count] {
            // SAFETY: `push` wrote the first `length` (here `count`) entries.
            let pending = unsafe { pending.assume_init_ref() };
            let line = &self.lines[pending.home as usize].0;
            let second = line[1].key == pending.key;
            // An index, not a branch: which slot holds a piece is as good as random.
            let slot = &line[second as usize];
            // key 0 (a long piece) would match an empty slot: it never takes the fast way.
            let hit = (second | (line[0].key == pending.key)) & (pending.key != 0);
            // SAFETY: `reserve` (here, or after the last miss) left room for four ids a piece
            // from `written` on, which advances by at most three a piece.
            unsafe {
                let ids = std::ptr::addr_of!(slot.ids).cast::<[u32; 4]>().read_unaligned();
                base.add(written).cast::<[u32; 4]>().write_unaligned(ids);
            }
            if hit {
                written += slot.count as usize;
            } else {
                // SAFETY: every id below `written` was written above.
                unsafe { out.set_len(written) };
                miss(self, pending.piece(), pending.key, out);
                out.reserve(4 * CHUNK);
                written = out.len();
                base = out.as_mut_ptr();
            }
        }
        // SAFETY: as above.
        unsafe { out.set_len(written) };
    }

    /// Appends the cached ids of `piece` (at most MAX_CACHED_PIECE bytes; `key` its `key_in`)
    /// to `out`; false if the piece is not cached.
    #[inline]
    pub fn extend(&self, piece: &[u8], key: u128, out: &mut Vec<u32>) -> bool {
        if key != 0 {
            if let Some(slot) = probe(&self.lines, self.home(key), key) {
                out.extend_from_slice(&slot.ids[..slot.count as usize]);
                return true;
            }
            if self.other.is_empty() {
                return false;
            }
        } else if is_wide(piece.len()) {
            if let Some(slot) = self.wide_slot(piece) {
                out.extend_from_slice(&slot.ids[..slot.count as usize]);
                return true;
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
    /// the array (see `place`), in its wide line if that is free, or in the map, emptied first
    /// (with the wide array) when full (in pieces or bytes).
    pub fn insert(&mut self, piece: &[u8], ids: &[u32]) {
        if piece.len() < 16 && !ids.is_empty() && ids.len() <= 3 {
            let key = packed(piece);
            let mut inline = [0; 3];
            inline[..ids.len()].copy_from_slice(ids);
            let home = self.home(key);
            place(&mut self.lines, home, Slot { key, ids: inline, count: ids.len() as u32 });
            return;
        }
        if is_wide(piece.len()) && !ids.is_empty() && ids.len() <= WIDE_IDS {
            let home = self.wide_home(piece);
            let slot = &mut self.wide[home];
            if slot.length == 0 {
                let (first, last) = wide_key(piece);
                let mut inline = [0; WIDE_IDS];
                inline[..ids.len()].copy_from_slice(ids);
                *slot = WideSlot { first, last, length: piece.len() as u32, count: ids.len() as u32, ids: inline };
                return;
            }
        }
        let cost = piece.len() + std::mem::size_of_val(ids);
        if cost > self.other_budget {
            return; // larger than the whole map may be
        }
        if self.other.len() >= self.other_capacity || self.other_bytes + cost > self.other_budget {
            self.other.clear();
            self.spill.clear();
            self.other_bytes = 0;
            self.wide.fill(WideSlot::EMPTY);
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
    fn keys_in_a_text_equal_a_plain_copy() {
        let text: Vec<u8> = (0..48u8).map(|i| i.wrapping_mul(151).wrapping_add(7)).collect();
        for start in 0..text.len() {
            for end in start + 1..=text.len() {
                let piece = &text[start..end];
                let expected = if piece.len() < 16 { packed(piece) } else { 0 };
                assert_eq!(key_in(&text, piece), expected, "{start}..{end}");
            }
        }
        // A piece outside the text, or a text too short, falls back to the plain copy.
        let other = text.clone();
        assert_eq!(key_in(&text[..10], &other[2..9]), packed(&other[2..9]));
        assert_eq!(key_in(&text[..10], &text[2..9]), packed(&text[2..9]));
    }

    /// The ids a made-up segmenter gives `piece`: one per 4 bytes begun, from its bytes.
    fn cut(piece: &[u8]) -> Vec<u32> {
        piece.chunks(4).map(|part| part.iter().map(|&b| b as u32).sum::<u32>() * 7 + part.len() as u32).collect()
    }

    #[test]
    fn chunks_give_the_ids_of_every_piece_in_order() {
        // Pieces of 1 to 40 bytes (1 to 10 ids, so some go to the map), many repeated, through
        // tables that hold all of them and tables that must evict.
        let text: Vec<u8> = (0..20_000u32).map(|i| b'a' + ((i * i / 7 + i / 13) % 23) as u8).collect();
        let mut pieces = Vec::new();
        let mut at = 0;
        for i in 0.. {
            let length = 1 + (i * 7 + i / 5) % 40;
            if at + length > text.len() {
                break;
            }
            pieces.push(&text[at..at + length]);
            at += length % 9 + 1; // overlapping pieces: the same bytes recur at many starts
        }
        let expected: Vec<u32> = pieces.iter().flat_map(|piece| cut(piece)).collect();
        for capacity in [64, 1 << 16] {
            let mut cache = PieceCache::new(0, capacity);
            for round in 0..3 {
                let (mut out, mut chunk) = (vec![], Chunk::new());
                let miss = |table: &mut PieceCache, piece: &[u8], key: u128, out: &mut Vec<u32>| {
                    if !table.extend(piece, key, out) {
                        let start = out.len();
                        out.extend(cut(piece));
                        table.insert(piece, &out[start..]);
                    }
                };
                for piece in &pieces {
                    if chunk.push(&cache, piece, key_in(&text, piece)) {
                        cache.emit(&mut chunk, &mut out, miss);
                    }
                }
                cache.emit(&mut chunk, &mut out, miss);
                assert!(out == expected, "capacity {capacity}, round {round}");
            }
        }
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
        // 2,000 pieces in a table of 2,048 lines of 2 slots: about 1 piece a line, so many lines
        // get more pieces than they have slots; the next lines take them.
        let mut cache = PieceCache::new(0, 8192);
        let mut unique: Vec<(Vec<u8>, Vec<u32>)> = Vec::new();
        for (bytes, ids) in pieces(4000) {
            if !unique.iter().any(|(seen, _)| *seen == bytes) && unique.len() < 2000 {
                unique.push((bytes, ids));
            }
        }
        for (bytes, ids) in &unique {
            let mut out = Vec::new();
            if !cache.extend(bytes, packed(bytes), &mut out) {
                cache.insert(bytes, ids);
            }
        }
        for (bytes, ids) in &unique {
            let mut out = vec![7];
            assert!(cache.extend(bytes, packed(bytes), &mut out), "{bytes:?} was evicted");
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
                if cache.extend(bytes, key_in(bytes, bytes), &mut out) {
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
        assert!(cache.extend(&small, 0, &mut out) && out == ids);
        cache.insert(&[b'z'; 1030], &[9]);
        assert!(!cache.extend(&[b'z'; 1030], 0, &mut Vec::new()));
    }

    #[test]
    fn pieces_of_16_to_31_bytes_take_the_wide_array_first_come_first_served() {
        // 4 wide lines; the map holds at most 16 pieces.
        let mut cache = PieceCache::new(0, 64);
        let wide: Vec<Vec<u8>> = (0..12u8)
            .map(|i| (0..16 + i as usize % 16).map(|at| b'a' + (i + at as u8) % 26).collect())
            .collect();
        for (i, bytes) in wide.iter().enumerate() {
            let ids: Vec<u32> = (0..1 + i as u32 % 6).collect();
            cache.insert(bytes, &ids);
            let mut out = Vec::new();
            assert!(cache.extend(bytes, key_in(bytes, bytes), &mut out) && out == ids, "{i}");
        }
        // Four lines: at most four pieces are in the array, the others in the map.
        let taken = cache.wide.iter().filter(|slot| slot.length != 0).count();
        assert!((1..=4).contains(&taken) && cache.other.len() == 12 - taken);
        for (i, bytes) in wide.iter().enumerate() {
            let mut out = vec![9];
            let ids: Vec<u32> = (0..1 + i as u32 % 6).collect();
            assert!(cache.extend(bytes, 0, &mut out) && out[1..] == ids[..], "{i}");
        }
        // Seven ids go to the map; a full map empties the wide array with it.
        let (bytes, ids) = (vec![b'z'; 20], (0..7).collect::<Vec<u32>>());
        let before = cache.other.len();
        cache.insert(&bytes, &ids);
        assert_eq!(cache.other.len(), before + 1);
        for i in 0..64u32 {
            cache.insert(format!("{i:>40}").as_bytes(), &[i]);
        }
        assert!(cache.other.len() <= 16);
        assert!(cache.wide.iter().all(|slot| slot.length == 0));
    }

    #[test]
    fn a_full_table_answers_right_or_not_at_all() {
        let all = pieces(3000);
        let mut cache = PieceCache::new(0, 64);
        for round in 0..3 {
            for (bytes, ids) in &all {
                let mut out = Vec::new();
                if cache.extend(bytes, packed(bytes), &mut out) {
                    assert_eq!(out, *ids, "round {round}, {bytes:?}");
                } else {
                    cache.insert(bytes, ids);
                }
            }
        }
    }
}
