//! BPE continued from a base vocabulary: the pre-tokens start as the base cuts them, and the merge
//! loop of `bpe.rs` goes on from there, new token k taking id `first_id + k`.
//!
//! The base's rule decides what a merge does to a pre-token:
//! - `Rule::Merges` (a merge list replayed): the chosen pair is replaced left to right, as BPE
//!   training does, and the extension replays the base list and then the new merges. A pair whose
//!   bytes already are a token is never chosen: the base can leave such a pair apart (its token
//!   was built from another split), and merging it would give two ids the same bytes.
//! - `Rule::Ranks` (tiktoken: join the adjacent pair whose bytes are the lowest-ranked token,
//!   rank = id): every id is below the new token's, so a pre-token's cut under the larger
//!   vocabulary passes through its current cut and goes on from there. Each pre-token holding a
//!   pair with the new token's bytes is cut on from its current tokens by the rule itself, so
//!   that a base merge made possible again (new token + neighbour = a base token) happens in
//!   training as it will in tiktoken. Such a pair's bytes are never a token already: the rule
//!   would have joined them.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::ControlFlow;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::bpe::{
    self, give_pair, pack, take_pair, BpeError, Merger, Options, Pair, PairStats, PreTokens,
    Trained,
};
use crate::count::PreTokenCounts;

/// How the base joins two tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Merges,
    Ranks,
}

/// Why an extension could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtendError {
    Bpe(BpeError),
    /// The first new id is below the number of base ids, or the new ids would pass u32::MAX.
    FirstId { first_id: u32, tokens: usize },
    /// The base segmenter returned an id with no bytes in the vocabulary.
    UnknownId { id: u32 },
}

impl From<BpeError> for ExtendError {
    fn from(error: BpeError) -> Self {
        ExtendError::Bpe(error)
    }
}

/// The vocabulary as it grows: id -> bytes (empty: an unused id) and bytes -> id.
struct Tokens {
    bytes: Vec<Vec<u8>>,
    ids: FxHashMap<Box<[u8]>, u32>,
    joined: Vec<u8>,
}

impl Tokens {
    fn new(tokens: &[Vec<u8>], first_id: u32) -> Self {
        let mut ids = FxHashMap::default();
        for (id, token) in tokens.iter().enumerate() {
            if !token.is_empty() {
                // The lowest id wins where bytes repeat, as the segmenters decide.
                ids.entry(token.clone().into_boxed_slice()).or_insert(id as u32);
            }
        }
        let mut bytes = tokens.to_vec();
        bytes.resize(first_id as usize, Vec::new());
        Tokens { bytes, ids, joined: Vec::new() }
    }

    /// The id of the bytes of `left` then `right`, if they are a token.
    fn join(&mut self, left: u32, right: u32) -> Option<u32> {
        self.joined.clear();
        self.joined.extend_from_slice(&self.bytes[left as usize]);
        self.joined.extend_from_slice(&self.bytes[right as usize]);
        self.ids.get(&self.joined[..]).copied()
    }

    fn push(&mut self, left: u32, right: u32) -> u32 {
        let token = [&self.bytes[left as usize][..], &self.bytes[right as usize][..]].concat();
        let id = self.bytes.len() as u32;
        self.ids.insert(token.clone().into_boxed_slice(), id);
        self.bytes.push(token);
        id
    }
}

/// The merge step of an extension: `Rule::Merges` replaces the pair, `Rule::Ranks` cuts on.
struct Continuation {
    rule: Rule,
    tokens: Tokens,
    /// Base ids that never take part in a new merge (`Base::kept_apart`), by id.
    apart: Vec<bool>,
    /// Scratch for `cut_on`: the symbols, their links, and the pending joins.
    symbols: Vec<u32>,
    next: Vec<usize>,
    previous: Vec<usize>,
    pending: BinaryHeap<Reverse<(u32, usize)>>,
}

/// No neighbour, in `cut_on`'s links.
const END: usize = usize::MAX;

/// In `cut_on`'s `previous`: this symbol was joined into the one before it.
const JOINED: usize = usize::MAX - 1;

impl Continuation {
    /// Cuts pre-token `w` on by tiktoken's rule after the newest token joined the vocabulary:
    /// every adjacent pair in `splits` (the pairs whose bytes are that token) joins, and so does
    /// every pair that a join makes a token, lowest rank first, leftmost first among equals.
    /// Only pairs beside a join can become tokens (the cut before was final), so the pending
    /// joins start with the `splits` found in one pass and grow only there, and `stats` change
    /// around each join alone, as in `bpe::merge_pre_token`. False if no pair was in `splits`.
    fn cut_on(
        &mut self,
        pre_tokens: &mut PreTokens,
        w: usize,
        splits: &[(u32, u32)],
        newest: u32,
        stats: &mut FxHashMap<Pair, PairStats>,
        added: &mut Vec<Pair>,
    ) -> bool {
        self.symbols.clear();
        self.symbols.extend_from_slice(pre_tokens.pre_token(w));
        let n = self.symbols.len();
        self.pending.clear();
        for i in 0..n - 1 {
            if splits.contains(&(self.symbols[i], self.symbols[i + 1])) {
                self.pending.push(Reverse((newest, i)));
            }
        }
        if self.pending.is_empty() {
            return false;
        }
        self.next.clear();
        self.next.extend((1..n).chain([END]));
        self.previous.clear();
        self.previous.extend([END].into_iter().chain(0..n - 1));
        let count = pre_tokens.counts[w];
        // (the chosen pair's entry is gone already: take_pair leaves it so)
        let remove =
            |pair: Pair, stats: &mut FxHashMap<Pair, PairStats>| take_pair(stats, pair, count);
        let mut add = |pair: Pair, stats: &mut FxHashMap<Pair, PairStats>| {
            give_pair(stats, pair, count, w, added);
        };
        while let Some(Reverse((rank, i))) = self.pending.pop() {
            let j = self.next[i];
            if j == END || self.previous[i] == JOINED {
                continue;
            }
            let (a, b) = (self.symbols[i], self.symbols[j]);
            if self.tokens.join(a, b) != Some(rank) {
                continue; // a join beside it changed the pair since it was found
            }
            let (left, right) = (self.previous[i], self.next[j]);
            if left != END {
                remove(pack(self.symbols[left], a), stats);
            }
            remove(pack(a, b), stats);
            if right != END {
                remove(pack(b, self.symbols[right]), stats);
                self.previous[right] = i;
            }
            self.symbols[i] = rank;
            self.next[i] = right;
            self.previous[j] = JOINED;
            if left != END {
                add(pack(self.symbols[left], rank), stats);
                if let Some(joined) = self.tokens.join(self.symbols[left], rank) {
                    self.pending.push(Reverse((joined, left)));
                }
            }
            if right != END {
                add(pack(rank, self.symbols[right]), stats);
                if let Some(joined) = self.tokens.join(rank, self.symbols[right]) {
                    self.pending.push(Reverse((joined, i)));
                }
            }
        }
        let mut cut = Vec::with_capacity(n);
        let mut i = 0;
        while i != END {
            cut.push(self.symbols[i]);
            i = self.next[i];
        }
        pre_tokens.rewrite(w, &cut);
        true
    }
}

impl Merger for Continuation {
    fn allows(&mut self, (left, right): (u32, u32)) -> bool {
        let apart = |id: u32| self.apart.get(id as usize).copied().unwrap_or(false);
        !apart(left) && !apart(right) && self.tokens.join(left, right).is_none()
    }

    fn merge(
        &mut self,
        pre_tokens: &mut PreTokens,
        candidates: &[u32],
        (left, right): (u32, u32),
        token: u32,
        stats: &mut FxHashMap<Pair, PairStats>,
        added: &mut Vec<Pair>,
    ) {
        let made = self.tokens.push(left, right);
        debug_assert_eq!(made, token);
        if self.rule == Rule::Merges {
            for &w in candidates {
                bpe::merge_pre_token(pre_tokens, w as usize, (left, right), token, stats, added);
            }
            return;
        }
        // Every split of the new bytes into two tokens is a pair the rule now joins.
        let mut splits = vec![(left, right)];
        let mut holders: Vec<u32> = candidates.to_vec();
        let bytes = &self.tokens.bytes[token as usize];
        for split in 1..bytes.len() {
            let (Some(&a), Some(&b)) = (
                self.tokens.ids.get(&bytes[..split]),
                self.tokens.ids.get(&bytes[split..]),
            ) else {
                continue;
            };
            if (a, b) != (left, right) {
                if let Some(entry) = stats.get(&pack(a, b)) {
                    holders.extend_from_slice(&entry.pre_tokens);
                }
                splits.push((a, b));
            }
        }
        holders.sort_unstable();
        holders.dedup();
        for w in holders {
            self.cut_on(pre_tokens, w as usize, &splits, token, stats, added);
        }
    }
}

/// The tokeniser an extension continues: `segment` cuts a pre-token as it does, `tokens[id]` are
/// its bytes (empty: unused), `rule` is how it joins tokens, and new token k gets id
/// `first_id + k`.
pub struct Base<'a> {
    pub segment: &'a (dyn Fn(&[u8], &mut Vec<u32>) + Sync),
    pub tokens: &'a [Vec<u8>],
    pub rule: Rule,
    pub first_id: u32,
    /// Ids never merged with a neighbour: a character-level base's byte-fallback and unknown
    /// tokens, whose joins its file could not spell.
    pub kept_apart: &'a [u32],
}

/// Continues BPE from `base` on counted pre-tokens. The merges and the count each was chosen
/// with are returned as `bpe::train` returns them.
pub fn extend(
    counts: &PreTokenCounts,
    base: &Base<'_>,
    options: &Options,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Trained, ExtendError> {
    let Base {
        segment,
        tokens,
        rule,
        first_id,
        kept_apart,
    } = *base;
    if (first_id as usize) < tokens.len() || options.num_merges > (u32::MAX - first_id) as usize {
        return Err(ExtendError::FirstId { first_id, tokens: tokens.len() });
    }
    let cut_all = || -> Result<PreTokens, ExtendError> {
        let cuts: Vec<Vec<u32>> = (0..counts.len())
            .into_par_iter()
            .map(|i| {
                let mut ids = Vec::new();
                segment(counts.pre_token(i), &mut ids);
                ids
            })
            .collect();
        let mut pre_tokens = PreTokens::default();
        for (i, cut) in cuts.iter().enumerate() {
            let unknown = |id: u32| tokens.get(id as usize).is_none_or(|t| t.is_empty());
            if let Some(&id) = cut.iter().find(|&&id| unknown(id)) {
                return Err(ExtendError::UnknownId { id });
            }
            pre_tokens.push(cut, counts.counts()[i])?;
        }
        Ok(pre_tokens)
    };
    let start = || {
        cut_all().map(|pre_tokens| {
            let stats = bpe::count_pairs(&pre_tokens);
            (pre_tokens, stats)
        })
    };
    let (mut pre_tokens, stats) = match pool {
        Some(pool) => pool.install(start)?,
        None => start()?,
    };
    let mut apart = vec![false; first_id as usize];
    for &id in kept_apart {
        if let Some(flag) = apart.get_mut(id as usize) {
            *flag = true;
        }
    }
    let mut continuation = Continuation {
        rule,
        tokens: Tokens::new(tokens, first_id),
        apart,
        symbols: Vec::new(),
        next: Vec::new(),
        previous: Vec::new(),
        pending: BinaryHeap::new(),
    };
    Ok(bpe::merge_loop(&mut pre_tokens, stats, first_id, options, &mut continuation, progress))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::merges::{from_merges, from_ranks};
    use crate::segment::rng::{random_pre_tokens, SplitMix64};
    use crate::segment::Segmenter;
    use std::collections::BTreeMap;

    /// The naive continuation: each round cuts every pre-token afresh from its bytes with the
    /// whole vocabulary and the rule, and merges the most frequent pair whose bytes are no token
    /// (ties: the smallest (left, right)).
    fn naive(
        base: &[Vec<u8>],
        base_merges: Option<&[(u32, u32)]>,
        pre_tokens: &[(Vec<u8>, u64)],
        first_id: u32,
        num_merges: usize,
    ) -> Vec<(u32, u32)> {
        let mut tokens = base.to_vec();
        tokens.resize(first_id as usize, Vec::new());
        let mut merges: Option<Vec<(u32, u32, u32)>> = base_merges.map(|list| {
            let id_of = |bytes: Vec<u8>| tokens.iter().position(|t| *t == bytes).unwrap() as u32;
            let join = |l: u32, r: u32| [&tokens[l as usize][..], &tokens[r as usize]].concat();
            list.iter().map(|&(l, r)| (l, r, id_of(join(l, r)))).collect()
        });
        let mut learned = Vec::new();
        for _ in 0..num_merges {
            let mut pairs: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            for (pre_token, count) in pre_tokens {
                let mut cut = Vec::new();
                match &merges {
                    Some(list) => {
                        from_merges(&tokens, list).unwrap().segment(pre_token, &mut cut)
                    }
                    None => from_ranks(&tokens).unwrap().segment(pre_token, &mut cut),
                }
                for window in cut.windows(2) {
                    let (left, right) = (window[0] as usize, window[1] as usize);
                    let joined = [&tokens[left][..], &tokens[right]].concat();
                    if !tokens.contains(&joined) {
                        *pairs.entry((window[0], window[1])).or_default() += count;
                    }
                }
            }
            let best = pairs.iter().max_by_key(|&(&pair, &n)| (n, std::cmp::Reverse(pair)));
            let Some((&(left, right), _)) = best else {
                break;
            };
            let id = tokens.len() as u32;
            tokens.push([&tokens[left as usize][..], &tokens[right as usize]].concat());
            if let Some(list) = &mut merges {
                list.push((left, right, id));
            }
            learned.push((left, right));
        }
        learned
    }

    /// `num_merges` merges, any pair seen once, progress after each.
    fn every_merge(num_merges: usize) -> Options {
        Options {
            num_merges,
            min_frequency: 1,
            progress_every: 1,
        }
    }

    #[test]
    fn continuations_equal_the_naive_one_under_both_rules() {
        let mut rng = SplitMix64::new(7);
        let alphabets: [&[char]; 3] =
            [&['a', 'b'], &['a', 'b', 'c'], &['a', 'b', 'c', 'd', 'é']];
        for round in 0..24 {
            let alphabet = alphabets[round % alphabets.len()];
            let base_text = random_pre_tokens(&mut rng, alphabet, 12, 6, 1..6);
            let new_text = random_pre_tokens(&mut rng, alphabet, 16, 9, 1..9);
            let data: Vec<u8> = base_text.iter().flat_map(|(p, _)| p.iter().copied()).collect();
            let mut offsets = vec![0i64];
            for (pre_token, _) in &base_text {
                offsets.push(offsets.last().unwrap() + pre_token.len() as i64);
            }
            let base_counts: Vec<u64> = base_text.iter().map(|&(_, n)| n).collect();
            let counts = PreTokenCounts::new(&data, &offsets, &base_counts).unwrap();
            let options = every_merge(6);
            let trained =
                bpe::train(&counts, &options, None, &mut |_| ControlFlow::Continue(())).unwrap();
            let mut base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            for &(l, r) in &trained.merges {
                base.push([&base[l as usize][..], &base[r as usize]].concat());
            }
            // A gap after the base, where a base would keep its special ids.
            let first_id = base.len() as u32 + (round % 3) as u32;
            let data: Vec<u8> = new_text.iter().flat_map(|(p, _)| p.iter().copied()).collect();
            let mut offsets = vec![0i64];
            for (pre_token, _) in &new_text {
                offsets.push(offsets.last().unwrap() + pre_token.len() as i64);
            }
            let new_counts: Vec<u64> = new_text.iter().map(|&(_, n)| n).collect();
            let counts = PreTokenCounts::new(&data, &offsets, &new_counts).unwrap();
            let options = every_merge(1 + round % 10);
            for rule in [Rule::Merges, Rule::Ranks] {
                let triples: Vec<(u32, u32, u32)> = (trained.merges.iter().enumerate())
                    .map(|(k, &(l, r))| (l, r, 256 + k as u32))
                    .collect();
                let segmenter: Box<dyn Segmenter> = match rule {
                    Rule::Merges => Box::new(from_merges(&base, &triples).unwrap()),
                    Rule::Ranks => Box::new(from_ranks(&base).unwrap()),
                };
                let segment = |piece: &[u8], out: &mut Vec<u32>| segmenter.segment(piece, out);
                let mut go_on = |_| ControlFlow::Continue(());
                let from = Base {
                    segment: &segment,
                    tokens: &base,
                    rule,
                    first_id,
                    kept_apart: &[],
                };
                let extended = extend(&counts, &from, &options, None, &mut go_on).unwrap();
                let list = (rule == Rule::Merges).then_some(&trained.merges[..]);
                let expected = naive(&base, list, &new_text, first_id, options.num_merges);
                let base_merges = &trained.merges;
                assert_eq!(extended.merges, expected, "{rule:?} {new_text:?} {base_merges:?}");
            }
        }
    }

    #[test]
    fn a_first_id_inside_the_base_is_refused() {
        let base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let counts = PreTokenCounts::new(b"ab", &[0, 2], &[1]).unwrap();
        let segmenter = from_ranks(&base).unwrap();
        let segment = |piece: &[u8], out: &mut Vec<u32>| segmenter.segment(piece, out);
        let options = every_merge(1);
        let mut go_on = |_| ControlFlow::Continue(());
        let from = Base {
            segment: &segment,
            tokens: &base,
            rule: Rule::Ranks,
            first_id: 255,
            kept_apart: &[],
        };
        let result = extend(&counts, &from, &options, None, &mut go_on);
        let refused = ExtendError::FirstId {
            first_id: 255,
            tokens: 256,
        };
        assert_eq!(result.err(), Some(refused));
    }

    #[test]
    fn ids_kept_apart_never_merge() {
        let base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        // "ab" is the most frequent pair, then "cd"; with a kept apart, "cd" is the first merge
        let counts = PreTokenCounts::new(b"abcdabcd", &[0, 4, 6, 8], &[1, 5, 3]).unwrap();
        let segmenter = from_ranks(&base).unwrap();
        let segment = |piece: &[u8], out: &mut Vec<u32>| segmenter.segment(piece, out);
        let mut go_on = |_| ControlFlow::Continue(());
        for (kept_apart, first) in [(&[][..], (97, 98)), (&[97u32][..], (99, 100))] {
            let from = Base {
                segment: &segment,
                tokens: &base,
                rule: Rule::Merges,
                first_id: 256,
                kept_apart,
            };
            let extended = extend(&counts, &from, &every_merge(3), None, &mut go_on).unwrap();
            assert_eq!(extended.merges[0], first);
            let apart = |id: &u32| kept_apart.contains(id);
            assert!(extended.merges.iter().all(|(l, r)| !apart(l) && !apart(r)));
        }
    }
}
