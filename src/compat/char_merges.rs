//! `CharMerges`: BPE on characters, as HF tokenizers' BPE and SentencePiece's BPE run it.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::{char_len, strings, CompatError, Strings, Unknowns, NONE};
use crate::segment::Segmenter;

/// BPE on characters: pair (left id, right id) -> (rank, merged id).
pub struct CharMerges {
    tokens: Strings,
    /// The tokens that are one symbol (a character, or a byte with `byte_symbols`), by
    /// `symbol_key`: the lookup every symbol of every pre-token makes.
    symbols: FxHashMap<u64, u32>,
    /// `symbols` of the ASCII characters (NONE: not a token), looked up without hashing.
    ascii_symbols: [u32; 128],
    /// Symbols are single bytes (byte-level vocabularies) instead of characters.
    byte_symbols: bool,
    /// A pre-token that is a token is that token, whatever the merges say (HF's ignore_merges).
    ignore_merges: bool,
    pairs: FxHashMap<u64, (u32, u32)>,
    unknowns: Unknowns,
    /// Whether a pre-token may be cut before each "▁" and each stretch merged on its own: no merge
    /// joins a symbol to a following one that starts with "▁" (SentencePiece's pieces carry it
    /// only first), so merges never cross those cuts and stretches merge independently,
    /// each in the order it would within the pre-token. Shorter heaps, same ids.
    cut_at_markers: bool,
}

/// Pre-tokens of at most this many symbols merge by scanning an array of pair ranks; longer ones
/// use a heap (the scan is quadratic, the heap's bookkeeping costs more on short pre-tokens).
const SHORT_PRE_TOKEN: usize = 32;

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
        let one = if byte_symbols {
            text.len() == 1
        } else {
            !text.is_empty() && char_len(text, 0) == text.len()
        };
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
    fn merges_stop_at_markers(
        symbols: &FxHashMap<u64, u32>,
        pairs: &FxHashMap<u64, (u32, u32)>,
    ) -> bool {
        let Some(&marker) = symbols.get(&symbol_key(MARKER)) else {
            return false;
        };
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
        pairs
            .keys()
            .all(|&pair| !starts_with_marker.contains(&(pair as u32)))
    }

    /// The first symbols of a pre-token (HF's rule): each character's token, else its byte tokens,
    /// else the unknown token (fused with a preceding unknown if `fuse_unk`), else nothing.
    fn initial_symbols(&self, pre_token: &[u8], ids: &mut Vec<u32>) {
        let mut pending_unk = false;
        let mut at = 0;
        while at < pre_token.len() {
            let len = if self.byte_symbols {
                1
            } else {
                char_len(pre_token, at)
            };
            let character = &pre_token[at..at + len];
            at += len;
            let symbol = match character {
                &[byte] if byte < 0x80 => {
                    Some(self.ascii_symbols[byte as usize]).filter(|&id| id != NONE)
                }
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
        self.pairs
            .get(&(((left as u64) << 32) | right as u64))
            .copied()
            .unwrap_or((NONE, NONE))
    }
}

impl Segmenter for CharMerges {
    fn segment(&self, pre_token: &[u8], out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some((id, _)) = self.tokens.get(pre_token) {
                out.push(id);
                return;
            }
        }
        if !self.cut_at_markers {
            self.merge(pre_token, out);
            return;
        }
        let mut start = 0;
        let mut at = 1;
        while let Some(found) = pre_token
            .get(at..)
            .and_then(|rest| rest.iter().position(|&byte| byte == MARKER[0]))
        {
            at += found;
            if pre_token[at..].starts_with(MARKER) {
                self.merge(&pre_token[start..at], out);
                start = at;
            }
            at += 1;
        }
        self.merge(&pre_token[start..], out);
    }
}

impl CharMerges {
    /// BPE on one pre-token (or one stretch of it): repeatedly join the adjacent pair of lowest
    /// rank, leftmost first.
    fn merge(&self, pre_token: &[u8], out: &mut Vec<u32>) {
        let mark = out.len();
        self.initial_symbols(pre_token, out);
        let n = out.len() - mark;
        if n < 2 {
            return;
        }
        if n <= SHORT_PRE_TOKEN {
            self.merge_short(out, mark);
        } else {
            let ids = out.split_off(mark);
            self.merge_long(ids, out);
        }
    }

    /// `merge` on the at most `SHORT_PRE_TOKEN` symbols at `out[mark..]`, in place: each round
    /// scans the ranks of the adjacent pairs (kept in an array, two looked up again per merge).
    fn merge_short(&self, out: &mut Vec<u32>, mark: usize) {
        let symbols = &mut out[mark..];
        let mut len = symbols.len();
        // pairs[i]: (rank, merged id) of symbols i and i + 1; rank NONE: no merge.
        let mut pairs = [(NONE, NONE); SHORT_PRE_TOKEN];
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

impl CharMerges {
    /// `strings` are the (text, id) pairs a character or merge result is looked up by;
    /// `merges[k] = (left, right, merged)` has rank k, or `merge_ranks[k]` when given (equal
    /// ranks: leftmost first). With `byte_symbols` a pre-token starts as single bytes.
    pub fn new(
        strings: Vec<(Vec<u8>, u32)>,
        merges: &[(u32, u32, u32)],
        merge_ranks: Option<&[u32]>,
        unknowns: Unknowns,
        byte_symbols: bool,
        ignore_merges: bool,
    ) -> Result<Self, CompatError> {
        if let Some(ranks) = merge_ranks.filter(|ranks| ranks.len() != merges.len()) {
            return Err(CompatError::MergeRanks {
                ranks: ranks.len(),
                merges: merges.len(),
            });
        }
        let mut pairs = FxHashMap::default();
        for (index, &(left, right, merged)) in merges.iter().enumerate() {
            let rank = merge_ranks.map_or(index as u32, |ranks| ranks[index]);
            // The first of two equal merges wins, as in a rank table built from the list.
            pairs
                .entry(((left as u64) << 32) | right as u64)
                .or_insert((rank, merged));
        }
        let entries: Vec<(Vec<u8>, u32, f64)> =
            strings.into_iter().map(|(t, id)| (t, id, 0.0)).collect();
        let symbols = symbol_ids(&entries, byte_symbols);
        let cut_at_markers = !byte_symbols && CharMerges::merges_stop_at_markers(&symbols, &pairs);
        Ok(CharMerges {
            tokens: self::strings(&entries),
            ascii_symbols: ascii_symbols(&symbols),
            symbols,
            byte_symbols,
            ignore_merges,
            pairs,
            unknowns,
            cut_at_markers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::SplitMix64;

    /// A BPE segmenter over the letters a-d and "▁" whose merges make every string of up to 3
    /// symbols, with scrambled ranks; `right_marker` adds merges whose right side starts with "▁".
    fn letter_merges(right_marker: bool) -> CharMerges {
        let letters = ["a", "b", "c", "d", "\u{2581}"];
        let mut texts: Vec<String> = letters.iter().map(|l| l.to_string()).collect();
        let mut merges = Vec::new();
        let mut rng = SplitMix64::new(7);
        // The marker (symbol 4) is a right side only with `right_marker`.
        let rights = if right_marker {
            letters.len()
        } else {
            letters.len() - 1
        };
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
                    texts.push(format!(
                        "{}{}",
                        texts[merged as usize], texts[last as usize]
                    ));
                    merges.push((merged, last, texts.len() as u32 - 1));
                }
            }
        }
        let entries: Vec<(Vec<u8>, u32, f64)> = texts
            .iter()
            .enumerate()
            .map(|(id, text)| (text.as_bytes().to_vec(), id as u32, 0.0))
            .collect();
        let mut pairs = FxHashMap::default();
        for (&(left, right, merged), rank) in merges
            .iter()
            .zip((0..merges.len() as u32).map(|k| (k * 7919) % 64))
        {
            pairs
                .entry(((left as u64) << 32) | right as u64)
                .or_insert((rank, merged));
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

    fn random_pre_token(rng: &mut SplitMix64, length: usize) -> Vec<u8> {
        let alphabet = ["a", "b", "c", "d", "\u{2581}", "x"];
        (0..length)
            .flat_map(|_| alphabet[(rng.next_u64() % 6) as usize].bytes())
            .collect()
    }

    /// Short pre-tokens merge by scanning, long ones with the heap, and a pre-token may be cut
    /// before each "▁" only when no merge joins across it: all agree with the plain heap merge.
    #[test]
    fn merge_shortcuts_give_the_heap_merge() {
        let mut rng = SplitMix64::new(1);
        for right_marker in [false, true] {
            let mut segmenter = letter_merges(right_marker);
            assert_eq!(segmenter.cut_at_markers, !right_marker);
            for _ in 0..3000 {
                let length = (rng.next_u64() % 80) as usize + 1;
                let pre_token = random_pre_token(&mut rng, length);
                let mut expected = Vec::new();
                segmenter.initial_symbols(&pre_token, &mut expected);
                let mut heap = Vec::new();
                segmenter.merge_long(expected, &mut heap);
                let mut out = vec![12345];
                segmenter.segment(&pre_token, &mut out);
                assert_eq!(&out[1..], &heap[..], "{}", String::from_utf8_lossy(&pre_token));
                segmenter.cut_at_markers = false;
                let mut uncut = Vec::new();
                segmenter.segment(&pre_token, &mut uncut);
                assert_eq!(uncut, heap);
                segmenter.cut_at_markers = !right_marker;
            }
        }
    }

    #[test]
    fn char_merges_replays_by_rank_and_falls_back_to_bytes() {
        let entries: Vec<(Vec<u8>, u32, f64)> = ["a", "b", "ab", "abb"]
            .iter()
            .enumerate()
            .map(|(id, text)| (text.as_bytes().to_vec(), id as u32, 0.0))
            .collect();
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
}
