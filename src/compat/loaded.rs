//! Segmenters for tokenisers loaded from other libraries' files (HF tokenizer.json, SentencePiece
//! .model). Their vocabularies are character strings, not bytes: a word starts as its UTF-8
//! characters, a character outside the vocabulary becomes its `<0xXX>` byte tokens (byte
//! fallback) or the unknown token, and the rules follow the original libraries exactly:
//! - `CharMerges` (HF BPE and SentencePiece BPE): repeatedly join the adjacent pair of lowest
//!   rank, leftmost first;
//! - `CharViterbi` (Unigram): the segmentation of highest total score; a character no token
//!   starts with costs the unknown score; earlier candidates win ties;
//! - `CharLongestMatch` (WordPiece): the longest vocabulary prefix, then the longest
//!   continuation (with the `##` marker), and the whole word is unknown if a step finds nothing.
//!
//! Each word arrives as the UTF-8 bytes of one pre-token; bytes that are not UTF-8 count as
//! one-byte characters (they can only reach the vocabulary through byte fallback).
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::sentencepiece::{Part, SentencePieceNormalizer};
use crate::segment::encoder::{with_threads, Encoder};
use crate::segment::Segmenter;

const NONE: u32 = u32::MAX;

/// The byte length of the UTF-8 character starting at `text[at]`, or None if the bytes there
/// are not one (what `std::str::from_utf8` accepts, checked inline: this runs per character).
#[inline]
pub(crate) fn utf8_char_len(text: &[u8], at: usize) -> Option<usize> {
    // Lead byte -> length and the range of the second byte (which rules out overlong forms,
    // surrogates and code points above U+10FFFF).
    let (length, low, high) = match text[at] {
        0x00..=0x7f => return Some(1),
        0xc2..=0xdf => (2, 0x80, 0xbf),
        0xe0 => (3, 0xa0, 0xbf),
        0xe1..=0xec | 0xee..=0xef => (3, 0x80, 0xbf),
        0xed => (3, 0x80, 0x9f),
        0xf0 => (4, 0x90, 0xbf),
        0xf1..=0xf3 => (4, 0x80, 0xbf),
        0xf4 => (4, 0x80, 0x8f),
        _ => return None,
    };
    let bytes = text.get(at..at + length)?;
    let second_fits = (low..=high).contains(&bytes[1]);
    (second_fits && bytes[2..].iter().all(|&byte| byte & 0xc0 == 0x80)).then_some(length)
}

/// The byte length of the character starting at `text[at]` (1 for a byte that starts none).
#[inline]
fn char_len(text: &[u8], at: usize) -> usize {
    utf8_char_len(text, at).unwrap_or(1)
}

/// What becomes of characters outside the vocabulary: their byte tokens, else the unknown token.
struct Unknowns {
    /// `<0xXX>` token of each byte, NONE where the vocabulary has none.
    byte_ids: [u32; 256],
    byte_fallback: bool,
    unk: Option<u32>,
    /// Consecutive unknown characters become one unknown token.
    fuse_unk: bool,
}

impl Unknowns {
    fn new(byte_tokens: &[(u8, u32)], byte_fallback: bool, unk: Option<u32>, fuse_unk: bool) -> Self {
        let mut byte_ids = [NONE; 256];
        for &(byte, id) in byte_tokens {
            byte_ids[byte as usize] = id;
        }
        Unknowns { byte_ids, byte_fallback, unk, fuse_unk }
    }

    /// The byte tokens of `text`, if byte fallback is on and every byte has one.
    fn bytes_of(&self, text: &[u8]) -> Option<Vec<u32>> {
        if !self.byte_fallback {
            return None;
        }
        text.iter().map(|&b| Some(self.byte_ids[b as usize]).filter(|&id| id != NONE)).collect()
    }
}

/// A token map from strings to (id, score), with the longest key length for prefix searches.
#[derive(Default)]
struct Strings {
    ids: FxHashMap<Box<[u8]>, (u32, f64)>,
    longest: usize,
}

impl Strings {
    fn insert(&mut self, text: &[u8], id: u32, score: f64) {
        self.longest = self.longest.max(text.len());
        self.ids.entry(text.into()).or_insert((id, score));
    }

    #[inline]
    fn get(&self, text: &[u8]) -> Option<(u32, f64)> {
        self.ids.get(text).copied()
    }
}

/// A path score: SentencePiece sums in f32, HF in f64, and the last bit decides ties.
pub trait Score: Copy + PartialOrd + std::ops::Add<Output = Self> + Send + Sync + 'static {
    const ZERO: Self;
    const NEG_INFINITY: Self;
    fn from_f64(value: f64) -> Self;
}

impl Score for f32 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl Score for f64 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn from_f64(value: f64) -> Self {
        value
    }
}

/// A byte trie of the lattice strings: walking a word from a start position visits every token
/// that starts there, shortest first, and stops as soon as no token continues. It is a double
/// array: the child of slot `s` by byte `b` is slot `base(s) + b` if that slot's parent is `s`.
/// A slot also holds the token that ends there, so a step of the walk loads one slot.
struct Trie<S> {
    slots: Vec<TrieSlot<S>>,
}

#[derive(Clone, Copy)]
struct TrieSlot<S> {
    /// The slot this one is a child of (NONE: free; the root is its own parent).
    parent: u32,
    /// Where this slot's children start (child by byte b: base + b). A slot without children
    /// points past the last base, where no slot has a parent, so a walk needs no other check.
    base: u32,
    /// The id of the token that ends here, or NONE (with score -inf, so it never wins).
    id: u32,
    score: S,
}

impl<S: Score> Trie<S> {
    const FREE: TrieSlot<S> = TrieSlot { parent: NONE, base: 0, id: NONE, score: S::NEG_INFINITY };

    fn new(entries: &[(Vec<u8>, u32, f64)]) -> Self {
        // First a plain trie (node -> sorted children), then each node's children are placed in
        // the double array at the lowest base where all their slots are free.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut token_of: Vec<(u32, S)> = vec![(NONE, S::NEG_INFINITY)];
        for (text, id, score) in entries {
            let mut node = 0usize;
            for &byte in text {
                node = match children[node].iter().find(|&&(b, _)| b == byte) {
                    Some(&(_, child)) => child as usize,
                    None => {
                        let child = children.len();
                        children[node].push((byte, child as u32));
                        children.push(Vec::new());
                        token_of.push((NONE, S::NEG_INFINITY));
                        child
                    }
                };
            }
            // The first of two equal strings keeps its id, as a string -> id table would.
            if token_of[node].0 == NONE {
                token_of[node] = (*id, S::from_f64(*score));
            }
        }
        let slot_of_node = |node: usize, parent: u32| TrieSlot { parent, base: 0, id: token_of[node].0, score: token_of[node].1 };
        let mut slots = vec![slot_of_node(0, 0)];
        let mut slot_of = vec![0u32; children.len()];
        // The free slots, to place children without stepping through runs of taken ones.
        let mut free = FreeSlots::default();
        free.take(0);
        let mut queue = std::collections::VecDeque::from([0usize]);
        while let Some(node) = queue.pop_front() {
            let kids = &children[node];
            if kids.is_empty() {
                continue;
            }
            // The lowest base (at least 1) that puts every child in a free slot: the lowest
            // child goes to each free slot in turn until the others fit too.
            let lowest = kids.iter().map(|&(b, _)| b as usize).min().unwrap();
            let mut candidate = lowest + 1;
            let base = loop {
                let base = free.first_from(candidate) - lowest;
                if kids.iter().all(|&(b, _)| slots.get(base + b as usize).is_none_or(|slot| slot.parent == NONE)) {
                    break base;
                }
                candidate = base + lowest + 1;
            };
            let parent = slot_of[node];
            slots[parent as usize].base = base as u32;
            for &(byte, child) in kids {
                let slot = base + byte as usize;
                if slot >= slots.len() {
                    slots.resize(slot + 1, Self::FREE);
                }
                slots[slot] = slot_of_node(child as usize, parent);
                free.take(slot);
                slot_of[child as usize] = slot as u32;
                queue.push_back(child as usize);
            }
        }
        // Room for any byte after the last base, so a lookup never runs off the end; slots
        // without children point there, where no slot has a parent.
        let dead = slots.len() as u32;
        slots.resize(slots.len() + 256, Self::FREE);
        for slot in &mut slots {
            if slot.base == 0 {
                slot.base = dead;
            }
        }
        Trie { slots }
    }
}

/// Which slots of a growing double array are taken: each taken slot points further on, towards
/// a free one (a union-find with path compression), so finding the first free slot from any
/// position skips taken runs in near-constant time. Positions past the end are free.
#[derive(Default)]
struct FreeSlots {
    /// next[i] == i: slot i is free; otherwise a later slot to look from.
    next: Vec<usize>,
}

impl FreeSlots {
    fn first_from(&mut self, from: usize) -> usize {
        let mut root = from;
        while root < self.next.len() && self.next[root] != root {
            root = self.next[root];
        }
        let mut at = from;
        while at < root {
            let up = self.next[at];
            self.next[at] = root;
            at = up;
        }
        root
    }

    fn take(&mut self, slot: usize) {
        if slot >= self.next.len() {
            let len = self.next.len();
            self.next.extend(len..=slot);
        }
        self.next[slot] = slot + 1;
    }
}

/// Single steps, for checking the trie (the Viterbi walk inlines them).
#[cfg(test)]
impl<S: Score> Trie<S> {
    fn child(&self, slot: u32, byte: u8) -> Option<u32> {
        let next = self.slots[slot as usize].base + byte as u32;
        (self.slots[next as usize].parent == slot).then_some(next)
    }

    /// The (id, score) of the token ending at `slot`, if one does.
    fn token(&self, slot: u32) -> Option<(u32, S)> {
        let slot = &self.slots[slot as usize];
        (slot.id != NONE).then_some((slot.id, slot.score))
    }
}

// ---- BPE -----------------------------------------------------------------------------------

/// BPE on characters: pair (left id, right id) -> (rank, merged id).
pub struct CharMerges {
    tokens: Strings,
    /// The tokens that are one symbol (a character, or a byte with `byte_symbols`), by
    /// `symbol_key`: the lookup every symbol of every word makes.
    symbols: FxHashMap<u64, u32>,
    /// `symbols` of the ASCII characters (NONE: not a token), looked up without hashing.
    ascii_symbols: [u32; 128],
    /// Symbols are single bytes (byte-level vocabularies) instead of characters.
    byte_symbols: bool,
    /// A word that is itself a token is that token, whatever the merges say (HF's ignore_merges).
    ignore_merges: bool,
    pairs: FxHashMap<u64, (u32, u32)>,
    unknowns: Unknowns,
    /// Whether a word may be cut before each "▁" and each stretch merged on its own: no merge
    /// joins a symbol to a following one that starts with "▁" (SentencePiece's pieces carry it
    /// only first), so merges never cross those cuts and stretches merge independently,
    /// each in the order it would within the word. Shorter heaps, same ids.
    cut_at_markers: bool,
}

/// Words of at most this many symbols merge by scanning an array of pair ranks; longer ones use
/// a heap (the scan is quadratic, the heap's bookkeeping costs more on short words).
const SHORT_WORD: usize = 32;

/// SentencePiece's word marker, which stands for a space.
const MARKER: &[u8] = "\u{2581}".as_bytes();

/// A symbol of at most 4 bytes packed into an integer, with its length (so "a" and "a\0" differ).
#[inline]
fn symbol_key(symbol: &[u8]) -> u64 {
    let mut packed = [0u8; 4];
    packed[..symbol.len()].copy_from_slice(symbol);
    u32::from_le_bytes(packed) as u64 | (symbol.len() as u64) << 32
}

/// The tokens of `entries` that are one symbol: one byte, or one UTF-8 character.
fn symbol_ids(entries: &[(Vec<u8>, u32, f64)], byte_symbols: bool) -> FxHashMap<u64, u32> {
    let mut symbols = FxHashMap::default();
    for (text, id, _) in entries {
        let one = if byte_symbols { text.len() == 1 } else { !text.is_empty() && char_len(text, 0) == text.len() };
        if one {
            symbols.entry(symbol_key(text)).or_insert(*id);
        }
    }
    symbols
}

/// The ids of the one-character ASCII symbols, NONE where there is none.
fn ascii_symbols(symbols: &FxHashMap<u64, u32>) -> [u32; 128] {
    let mut table = [NONE; 128];
    for byte in 0..128u8 {
        if let Some(&id) = symbols.get(&symbol_key(&[byte])) {
            table[byte as usize] = id;
        }
    }
    table
}

impl CharMerges {
    /// Whether no merge's right side starts with the marker symbol (see `cut_at_markers`); false
    /// if the marker is not a symbol (it could become byte tokens or part of an unknown run).
    fn merges_stop_at_markers(symbols: &FxHashMap<u64, u32>, pairs: &FxHashMap<u64, (u32, u32)>) -> bool {
        let Some(&marker) = symbols.get(&symbol_key(MARKER)) else { return false };
        // The ids that can start with the marker: it, and what merges make with one on the left.
        let mut starts_with_marker = rustc_hash::FxHashSet::from_iter([marker]);
        loop {
            let known = starts_with_marker.len();
            for (&pair, &(_, merged)) in pairs {
                if starts_with_marker.contains(&((pair >> 32) as u32)) {
                    starts_with_marker.insert(merged);
                }
            }
            if starts_with_marker.len() == known {
                break;
            }
        }
        pairs.keys().all(|&pair| !starts_with_marker.contains(&(pair as u32)))
    }

    /// The first symbols of a word (HF's rule): each character's token, else its byte tokens,
    /// else the unknown token (fused with a preceding unknown if `fuse_unk`), else nothing.
    fn initial_symbols(&self, word: &[u8], ids: &mut Vec<u32>) {
        let mut pending_unk = false;
        let mut at = 0;
        while at < word.len() {
            let len = if self.byte_symbols { 1 } else { char_len(word, at) };
            let character = &word[at..at + len];
            at += len;
            let symbol = match character {
                &[byte] if byte < 0x80 => Some(self.ascii_symbols[byte as usize]).filter(|&id| id != NONE),
                _ => self.symbols.get(&symbol_key(character)).copied(),
            };
            if let Some(id) = symbol {
                if pending_unk {
                    ids.push(self.unknowns.unk.unwrap_or(NONE));
                    pending_unk = false;
                }
                ids.push(id);
            } else if let Some(bytes) = self.unknowns.bytes_of(character) {
                ids.extend(bytes);
            } else if let Some(unk) = self.unknowns.unk {
                if pending_unk && !self.unknowns.fuse_unk {
                    ids.push(unk);
                }
                pending_unk = true;
            }
        }
        if pending_unk {
            ids.push(self.unknowns.unk.unwrap_or(NONE));
        }
    }

    #[inline]
    fn join(&self, left: u32, right: u32) -> (u32, u32) {
        self.pairs.get(&(((left as u64) << 32) | right as u64)).copied().unwrap_or((NONE, NONE))
    }
}

impl Segmenter for CharMerges {
    fn segment(&self, word: &[u8], out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some((id, _)) = self.tokens.get(word) {
                out.push(id);
                return;
            }
        }
        if !self.cut_at_markers {
            self.merge(word, out);
            return;
        }
        let mut start = 0;
        let mut at = 1;
        while let Some(found) = word.get(at..).and_then(|rest| rest.iter().position(|&byte| byte == MARKER[0])) {
            at += found;
            if word[at..].starts_with(MARKER) {
                self.merge(&word[start..at], out);
                start = at;
            }
            at += 1;
        }
        self.merge(&word[start..], out);
    }
}

impl CharMerges {
    /// BPE on one word (or one stretch of it): repeatedly join the adjacent pair of lowest
    /// rank, leftmost first.
    fn merge(&self, word: &[u8], out: &mut Vec<u32>) {
        let mark = out.len();
        self.initial_symbols(word, out);
        let n = out.len() - mark;
        if n < 2 {
            return;
        }
        if n <= SHORT_WORD {
            self.merge_short(out, mark);
        } else {
            let ids = out.split_off(mark);
            self.merge_long(ids, out);
        }
    }

    /// `merge` on the at most `SHORT_WORD` symbols at `out[mark..]`, in place: each round scans
    /// the ranks of the adjacent pairs (kept in an array, two looked up again per merge).
    fn merge_short(&self, out: &mut Vec<u32>, mark: usize) {
        let symbols = &mut out[mark..];
        let mut len = symbols.len();
        // pairs[i]: (rank, merged id) of symbols i and i + 1; rank NONE: no merge.
        let mut pairs = [(NONE, NONE); SHORT_WORD];
        for i in 0..len - 1 {
            pairs[i] = self.join(symbols[i], symbols[i + 1]);
        }
        loop {
            let mut at = 0;
            for i in 1..len - 1 {
                if pairs[i].0 < pairs[at].0 {
                    at = i;
                }
            }
            let (rank, merged) = pairs[at];
            if rank == NONE {
                break;
            }
            symbols[at] = merged;
            symbols.copy_within(at + 2..len, at + 1);
            if at + 2 < len {
                pairs.copy_within(at + 2..len - 1, at + 1);
            }
            len -= 1;
            if len < 2 {
                break;
            }
            if at + 1 < len {
                pairs[at] = self.join(merged, symbols[at + 1]);
            } else {
                pairs[at] = (NONE, NONE);
            }
            if at > 0 {
                pairs[at - 1] = self.join(symbols[at - 1], merged);
            }
        }
        out.truncate(mark + len);
    }

    /// `merge` on many symbols: a linked list of them and a heap of candidate pairs.
    fn merge_long(&self, mut ids: Vec<u32>, out: &mut Vec<u32>) {
        let n = ids.len();
        // A linked list of symbols and a heap of candidate pairs (rank, position); entries made
        // stale by a merge are recognised on pop because the pair at that position changed.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            let (rank, _) = self.join(ids[i], ids[i + 1]);
            if rank != NONE {
                heap.push(Reverse((rank, i)));
            }
        }
        while let Some(Reverse((rank, i))) = heap.pop() {
            if !alive[i] || next[i] >= n {
                continue;
            }
            let right = next[i];
            let (current_rank, merged) = self.join(ids[i], ids[right]);
            if current_rank != rank {
                continue;
            }
            ids[i] = merged;
            alive[right] = false;
            next[i] = next[right];
            if next[i] < n {
                prev[next[i]] = i;
            }
            if next[i] < n {
                let (rank, _) = self.join(ids[i], ids[next[i]]);
                if rank != NONE {
                    heap.push(Reverse((rank, i)));
                }
            }
            if i > 0 && prev[i] < n {
                let left = prev[i];
                let (rank, _) = self.join(ids[left], ids[i]);
                if rank != NONE {
                    heap.push(Reverse((rank, left)));
                }
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i];
        }
    }
}

// ---- Unigram -------------------------------------------------------------------------------

/// Unigram's best segmentation over the lattice of vocabulary strings, summing scores in `S`.
pub struct CharViterbi<S> {
    lattice: Trie<S>,
    unknowns: Unknowns,
    unk_score: S,
    /// Every score is at most `SMALL` in size, so no path's sum overflows to -inf (nor is NaN).
    small_scores: bool,
}

/// Scores up to this size keep any sum of 2^32 of them far from overflowing, in f32 too.
const SMALL: f64 = 1e20;

#[derive(Clone, Copy)]
struct Best<S> {
    score: S,
    /// Where the best path's last token starts; NONE: no path reaches here yet.
    start: u32,
    id: u32,
}

impl<S: Score> CharViterbi<S> {
    fn new(lattice: &[(Vec<u8>, u32, f64)], unknowns: Unknowns, unk_score: f64) -> Self {
        CharViterbi {
            lattice: Trie::new(lattice),
            unknowns,
            unk_score: S::from_f64(unk_score),
            small_scores: lattice.iter().map(|&(_, _, score)| score).chain([unk_score]).all(|score| score.abs() <= SMALL),
        }
    }

    /// Forward pass: `best[end]` becomes the best path to each character boundary (unreached
    /// positions start at score -inf). A candidate wins if it scores more, or if it is a token
    /// and nothing reached its end yet; with `SMALL_SCORES` every token's candidate is finite,
    /// so "more than -inf" says both. A match that ends inside a character is written to a
    /// position no path starts from or goes back through (both only visit boundaries), so it
    /// never counts and needs no check.
    #[inline(always)]
    fn forward<const SMALL_SCORES: bool>(&self, word: &[u8], best: &mut [Best<S>]) {
        let n = word.len();
        let slots = &self.lattice.slots;
        let root_base = slots[0].base;
        let mut start = 0;
        while start < n {
            let so_far = best[start].score;
            let first_len = char_len(word, start);
            let mut has_single_character = false;
            // Candidates in order of length, as the trie's prefix search yields them.
            let mut node = 0u32;
            let mut base = root_base;
            let mut end = start;
            while end < n {
                let next = base + word[end] as u32;
                let slot = &slots[next as usize];
                if slot.parent != node {
                    break;
                }
                node = next;
                base = slot.base;
                end += 1;
                let candidate = so_far + slot.score;
                let target = &mut best[end];
                let wins = candidate > target.score || (!SMALL_SCORES && slot.id != NONE && target.start == NONE);
                if wins {
                    *target = Best { score: candidate, start: start as u32, id: slot.id };
                }
                has_single_character |= (slot.id != NONE) & (end - start == first_len);
            }
            if !has_single_character {
                let candidate = so_far + self.unk_score;
                let target = &mut best[start + first_len];
                if target.start == NONE || candidate > target.score {
                    *target = Best { score: candidate, start: start as u32, id: NONE };
                }
            }
            start += first_len;
        }
    }
}

impl<S: Score> Segmenter for CharViterbi<S> {
    fn segment(&self, word: &[u8], out: &mut Vec<u32>) {
        let n = word.len();
        if n >= NONE as usize {
            // Positions are u32: a pre-token of 4 GiB or more (whose lattice alone would take 50 GB)
            // is cut in two at a character boundary.
            let half = (n / 2..n).find(|&at| word[at] & 0xc0 != 0x80).unwrap_or(n / 2);
            self.segment(&word[..half], out);
            self.segment(&word[half..], out);
            return;
        }
        let mut best = vec![Best { score: S::NEG_INFINITY, start: NONE, id: NONE }; n + 1];
        best[0] = Best { score: S::ZERO, start: 0, id: NONE };
        if self.small_scores {
            self.forward::<true>(word, &mut best);
        } else {
            self.forward::<false>(word, &mut best);
        }
        // Back from the end; NONE marks an unknown span.
        let mut path: Vec<(usize, usize, u32)> = Vec::new();
        let mut end = n;
        while end > 0 {
            let node = best[end];
            path.push((node.start as usize, end, node.id));
            end = node.start as usize;
        }
        path.reverse();
        let mut i = 0;
        while i < path.len() {
            let (start, mut end, id) = path[i];
            i += 1;
            if id != NONE {
                out.push(id);
                continue;
            }
            if self.unknowns.fuse_unk {
                while i < path.len() && path[i].2 == NONE {
                    end = path[i].1;
                    i += 1;
                }
            }
            match self.unknowns.bytes_of(&word[start..end]) {
                Some(bytes) => out.extend(bytes),
                None => out.push(self.unknowns.unk.unwrap_or(NONE)),
            }
        }
    }
}

// ---- WordPiece -----------------------------------------------------------------------------

/// WordPiece's greedy longest match, with a continuation marker and one unknown token per word
/// that cannot be cut or has more than `max_chars` characters.
pub struct CharLongestMatch {
    tokens: Strings,
    continuation: Vec<u8>,
    max_chars: usize,
    unk: u32,
}

impl Segmenter for CharLongestMatch {
    fn segment(&self, word: &[u8], out: &mut Vec<u32>) {
        let mut boundaries = vec![0];
        let mut at = 0;
        while at < word.len() {
            at += char_len(word, at);
            boundaries.push(at);
        }
        if boundaries.len() - 1 > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut key = Vec::new();
        let mut first = 0;
        while first + 1 < boundaries.len() {
            let mut found = None;
            for last in (first + 1..boundaries.len()).rev() {
                key.clear();
                if first > 0 {
                    key.extend_from_slice(&self.continuation);
                }
                key.extend_from_slice(&word[boundaries[first]..boundaries[last]]);
                if let Some((id, _)) = self.tokens.get(&key) {
                    found = Some((id, last));
                    break;
                }
            }
            match found {
                Some((id, last)) => {
                    out.push(id);
                    first = last;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

// ---- Loaded pipelines -------------------------------------------------------------------

/// A document as a loaded pipeline's Python stages leave it: words back to back in `data`, cut
/// at `lengths`, and the added tokens found in it as (index of the word they precede, id), in
/// order (an index equal to the number of words puts the token at the end).
struct Words<'a> {
    data: &'a [u8],
    lengths: &'a [usize],
    added: &'a [(usize, u32)],
}

/// A `Words` document as Python passes it: (data, lengths, added).
type WordsFromPython<'py> = (Bound<'py, PyBytes>, Vec<usize>, Vec<(usize, u32)>);

impl<'a> Words<'a> {
    fn new(data: &'a [u8], lengths: &'a [usize], added: &'a [(usize, u32)]) -> PyResult<Self> {
        if lengths.iter().sum::<usize>() != data.len() {
            return Err(PyValueError::new_err("the word lengths do not add up to the data"));
        }
        let in_order = added.windows(2).all(|pair| pair[0].0 <= pair[1].0);
        if !in_order || added.last().is_some_and(|&(before, _)| before > lengths.len()) {
            return Err(PyValueError::new_err("the added tokens' word indices must be in order and at most the number of words"));
        }
        Ok(Words { data, lengths, added })
    }
}

impl Encoder {
    /// SentencePiece's ids of `text`: `normalizer`'s output cut at its user-defined pieces, the
    /// stretches between them segmented whole, as SentencePiece does. The normaliser writes
    /// U+FFFD for invalid input bytes, so the stretches skip the pre-tokeniser's UTF-8 check.
    fn sentencepiece_ids(&self, normalizer: &SentencePieceNormalizer, text: &[u8]) -> Vec<u32> {
        let normalized = normalizer.normalize_bytes(text);
        let mut out = Vec::with_capacity(normalized.len() / 2);
        normalizer.split_user_defined(&normalized, |part| match part {
            Part::Text(stretch) => self.segment_word_into(stretch, &mut out),
            Part::UserDefined(id) => out.push(id),
        });
        out
    }

    /// The ids of a pre-tokenised document: each word through the core pre-tokeniser (the
    /// pipeline's regex, if it runs here) and the segmenter, the added tokens in their places.
    fn words_ids(&self, document: &Words) -> Vec<u32> {
        let mut out = Vec::with_capacity(document.data.len() / 2);
        let mut added = document.added.iter().peekable();
        let mut start = 0;
        for (index, &length) in document.lengths.iter().enumerate() {
            while let Some(&(_, id)) = added.next_if(|&&(before, _)| before == index) {
                out.push(id);
            }
            if length > 0 {
                self.encode_ordinary_into(&document.data[start..start + length], &mut out);
            }
            start += length;
        }
        out.extend(added.map(|&(_, id)| id));
        out
    }
}

// ---- Python constructors ---------------------------------------------------------------------

fn strings(entries: &[(Vec<u8>, u32, f64)]) -> Strings {
    let mut map = Strings::default();
    for (text, id, score) in entries {
        map.insert(text, *id, *score);
    }
    map
}

#[pymethods]
impl Encoder {
    /// Character-level BPE. `tokens[i]` are the bytes id i decodes to; `strings` are the
    /// (text, id) pairs a character or merge result is looked up by; `merges[k] = (left, right,
    /// merged)` has rank k; `byte_tokens` are (byte, id) of the `<0xXX>` tokens. With
    /// `byte_symbols` a word starts as single bytes; `pattern` pre-tokenises in the core.
    /// `merge_ranks[k]`, when given, is merge k's rank instead of k (equal ranks: leftmost first).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pattern, tokens, strings, merges, byte_tokens, byte_fallback, unk, fuse_unk, byte_symbols, ignore_merges, merge_ranks))]
    fn char_merges(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        strings: Vec<(Vec<u8>, u32)>,
        merges: Vec<(u32, u32, u32)>,
        byte_tokens: Vec<(u8, u32)>,
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
        byte_symbols: bool,
        ignore_merges: bool,
        merge_ranks: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        if merge_ranks.as_ref().is_some_and(|ranks| ranks.len() != merges.len()) {
            return Err(PyValueError::new_err("one rank per merge is needed"));
        }
        let mut pairs = FxHashMap::default();
        for (index, &(left, right, merged)) in merges.iter().enumerate() {
            let rank = merge_ranks.as_ref().map_or(index as u32, |ranks| ranks[index]);
            // The first of two equal merges wins, as in a rank table built from the list.
            pairs.entry(((left as u64) << 32) | right as u64).or_insert((rank, merged));
        }
        let entries: Vec<(Vec<u8>, u32, f64)> = strings.into_iter().map(|(t, id)| (t, id, 0.0)).collect();
        let symbols = symbol_ids(&entries, byte_symbols);
        let cut_at_markers = !byte_symbols && CharMerges::merges_stop_at_markers(&symbols, &pairs);
        let segmenter = CharMerges {
            tokens: self::strings(&entries),
            ascii_symbols: ascii_symbols(&symbols),
            symbols,
            byte_symbols,
            ignore_merges,
            pairs,
            unknowns: Unknowns::new(&byte_tokens, byte_fallback, unk, fuse_unk),
            cut_at_markers,
        };
        Ok(Encoder::from_parts(pattern, Box::new(segmenter), tokens, Vec::new())?.dropping_unmatched())
    }

    /// Unigram (`pattern`: the pre-tokeniser regex run in the core, if any): `lattice` holds the (text, id, score) entries a word can be cut into;
    /// `unk_score` is the score of an unknown character; `single_precision` sums scores in f32.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pattern, tokens, lattice, byte_tokens, byte_fallback, unk, fuse_unk, unk_score, single_precision))]
    fn char_viterbi(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        lattice: Vec<(Vec<u8>, u32, f64)>,
        byte_tokens: Vec<(u8, u32)>,
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
        unk_score: f64,
        single_precision: bool,
    ) -> PyResult<Self> {
        if !unk_score.is_finite() {
            return Err(PyValueError::new_err("the unknown score must be finite"));
        }
        let unknowns = Unknowns::new(&byte_tokens, byte_fallback, unk, fuse_unk);
        let segmenter: Box<dyn Segmenter> = if single_precision {
            Box::new(CharViterbi::<f32>::new(&lattice, unknowns, unk_score))
        } else {
            Box::new(CharViterbi::<f64>::new(&lattice, unknowns, unk_score))
        };
        Ok(Encoder::from_parts(pattern, segmenter, tokens, Vec::new())?.dropping_unmatched())
    }

    /// WordPiece (`pattern` as for Unigram): (text, id) `strings` include the continuation forms (e.g. "##ing").
    #[staticmethod]
    #[pyo3(signature = (pattern, tokens, strings, continuation, max_chars, unk))]
    fn char_longest_match(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        strings: Vec<(Vec<u8>, u32)>,
        continuation: Vec<u8>,
        max_chars: usize,
        unk: u32,
    ) -> PyResult<Self> {
        let entries: Vec<(Vec<u8>, u32, f64)> = strings.into_iter().map(|(t, id)| (t, id, 0.0)).collect();
        let segmenter = CharLongestMatch { tokens: self::strings(&entries), continuation, max_chars, unk };
        Ok(Encoder::from_parts(pattern, Box::new(segmenter), tokens, Vec::new())?.dropping_unmatched())
    }

    /// The ids SentencePiece gives `text` (UTF-8 bytes).
    fn encode_sentencepiece(&self, py: Python<'_>, normalizer: &Bound<'_, SentencePieceNormalizer>, text: &[u8]) -> Vec<u32> {
        let normalizer = normalizer.get();
        py.detach(|| self.sentencepiece_ids(normalizer, text))
    }

    /// `encode_sentencepiece` of many texts (str, or bytes the caller checked are UTF-8), in
    /// parallel with the GIL released, on `num_threads` threads or rayon's default pool; each
    /// text's ids do not depend on the others, so neither do they on the thread count.
    #[pyo3(signature = (normalizer, texts, num_threads=None))]
    fn encode_sentencepiece_batch(
        &self,
        py: Python<'_>,
        normalizer: &Bound<'_, SentencePieceNormalizer>,
        texts: Vec<Bound<'_, PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let normalizer = normalizer.get();
        self.run_batch(py, &texts, num_threads, |_, text| Ok(self.sentencepiece_ids(normalizer, text)))
    }

    /// The ids of one document pre-tokenised by a loaded pipeline: its words back to back in
    /// `data`, cut at `lengths`, with the `added` tokens as (index of the word they precede, id).
    fn encode_words(&self, py: Python<'_>, data: &[u8], lengths: Vec<usize>, added: Vec<(usize, u32)>) -> PyResult<Vec<u32>> {
        let document = Words::new(data, &lengths, &added)?;
        Ok(py.detach(|| self.words_ids(&document)))
    }

    /// `encode_words` of many (data, lengths, added) documents, in parallel with the GIL
    /// released, on `num_threads` threads or rayon's default pool; ids in input order.
    #[pyo3(signature = (documents, num_threads=None))]
    fn encode_words_batch(
        &self,
        py: Python<'_>,
        documents: Vec<WordsFromPython<'_>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let documents: Vec<Words> = documents
            .iter()
            .map(|(data, lengths, added)| Words::new(data.as_bytes(), lengths, added))
            .collect::<PyResult<_>>()?;
        py.detach(|| with_threads(num_threads, || documents.par_iter().map(|document| self.words_ids(document)).collect()))
    }
}

#[cfg(test)]
mod tests {
    use crate::segment::rng::SplitMix64;
    use super::*;

    /// The inline character length agrees with `std::str::from_utf8` on every lead byte, every
    /// second byte and the edges of the continuation range, truncated or not.
    #[test]
    fn utf8_char_len_agrees_with_from_utf8() {
        for lead in 0..=255u8 {
            for second in 0..=255u8 {
                for rest in [[0x80, 0x80], [0xbf, 0xbf], [0x80, 0x41], [0xc0, 0x80], [0xbf, 0x7f]] {
                    let bytes = [lead, second, rest[0], rest[1]];
                    for available in 1..=4 {
                        let text = &bytes[..available];
                        let expected = (1..=available).find(|&length| std::str::from_utf8(&text[..length]).is_ok());
                        // from_utf8 accepts a shorter prefix only if that prefix is the whole character.
                        let expected = expected.filter(|&length| length == 1 || text[0] >= 0x80);
                        assert_eq!(utf8_char_len(text, 0), expected, "{text:x?}");
                    }
                }
            }
        }
    }

    /// A BPE segmenter over the letters a-d and "▁" whose merges make every string of up to 3
    /// symbols, with scrambled ranks; `right_marker` adds merges whose right side starts with "▁".
    fn letter_merges(right_marker: bool) -> CharMerges {
        let letters = ["a", "b", "c", "d", "\u{2581}"];
        let mut texts: Vec<String> = letters.iter().map(|l| l.to_string()).collect();
        let mut merges = Vec::new();
        let mut rng = SplitMix64::new(7);
        // The marker (symbol 4) is a right side only with `right_marker`.
        let rights = if right_marker { letters.len() } else { letters.len() - 1 };
        for left in 0..letters.len() {
            for right in 0..rights {
                let joined = format!("{}{}", texts[left], texts[right]);
                if rng.next_f64() < 0.3 {
                    continue;
                }
                texts.push(joined);
                merges.push((left as u32, right as u32, texts.len() as u32 - 1));
            }
        }
        for (_, _, merged) in merges.clone() {
            for last in 0..rights as u32 {
                if rng.next_f64() < 0.5 {
                    texts.push(format!("{}{}", texts[merged as usize], texts[last as usize]));
                    merges.push((merged, last, texts.len() as u32 - 1));
                }
            }
        }
        let entries: Vec<(Vec<u8>, u32, f64)> =
            texts.iter().enumerate().map(|(id, text)| (text.as_bytes().to_vec(), id as u32, 0.0)).collect();
        let mut pairs = FxHashMap::default();
        for (&(left, right, merged), rank) in merges.iter().zip((0..merges.len() as u32).map(|k| (k * 7919) % 64)) {
            pairs.entry(((left as u64) << 32) | right as u64).or_insert((rank, merged));
        }
        let symbols = symbol_ids(&entries, false);
        let cut_at_markers = CharMerges::merges_stop_at_markers(&symbols, &pairs);
        CharMerges {
            tokens: strings(&entries),
            ascii_symbols: ascii_symbols(&symbols),
            symbols,
            byte_symbols: false,
            ignore_merges: false,
            pairs,
            unknowns: Unknowns::new(&[], false, Some(999), true),
            cut_at_markers,
        }
    }

    fn random_word(rng: &mut SplitMix64, length: usize) -> Vec<u8> {
        let alphabet = ["a", "b", "c", "d", "\u{2581}", "x"];
        (0..length).flat_map(|_| alphabet[(rng.next_u64() % 6) as usize].bytes()).collect()
    }

    /// Short words merge by scanning, long ones with the heap, and a word may be cut before
    /// each "▁" only when no merge joins across it: all give what the plain heap merge gives.
    #[test]
    fn merge_shortcuts_give_the_heap_merge() {
        let mut rng = SplitMix64::new(1);
        for right_marker in [false, true] {
            let mut segmenter = letter_merges(right_marker);
            assert_eq!(segmenter.cut_at_markers, !right_marker);
            for _ in 0..3000 {
                let length = (rng.next_u64() % 80) as usize + 1;
                let word = random_word(&mut rng, length);
                let mut expected = Vec::new();
                segmenter.initial_symbols(&word, &mut expected);
                let mut heap = Vec::new();
                segmenter.merge_long(expected, &mut heap);
                let mut out = vec![12345];
                segmenter.segment(&word, &mut out);
                assert_eq!(&out[1..], &heap[..], "{}", String::from_utf8_lossy(&word));
                segmenter.cut_at_markers = false;
                let mut uncut = Vec::new();
                segmenter.segment(&word, &mut uncut);
                assert_eq!(uncut, heap);
                segmenter.cut_at_markers = !right_marker;
            }
        }
    }

    /// A lattice string that is half a character matches inside that character, and the
    /// match must not count; the same bytes as two invalid one-byte characters are its match.
    #[test]
    fn viterbi_matches_only_whole_characters() {
        // The half of 中 scores best; then an unknown byte (-0.5) would beat 中 (-1.375).
        let lattice: Vec<(Vec<u8>, u32, f64)> = vec![
            ("a".into(), 0, -1.0),
            ("中".into(), 1, -1.375),
            ("中".as_bytes()[..2].to_vec(), 2, -0.001),
        ];
        let segmenter = CharViterbi::<f32>::new(&lattice, Unknowns::new(&[], false, Some(99), true), -0.5);
        let mut out = Vec::new();
        segmenter.segment(&["中a".as_bytes(), b"\xe4\xb8", "中".as_bytes()].concat(), &mut out);
        assert_eq!(out, vec![1, 0, 2, 1]);
    }

    #[test]
    fn char_merges_replays_by_rank_and_falls_back_to_bytes() {
        let entries: Vec<(Vec<u8>, u32, f64)> =
            ["a", "b", "ab", "abb"].iter().enumerate().map(|(id, text)| (text.as_bytes().to_vec(), id as u32, 0.0)).collect();
        let mut pairs = FxHashMap::default();
        pairs.insert((0u64 << 32) | 1, (0, 2)); // a b -> ab
        pairs.insert((2u64 << 32) | 1, (1, 3)); // ab b -> abb
        let segmenter = CharMerges {
            tokens: strings(&entries),
            symbols: symbol_ids(&entries, false),
            ascii_symbols: ascii_symbols(&symbol_ids(&entries, false)),
            byte_symbols: false,
            ignore_merges: false,
            pairs,
            unknowns: Unknowns::new(&[(0xc3, 10), (0xa9, 11)], true, Some(9), true),
            cut_at_markers: false,
        };
        let mut out = Vec::new();
        segmenter.segment("abbaéb".as_bytes(), &mut out);
        assert_eq!(out, vec![3, 0, 10, 11, 1]);
    }

    /// The double-array trie finds exactly the vocabulary strings that prefix each suffix.
    #[test]
    fn trie_walks_find_every_prefix_token() {
        let words = ["a", "ab", "abc", "b", "bca", "\u{2581}the", "\u{2581}", "é", "éa", "zz", "\u{4e2d}\u{6587}"];
        let entries: Vec<(Vec<u8>, u32, f64)> =
            words.iter().enumerate().map(|(id, w)| (w.as_bytes().to_vec(), id as u32, -(id as f64))).collect();
        let trie = Trie::<f64>::new(&entries);
        let text = "abcabé\u{2581}theéazz\u{4e2d}\u{6587}bca".as_bytes();
        for start in 0..text.len() {
            let mut found = Vec::new();
            let mut slot = 0u32;
            for end in start..text.len() {
                let Some(next) = trie.child(slot, text[end]) else { break };
                slot = next;
                if let Some((id, _)) = trie.token(slot) {
                    found.push(id);
                }
            }
            let expected: Vec<u32> = (start + 1..=text.len())
                .filter_map(|end| words.iter().position(|w| w.as_bytes() == &text[start..end]).map(|id| id as u32))
                .collect();
            assert_eq!(found, expected, "start {start}");
        }
    }

    /// A token whose score is -inf (or so large that sums overflow) is still taken when it
    /// is the only way through, as SentencePiece takes it: such lattices use the checked walk.
    #[test]
    fn viterbi_takes_the_only_path_whatever_its_score() {
        let lattice: Vec<(Vec<u8>, u32, f64)> =
            vec![("a".into(), 0, f64::NEG_INFINITY), ("b".into(), 1, -1e38), ("ab".into(), 2, -3e38)];
        let segmenter = CharViterbi::<f32>::new(&lattice, Unknowns::new(&[], false, Some(99), true), -1.0);
        assert!(!segmenter.small_scores);
        let mut out = Vec::new();
        segmenter.segment(b"aabbab", &mut out);
        // Every path scores -inf; at each end the first candidate to arrive stays.
        assert_eq!(out, vec![0, 2, 1, 2]);
        let small: Vec<(Vec<u8>, u32, f64)> = vec![("a".into(), 0, -1e20), ("ab".into(), 1, -0.5e20)];
        assert!(CharViterbi::<f32>::new(&small, Unknowns::new(&[], false, Some(99), true), -1.0).small_scores);
    }

    /// Many strings with shared prefixes fill the double array densely, which is where the
    /// free-slot search must not place two children in one slot.
    #[test]
    fn trie_of_many_strings_finds_every_prefix_token() {
        let mut rng = SplitMix64::new(11);
        let pieces = ["a", "b", "e", "t", "\u{2581}", "é", "中", "\u{1F642}", "\x00", "\x7f"];
        let mut words: Vec<String> = Vec::new();
        for _ in 0..3000 {
            let length = rng.next_u64() % 6 + 1;
            words.push((0..length).map(|_| pieces[(rng.next_u64() % pieces.len() as u64) as usize]).collect());
        }
        let entries: Vec<(Vec<u8>, u32, f64)> =
            words.iter().enumerate().map(|(id, w)| (w.as_bytes().to_vec(), id as u32, 0.0)).collect();
        let trie = Trie::<f32>::new(&entries);
        let first_id: FxHashMap<&[u8], u32> =
            words.iter().enumerate().rev().map(|(id, w)| (w.as_bytes(), id as u32)).collect();
        for _ in 0..300 {
            let text: String = (0..8).map(|_| pieces[(rng.next_u64() % pieces.len() as u64) as usize]).collect();
            let text = text.as_bytes();
            let mut found = Vec::new();
            let mut slot = 0u32;
            for &byte in text {
                let Some(next) = trie.child(slot, byte) else { break };
                slot = next;
                if let Some((id, _)) = trie.token(slot) {
                    found.push(id);
                }
            }
            let expected: Vec<u32> = (1..=text.len()).filter_map(|end| first_id.get(&text[..end]).copied()).collect();
            assert_eq!(found, expected);
        }
    }

    #[test]
    fn longest_match_gives_one_unknown_for_an_uncuttable_word() {
        let mut tokens = Strings::default();
        for (id, text) in ["un", "##able", "##a", "x"].iter().enumerate() {
            tokens.insert(text.as_bytes(), id as u32, 0.0);
        }
        let segmenter = CharLongestMatch { tokens, continuation: b"##".to_vec(), max_chars: 100, unk: 99 };
        let mut out = Vec::new();
        segmenter.segment(b"unable", &mut out);
        segmenter.segment(b"unabz", &mut out);
        assert_eq!(out, vec![0, 1, 99]);
    }
}
