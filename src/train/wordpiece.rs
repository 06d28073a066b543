//! WordPiece training: BPE's greedy loop with a different score. Each round merges the adjacent
//! pair (a, b) that maximises n(a, b) / (n(a) · n(b)), where n(a, b) counts adjacent occurrences
//! of the pair and n(a) every occurrence of a, in the current segmentation of the weighted
//! pre-tokens. Scores are compared exactly (cross-multiplied in 128-bit integers); ties go to the
//! smallest (left id, right id).
//!
//! Ids: 0..255 are the word-initial bytes; with a continuation marker 256..511 are the bytes as
//! continuations (spelled marker + byte), and learned tokens follow in the order they are
//! created. A merged token keeps the role of its left part. Its spelling is the marker plus its
//! bytes for a continuation, its bytes otherwise; a word-initial token may therefore not start
//! with the marker and be longer than it (it would read as a continuation), and such pairs are
//! never merged. A merge whose result already exists reuses that id and costs no budget.
//!
//! Speed: like BPE, only the pre-tokens that contain the merged pair are touched. The priority
//! queue is lazy: an entry stores the three counts it was scored with and is discarded when popped
//! if any of them changed. Because n(a) and n(b) fall after merging (a, b), every pair that
//! contains a, b or the new token changes score, so all of those are pushed again.
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::count::PreTokenCounts;

type Pair = (u32, u32);

/// A heap entry: a pair with the counts its score was computed from.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Candidate {
    pair_count: u64,
    left_count: u64,
    right_count: u64,
    pair: Pair,
}

impl Candidate {
    /// Compares pair_count / (left_count · right_count) exactly; the smaller pair wins a tie.
    fn compare(&self, other: &Self) -> Ordering {
        let product = |x: u64, y: u64, z: u64| {
            (x as u128)
                .checked_mul(y as u128)
                .and_then(|v| v.checked_mul(z as u128))
        };
        let ours = product(self.pair_count, other.left_count, other.right_count);
        let theirs = product(other.pair_count, self.left_count, self.right_count);
        let by_score = match (ours, theirs) {
            (Some(a), Some(b)) => a.cmp(&b),
            // Counts beyond ~6e12 each: fall back to floating point.
            _ => {
                let score = |c: &Candidate| {
                    c.pair_count as f64 / c.left_count as f64 / c.right_count as f64
                };
                score(self).total_cmp(&score(other))
            }
        };
        by_score.then_with(|| other.pair.cmp(&self.pair))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.compare(other)
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The result of training: token spellings by id and the merges in the order applied.
pub struct WordPieceTraining {
    pub vocab: Vec<Vec<u8>>,
    /// (left, right, result) ids; `result` may repeat when a merge reuses an existing token.
    pub merges: Vec<(u32, u32, u32)>,
}

struct Trainer<'m> {
    marker: Option<&'m [u8]>,
    min_frequency: u64,
    tokens: Vec<Vec<u8>>,
    continuation: Vec<bool>,
    token_ids: FxHashMap<(Vec<u8>, bool), u32>,
    symbol_count: Vec<u64>,
    pre_tokens: Vec<Vec<u32>>,
    pre_token_count: Vec<u64>,
    pair_count: FxHashMap<Pair, u64>,
    pair_pre_tokens: FxHashMap<Pair, Vec<u32>>,
    /// For each token, the pairs with a non-zero count it takes part in.
    partners: Vec<FxHashSet<Pair>>,
    heap: BinaryHeap<Candidate>,
}

impl<'m> Trainer<'m> {
    fn new(
        pre_tokens: &[&[u8]],
        counts: &[u64],
        marker: Option<&'m [u8]>,
        min_frequency: u64,
    ) -> Self {
        let mut trainer = Trainer {
            marker,
            min_frequency: min_frequency.max(1),
            tokens: Vec::new(),
            continuation: Vec::new(),
            token_ids: FxHashMap::default(),
            symbol_count: Vec::new(),
            pre_tokens: Vec::with_capacity(pre_tokens.len()),
            pre_token_count: Vec::with_capacity(pre_tokens.len()),
            pair_count: FxHashMap::default(),
            pair_pre_tokens: FxHashMap::default(),
            partners: Vec::new(),
            heap: BinaryHeap::new(),
        };
        let roles: &[bool] = if marker.is_some() {
            &[false, true]
        } else {
            &[false]
        };
        for &is_continuation in roles {
            for byte in 0..=255u8 {
                trainer.add_token(vec![byte], is_continuation);
            }
        }
        let continuation_base = if marker.is_some() { 256 } else { 0 };
        for (&pre_token, &count) in pre_tokens.iter().zip(counts) {
            if pre_token.is_empty() || count == 0 {
                continue;
            }
            let symbols: Vec<u32> = pre_token
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    if i == 0 {
                        b as u32
                    } else {
                        continuation_base + b as u32
                    }
                })
                .collect();
            for &symbol in &symbols {
                trainer.symbol_count[symbol as usize] += count;
            }
            let pre_token_index = trainer.pre_tokens.len() as u32;
            for pair in symbols.windows(2) {
                let pair = (pair[0], pair[1]);
                *trainer.pair_count.entry(pair).or_insert(0) += count;
                let list = trainer.pair_pre_tokens.entry(pair).or_default();
                if list.last() != Some(&pre_token_index) {
                    list.push(pre_token_index);
                }
            }
            trainer.pre_tokens.push(symbols);
            trainer.pre_token_count.push(count);
        }
        let pairs: Vec<Pair> = trainer.pair_count.keys().copied().collect();
        for pair in pairs {
            trainer.partners[pair.0 as usize].insert(pair);
            trainer.partners[pair.1 as usize].insert(pair);
        }
        trainer.rebuild_heap();
        trainer
    }

    fn add_token(&mut self, bytes: Vec<u8>, is_continuation: bool) -> u32 {
        let id = self.tokens.len() as u32;
        self.token_ids.insert((bytes.clone(), is_continuation), id);
        self.tokens.push(bytes);
        self.continuation.push(is_continuation);
        self.symbol_count.push(0);
        self.partners.push(FxHashSet::default());
        id
    }

    /// False when merging would give a word-initial token that reads as a continuation.
    fn allowed(&self, (left, right): Pair) -> bool {
        let Some(marker) = self.marker else {
            return true;
        };
        if self.continuation[left as usize] {
            return true;
        }
        let (a, b) = (&self.tokens[left as usize], &self.tokens[right as usize]);
        if a.len() + b.len() <= marker.len() {
            return true;
        }
        let in_a = marker.len().min(a.len());
        !(a[..in_a] == marker[..in_a] && b.starts_with(&marker[in_a..]))
    }

    fn candidate(&self, pair: Pair) -> Option<Candidate> {
        let pair_count = *self.pair_count.get(&pair)?;
        (pair_count >= self.min_frequency && self.allowed(pair)).then(|| Candidate {
            pair_count,
            left_count: self.symbol_count[pair.0 as usize],
            right_count: self.symbol_count[pair.1 as usize],
            pair,
        })
    }

    fn rebuild_heap(&mut self) {
        let mut pairs: Vec<Pair> = self.pair_count.keys().copied().collect();
        pairs.sort_unstable();
        let candidates: Vec<Candidate> = pairs
            .into_iter()
            .filter_map(|p| self.candidate(p))
            .collect();
        self.heap = BinaryHeap::from(candidates);
    }

    /// The best pair whose heap entry is still current.
    fn pop_best(&mut self) -> Option<Candidate> {
        while let Some(top) = self.heap.pop() {
            if self.candidate(top.pair) == Some(top) {
                return Some(top);
            }
        }
        None
    }

    /// Merges every occurrence of `pair` into `merged`, updating all counts and the queue.
    fn merge(&mut self, pair: Pair, merged: u32) {
        let (left, right) = pair;
        let mut affected = self.pair_pre_tokens.remove(&pair).unwrap_or_default();
        affected.sort_unstable();
        affected.dedup();
        let mut delta: FxHashMap<Pair, i64> = FxHashMap::default();
        let mut merged_total: u64 = 0;
        for &pre_token_index in &affected {
            let pre_token = &self.pre_tokens[pre_token_index as usize];
            if !pre_token.windows(2).any(|w| (w[0], w[1]) == pair) {
                continue; // a stale index entry
            }
            let count = self.pre_token_count[pre_token_index as usize];
            for w in pre_token.windows(2) {
                *delta.entry((w[0], w[1])).or_insert(0) -= count as i64;
            }
            let mut rebuilt = Vec::with_capacity(pre_token.len());
            let mut i = 0;
            while i < pre_token.len() {
                if i + 1 < pre_token.len() && pre_token[i] == left && pre_token[i + 1] == right {
                    rebuilt.push(merged);
                    merged_total += count;
                    i += 2;
                } else {
                    rebuilt.push(pre_token[i]);
                    i += 1;
                }
            }
            for w in rebuilt.windows(2) {
                let new_pair = (w[0], w[1]);
                *delta.entry(new_pair).or_insert(0) += count as i64;
                // Only pairs with the new token are new to this pre-token.
                if w[0] == merged || w[1] == merged {
                    let list = self.pair_pre_tokens.entry(new_pair).or_default();
                    if list.last() != Some(&pre_token_index) {
                        list.push(pre_token_index);
                    }
                }
            }
            self.pre_tokens[pre_token_index as usize] = rebuilt;
        }
        self.symbol_count[left as usize] -= merged_total;
        self.symbol_count[right as usize] -= merged_total;
        self.symbol_count[merged as usize] += merged_total;

        let mut changed: Vec<Pair> = Vec::new();
        let mut delta: Vec<(Pair, i64)> = delta.into_iter().filter(|&(_, d)| d != 0).collect();
        delta.sort_unstable();
        for (p, d) in delta {
            let old = self.pair_count.get(&p).copied().unwrap_or(0);
            let new = (old as i64 + d) as u64;
            if new == 0 {
                self.pair_count.remove(&p);
                self.pair_pre_tokens.remove(&p);
                self.partners[p.0 as usize].remove(&p);
                self.partners[p.1 as usize].remove(&p);
            } else {
                self.pair_count.insert(p, new);
                if old == 0 {
                    self.partners[p.0 as usize].insert(p);
                    self.partners[p.1 as usize].insert(p);
                }
                changed.push(p);
            }
        }
        // n(left), n(right) and n(merged) changed, so every pair with them has a new score.
        for token in [left, right, merged] {
            changed.extend(self.partners[token as usize].iter().copied());
        }
        changed.sort_unstable();
        changed.dedup();
        for p in changed {
            if let Some(c) = self.candidate(p) {
                self.heap.push(c);
            }
        }
        if self.heap.len() > 4 * self.pair_count.len() + 100_000 {
            self.rebuild_heap();
        }
    }
}

/// Learns up to `budget` new tokens from counted pre-tokens (see the module comment); only
/// pairs that occur at least `min_frequency` times are merged. `report` is called with the
/// number of tokens learned every 256 tokens.
pub fn train(
    counts: &PreTokenCounts,
    budget: usize,
    marker: Option<&[u8]>,
    min_frequency: u64,
    report: &mut dyn FnMut(usize),
) -> WordPieceTraining {
    let marker = marker.filter(|m| !m.is_empty());
    let mut trainer = Trainer::new(&counts.pre_tokens(), counts.counts(), marker, min_frequency);
    let mut learned = 0;
    let mut merges = Vec::new();
    while learned < budget {
        let Some(best) = trainer.pop_best() else {
            break;
        };
        let (left, right) = best.pair;
        let mut bytes = trainer.tokens[left as usize].clone();
        bytes.extend_from_slice(&trainer.tokens[right as usize]);
        let is_continuation = trainer.continuation[left as usize];
        let merged = match trainer.token_ids.get(&(bytes.clone(), is_continuation)) {
            Some(&existing) => existing,
            None => {
                learned += 1;
                if learned % 256 == 0 {
                    report(learned);
                }
                trainer.add_token(bytes, is_continuation)
            }
        };
        merges.push((left, right, merged));
        trainer.merge(best.pair, merged);
    }
    let vocab = trainer
        .tokens
        .iter()
        .zip(&trainer.continuation)
        .map(
            |(bytes, &is_continuation)| match (is_continuation, marker) {
                (true, Some(m)) => [m, &bytes[..]].concat(),
                _ => bytes.clone(),
            },
        )
        .collect();
    WordPieceTraining { vocab, merges }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::{random_pre_tokens, SplitMix64};
    use std::collections::BTreeMap;

    /// The naive trainer: each round recounts n(a, b) and n(a) over the current segmentation, takes
    /// the allowed pair seen at least `min_frequency` times with the highest n(a, b) / (n(a) n(b))
    /// (compared exactly; ties: the smallest pair), and rewrites every pre-token left to right.
    /// Tokens are (bytes, is continuation); a merge whose token exists reuses it.
    fn naive(
        pre_tokens: &[(Vec<u8>, u64)],
        budget: usize,
        marker: Option<&[u8]>,
        min_frequency: u64,
    ) -> WordPieceTraining {
        let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
        if marker.is_some() {
            tokens.extend((0..=255u8).map(|b| (vec![b], true)));
        }
        let later = if marker.is_some() { 256 } else { 0 };
        let mut pre_tokens: Vec<(Vec<u32>, u64)> = pre_tokens
            .iter()
            .filter(|(pre_token, count)| !pre_token.is_empty() && *count > 0)
            .map(|(pre_token, count)| {
                let ids = pre_token
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| if i == 0 { u32::from(b) } else { later + u32::from(b) })
                    .collect();
                (ids, *count)
            })
            .collect();
        let mut merges = Vec::new();
        let mut learned = 0;
        while learned < budget {
            let mut pairs: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            let mut uses = vec![0u64; tokens.len()];
            for (pre_token, count) in &pre_tokens {
                for &t in pre_token {
                    uses[t as usize] += count;
                }
                for pair in pre_token.windows(2) {
                    *pairs.entry((pair[0], pair[1])).or_default() += count;
                }
            }
            let allowed = |(left, right): (u32, u32)| {
                let (bytes, continuation) = (&tokens[left as usize].0, tokens[left as usize].1);
                let joined = [&bytes[..], &tokens[right as usize].0].concat();
                continuation
                    || marker.is_none_or(|m| joined.len() <= m.len() || !joined.starts_with(m))
            };
            let mut best: Option<((u32, u32), u64)> = None;
            for (&pair, &count) in &pairs {
                if count < min_frequency.max(1) || !allowed(pair) {
                    continue;
                }
                let score = |(a, b): (u32, u32), n: u64| {
                    (n, uses[a as usize] as u128 * uses[b as usize] as u128)
                };
                let better = best.is_none_or(|(other, n)| {
                    let ((x, p), (y, q)) = (score(pair, count), score(other, n));
                    x as u128 * q > y as u128 * p
                });
                if better {
                    best = Some((pair, count));
                }
            }
            let Some(((left, right), _)) = best else {
                break;
            };
            let token = (
                [&tokens[left as usize].0[..], &tokens[right as usize].0].concat(),
                tokens[left as usize].1,
            );
            let merged = match tokens.iter().position(|t| *t == token) {
                Some(existing) => existing as u32,
                None => {
                    learned += 1;
                    tokens.push(token);
                    tokens.len() as u32 - 1
                }
            };
            for (pre_token, _) in &mut pre_tokens {
                let mut rewritten = Vec::with_capacity(pre_token.len());
                let mut i = 0;
                while i < pre_token.len() {
                    if pre_token[i..].starts_with(&[left, right]) {
                        rewritten.push(merged);
                        i += 2;
                    } else {
                        rewritten.push(pre_token[i]);
                        i += 1;
                    }
                }
                *pre_token = rewritten;
            }
            merges.push((left, right, merged));
        }
        let vocab = tokens
            .into_iter()
            .map(|(bytes, continuation)| match (continuation, marker) {
                (true, Some(m)) => [m, &bytes[..]].concat(),
                _ => bytes,
            })
            .collect();
        WordPieceTraining { vocab, merges }
    }

    #[test]
    fn training_is_the_naive_greedy_loop() {
        let mut rng = SplitMix64::new(11);
        let alphabets: [&[char]; 4] =
            [&['a', 'b'], &['a', 'b', 'c'], &['a', '#'], &['a', 'b', '#']];
        let markers: [Option<&[u8]>; 4] = [None, Some(b"#"), Some(b"##"), Some(b"a#")];
        for round in 0..400 {
            let alphabet = alphabets[round % alphabets.len()];
            let marker = markers[rng.below(markers.len())];
            let size = 1 + rng.below(10);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 7, 0..5);
            let data: Vec<u8> =
                pre_tokens.iter().flat_map(|(pre_token, _)| pre_token.iter().copied()).collect();
            let mut offsets = vec![0i64];
            for (pre_token, _) in &pre_tokens {
                offsets.push(offsets.last().unwrap() + pre_token.len() as i64);
            }
            let counts: Vec<u64> = pre_tokens.iter().map(|&(_, count)| count).collect();
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let (budget, min_frequency) = (rng.below(30), rng.below(3) as u64);
            let want = naive(&pre_tokens, budget, marker, min_frequency);
            let trained = train(&counted, budget, marker, min_frequency, &mut |_| {});
            let case = format!("{pre_tokens:?}, marker {marker:?}, budget {budget}");
            assert_eq!(trained.merges, want.merges, "{case}");
            assert_eq!(trained.vocab, want.vocab);
        }
    }
}
