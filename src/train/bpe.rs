//! Byte-level BPE training on counted pre-tokens.
//!
//! The algorithm is the naive one (count every adjacent pair weighted by the pre-token's count,
//! merge the most frequent pair everywhere, repeat) made fast without changing its result:
//! - each unique pre-token is stored once, as symbols back to back in one flat array, and a merge
//!   rewrites a pre-token in place (it can only get shorter);
//! - pair counts are kept up to date incrementally, from the few pairs around each replaced
//!   occurrence, instead of being recounted;
//! - a pair -> pre-tokens index means a merge only visits the pre-tokens with the merged pair;
//! - a max-heap keyed by (count, reversed pair) with lazy deletion finds the next merge.
//!
//! Tie-break: the highest count wins; among equal counts the smallest (left id, right id).
//! Replacement inside a pre-token is left to right, so merging (a, a) in "aaaa" gives "aa aa" and
//! in "aaa" gives "aa a", exactly like the naive loop.
//!
//! Training stops early, with fewer merges than asked, when no pair occurs at least
//! `min_frequency` times (with `min_frequency` = 1: when no pre-token has two symbols left).
//!
//! No two tokens ever have the same bytes, so token 256 + k is exactly the concatenation of
//! merge k and the vocabulary exports to tiktoken ranks and HF as is. Proof: cut out a span of a
//! pre-token whose two ends stay token boundaries up to step k; since no replacement crossed them,
//! its tokens after step k are those of the span trained alone (left-to-right replacement is
//! decided locally). Merge k joins adjacent tokens (x, y) that occur in some pre-token, so the span
//! x y alone still comes out as the two tokens [x, y] after step k - 1. If some earlier merge j
//! had made the same bytes from (x', y'), the same argument on its pre-token shows the span alone
//! comes out as [x', y'] after step j - 1, hence as one token after step j, and stays one token:
//! a contradiction. So the chosen pair always makes new bytes, and no rule for repeats is needed.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::ControlFlow;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::count::PreTokenCounts;

/// An adjacent pair of token ids packed as `left << 32 | right`, so that the natural order of
/// the integer is the (left, right) order of the tie-break.
pub(super) type Pair = u64;

pub(super) fn pack(left: u32, right: u32) -> Pair {
    (u64::from(left) << 32) | u64::from(right)
}

fn unpack(pair: Pair) -> (u32, u32) {
    ((pair >> 32) as u32, pair as u32)
}

/// Why training could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BpeError {
    /// More merges asked for than token ids exist (ids are u32, the first 256 are bytes).
    TooManyMerges { num_merges: usize },
    /// More than 2^32 - 1 pre-tokens, or one of 2^32 bytes or more.
    TooLarge,
}

/// What training produced: merge k made token 256 + k from `merges[k]`, chosen with `counts[k]`.
pub struct Trained {
    pub merges: Vec<(u32, u32)>,
    pub counts: Vec<u64>,
}

/// The weighted occurrences of one pair and the pre-tokens that may contain it. `pre_tokens` can
/// hold stale entries (pre-tokens where the pair has since been merged away) and repeats; a merge
/// sorts, deduplicates and rescans them, so they only cost a little time.
#[derive(Default)]
pub(super) struct PairStats {
    pub(super) count: u64,
    pub(super) pre_tokens: Vec<u32>,
}

/// Unique pre-tokens of two or more symbols (shorter ones hold no pair), as symbols back to back.
#[derive(Default)]
pub(super) struct PreTokens {
    symbols: Vec<u32>,
    starts: Vec<usize>,
    lengths: Vec<u32>,
    pub(super) counts: Vec<u64>,
}

impl PreTokens {
    /// Every counted pre-token as its bytes (BPE training starts from single bytes).
    fn new(counts: &PreTokenCounts) -> Result<Self, BpeError> {
        let mut pre_tokens = PreTokens::default();
        let mut symbols = Vec::new();
        for (i, &count) in counts.counts().iter().enumerate() {
            symbols.clear();
            symbols.extend(counts.pre_token(i).iter().map(|&b| u32::from(b)));
            pre_tokens.push(&symbols, count)?;
        }
        Ok(pre_tokens)
    }

    /// Adds a pre-token cut into `symbols`, seen `count` times; one that holds no pair is left out.
    pub(super) fn push(&mut self, symbols: &[u32], count: u64) -> Result<(), BpeError> {
        if symbols.len() < 2 || count == 0 {
            return Ok(());
        }
        if symbols.len() > u32::MAX as usize || self.counts.len() == u32::MAX as usize {
            return Err(BpeError::TooLarge);
        }
        self.starts.push(self.symbols.len());
        self.lengths.push(symbols.len() as u32);
        self.counts.push(count);
        self.symbols.extend_from_slice(symbols);
        Ok(())
    }

    fn len(&self) -> usize {
        self.counts.len()
    }

    pub(super) fn pre_token(&self, w: usize) -> &[u32] {
        &self.symbols[self.starts[w]..self.starts[w] + self.lengths[w] as usize]
    }

    /// Replaces pre-token `w`'s symbols by `symbols`, which are no more of them (merges only join).
    pub(super) fn rewrite(&mut self, w: usize, symbols: &[u32]) {
        assert!(symbols.len() <= self.lengths[w] as usize, "a merge made a pre-token longer");
        let start = self.starts[w];
        self.symbols[start..start + symbols.len()].copy_from_slice(symbols);
        self.lengths[w] = symbols.len() as u32;
    }
}

/// Initial pair statistics: chunks of pre-tokens are counted in parallel, then summed in chunk
/// order, so every count is an exact sum and every pre-token list is sorted, whatever the threads.
pub(super) fn count_pairs(pre_tokens: &PreTokens) -> FxHashMap<Pair, PairStats> {
    const CHUNK: usize = 8192;
    let chunks: Vec<FxHashMap<Pair, PairStats>> = (0..pre_tokens.len().div_ceil(CHUNK))
        .into_par_iter()
        .map(|chunk| {
            let mut stats: FxHashMap<Pair, PairStats> = FxHashMap::default();
            for w in chunk * CHUNK..((chunk + 1) * CHUNK).min(pre_tokens.len()) {
                let count = pre_tokens.counts[w];
                for window in pre_tokens.pre_token(w).windows(2) {
                    let entry = stats.entry(pack(window[0], window[1])).or_default();
                    entry.count += count;
                    if entry.pre_tokens.last() != Some(&(w as u32)) {
                        entry.pre_tokens.push(w as u32);
                    }
                }
            }
            stats
        })
        .collect();
    let mut total: FxHashMap<Pair, PairStats> = FxHashMap::default();
    for chunk in chunks {
        for (pair, stats) in chunk {
            let entry = total.entry(pair).or_default();
            entry.count += stats.count;
            entry.pre_tokens.extend_from_slice(&stats.pre_tokens);
        }
    }
    total
}

/// Replaces, left to right, every (a, b) in pre-token `w` by `token`, and updates the pair
/// statistics from the neighbours of each replaced occurrence; the pairs it adds (all containing
/// `token`) are appended to `added`.
pub(super) fn merge_pre_token(
    pre_tokens: &mut PreTokens,
    w: usize,
    (a, b): (u32, u32),
    token: u32,
    stats: &mut FxHashMap<Pair, PairStats>,
    added: &mut Vec<Pair>,
) {
    let merged = pack(a, b);
    let count = pre_tokens.counts[w];
    let start = pre_tokens.starts[w];
    let length = pre_tokens.lengths[w] as usize;
    let symbols = &mut pre_tokens.symbols[start..start + length];
    let remove = |pair: Pair, stats: &mut FxHashMap<Pair, PairStats>| {
        // The merged pair's own entry is already gone: all its occurrences disappear.
        if pair != merged {
            take_pair(stats, pair, count);
        }
    };
    let mut add = |pair: Pair, stats: &mut FxHashMap<Pair, PairStats>| {
        give_pair(stats, pair, count, w, added);
    };
    let (mut read, mut write) = (0, 0);
    while read < length {
        if read + 1 < length && symbols[read] == a && symbols[read + 1] == b {
            // The left neighbour is taken from the rewritten prefix: it may itself be a `token`
            // made a moment ago, as in "abab" -> "t t".
            if write > 0 {
                let previous = symbols[write - 1];
                remove(pack(previous, a), stats);
                add(pack(previous, token), stats);
            }
            if read + 2 < length {
                let next = symbols[read + 2];
                remove(pack(b, next), stats);
                add(pack(token, next), stats);
            }
            symbols[write] = token;
            read += 2;
        } else {
            symbols[write] = symbols[read];
            read += 1;
        }
        write += 1;
    }
    pre_tokens.lengths[w] = write as u32;
}

/// Takes `count` occurrences of `pair` off its statistics (none if the pair has no entry left).
pub(super) fn take_pair(stats: &mut FxHashMap<Pair, PairStats>, pair: Pair, count: u64) {
    if let Some(entry) = stats.get_mut(&pair) {
        entry.count -= count;
        if entry.count == 0 {
            stats.remove(&pair);
        }
    }
}

/// Adds `count` occurrences of `pair` in pre-token `w` to its statistics, and the pair to `added`.
pub(super) fn give_pair(
    stats: &mut FxHashMap<Pair, PairStats>,
    pair: Pair,
    count: u64,
    w: usize,
    added: &mut Vec<Pair>,
) {
    let entry = stats.entry(pair).or_default();
    entry.count += count;
    if entry.pre_tokens.last() != Some(&(w as u32)) {
        entry.pre_tokens.push(w as u32);
    }
    added.push(pair);
}

/// What to train: at most `num_merges` merges, each of a pair seen at least `min_frequency`
/// times, with a progress report every `progress_every` merges.
#[derive(Clone, Copy)]
pub struct Options {
    pub num_merges: usize,
    pub min_frequency: u64,
    pub progress_every: usize,
}

/// What a merge does to the pre-tokens: BPE training replaces the pair (`Replace`); an
/// extension can keep its base's rule instead (`extend.rs`).
pub(super) trait Merger {
    /// Whether `pair` may become a token (false: its bytes are one already).
    fn allows(&mut self, pair: (u32, u32)) -> bool;

    /// Rewrites the pre-tokens that may hold `pair` (`candidates`, sorted and without repeats;
    /// `stats` no longer has the pair) for the new `token`, keeping `stats` exact; every pair
    /// whose count rose is appended to `added`.
    fn merge(
        &mut self,
        pre_tokens: &mut PreTokens,
        candidates: &[u32],
        pair: (u32, u32),
        token: u32,
        stats: &mut FxHashMap<Pair, PairStats>,
        added: &mut Vec<Pair>,
    );
}

/// BPE's own merge step: the pair replaced left to right (no pair ever makes bytes twice; see the
/// proof above).
struct Replace;

impl Merger for Replace {
    fn allows(&mut self, _: (u32, u32)) -> bool {
        true
    }

    fn merge(
        &mut self,
        pre_tokens: &mut PreTokens,
        candidates: &[u32],
        pair: (u32, u32),
        token: u32,
        stats: &mut FxHashMap<Pair, PairStats>,
        added: &mut Vec<Pair>,
    ) {
        for &w in candidates {
            merge_pre_token(pre_tokens, w as usize, pair, token, stats, added);
        }
    }
}

/// Learns merges from counted pre-tokens.
/// `progress` is called with the number of merges done every `progress_every` merges and once
/// more at the end if that number was not just reported; returning `Break` stops training (the
/// merges so far are returned). `pool` runs the parallel part (the global pool if None).
pub fn train(
    counts: &PreTokenCounts,
    options: &Options,
    pool: Option<&rayon::ThreadPool>,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Trained, BpeError> {
    if options.num_merges > (u32::MAX - 256) as usize {
        return Err(BpeError::TooManyMerges {
            num_merges: options.num_merges,
        });
    }
    let mut pre_tokens = PreTokens::new(counts)?;
    let stats = match pool {
        Some(pool) => pool.install(|| count_pairs(&pre_tokens)),
        None => count_pairs(&pre_tokens),
    };
    Ok(merge_loop(&mut pre_tokens, stats, 256, options, &mut Replace, progress))
}

/// The merge loop: the most frequent pair that `merger` allows becomes token `first_id + k` at
/// step k, until `options` say stop; `train` describes `progress`.
pub(super) fn merge_loop(
    pre_tokens: &mut PreTokens,
    mut stats: FxHashMap<Pair, PairStats>,
    first_id: u32,
    options: &Options,
    merger: &mut dyn Merger,
    progress: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Trained {
    let Options {
        num_merges,
        min_frequency,
        progress_every,
    } = *options;
    let mut heap: BinaryHeap<(u64, Reverse<Pair>)> = stats
        .iter()
        .map(|(&pair, entry)| (entry.count, Reverse(pair)))
        .collect();
    // Each merge removes at least one symbol, which bounds the merges (and the reservation).
    let most = num_merges.min(pre_tokens.symbols.len());
    let mut trained = Trained {
        merges: Vec::with_capacity(most),
        counts: Vec::with_capacity(most),
    };
    let mut added: Vec<Pair> = Vec::new();
    let min_frequency = min_frequency.max(1);
    let progress_every = progress_every.max(1);
    while trained.merges.len() < num_merges {
        let Some((count, Reverse(pair))) = heap.pop() else {
            break;
        };
        // Every pair whose count rises is pushed again with its new count, so the largest entry
        // of a pair is current or too high; a too-high one goes back with its count.
        let current = stats.get(&pair).map_or(0, |entry| entry.count);
        if current != count {
            if current > 0 {
                heap.push((current, Reverse(pair)));
            }
            continue;
        }
        if count < min_frequency {
            break;
        }
        let (left, right) = unpack(pair);
        if !merger.allows((left, right)) {
            continue; // dropped from the heap; pushed again only if its count rises
        }
        let token = first_id + trained.merges.len() as u32;
        let mut candidates = stats
            .remove(&pair)
            .map(|entry| entry.pre_tokens)
            .unwrap_or_default();
        candidates.sort_unstable();
        candidates.dedup();
        added.clear();
        merger.merge(pre_tokens, &candidates, (left, right), token, &mut stats, &mut added);
        added.sort_unstable();
        added.dedup();
        for &new_pair in &added {
            if let Some(entry) = stats.get(&new_pair) {
                heap.push((entry.count, Reverse(new_pair)));
            }
        }
        trained.merges.push((left, right));
        trained.counts.push(count);
        if trained.merges.len().is_multiple_of(progress_every)
            && progress(trained.merges.len()).is_break()
        {
            return trained;
        }
    }
    if !trained.merges.len().is_multiple_of(progress_every) {
        let _ = progress(trained.merges.len());
    }
    trained
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::{random_pre_tokens, SplitMix64};
    use std::collections::BTreeMap;

    /// The naive trainer: recount every adjacent pair of the current pre-tokens, weighted by their
    /// counts; merge the most frequent (ties: the smallest (left, right)) in every pre-token, left
    /// to right; repeat until `num_merges` or no pair is seen `min_frequency` times.
    fn naive(pre_tokens: &[(Vec<u8>, u64)], num_merges: usize, min_frequency: u64) -> Trained {
        let mut pre_tokens: Vec<(Vec<u32>, u64)> = pre_tokens
            .iter()
            .map(|(pre_token, count)| (pre_token.iter().map(|&b| u32::from(b)).collect(), *count))
            .collect();
        let (mut merges, mut counts) = (Vec::new(), Vec::new());
        while merges.len() < num_merges {
            let mut pairs: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            for (pre_token, count) in &pre_tokens {
                for pair in pre_token.windows(2) {
                    *pairs.entry((pair[0], pair[1])).or_default() += count;
                }
            }
            // Ascending pairs, replaced only by a strictly higher count: the smallest wins a tie.
            let mut best: Option<((u32, u32), u64)> = None;
            for (&pair, &count) in &pairs {
                if best.is_none_or(|(_, most)| count > most) {
                    best = Some((pair, count));
                }
            }
            let Some(((left, right), count)) = best.filter(|&(_, n)| n >= min_frequency.max(1)) else {
                break;
            };
            let token = 256 + merges.len() as u32;
            for (pre_token, _) in &mut pre_tokens {
                let mut rewritten = Vec::with_capacity(pre_token.len());
                let mut i = 0;
                while i < pre_token.len() {
                    if pre_token[i..].starts_with(&[left, right]) {
                        rewritten.push(token);
                        i += 2;
                    } else {
                        rewritten.push(pre_token[i]);
                        i += 1;
                    }
                }
                *pre_token = rewritten;
            }
            merges.push((left, right));
            counts.push(count);
        }
        Trained { merges, counts }
    }

    #[test]
    fn merges_are_those_of_the_naive_trainer() {
        let mut rng = SplitMix64::new(7);
        let alphabets: [&[char]; 4] =
            [&['a'], &['a', 'b'], &['a', 'b', 'c'], &['a', 'b', ' ', 'c', 'd']];
        for round in 0..400 {
            let alphabet = alphabets[round % alphabets.len()];
            let size = 1 + rng.below(12);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 0..5);
            let data: Vec<u8> =
                pre_tokens.iter().flat_map(|(pre_token, _)| pre_token.iter().copied()).collect();
            let mut offsets = vec![0i64];
            for (pre_token, _) in &pre_tokens {
                offsets.push(offsets.last().unwrap() + pre_token.len() as i64);
            }
            let counts: Vec<u64> = pre_tokens.iter().map(|&(_, count)| count).collect();
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let options = Options {
                num_merges: rng.below(40),
                min_frequency: rng.below(4) as u64,
                progress_every: 1 + rng.below(5),
            };
            let Trained { merges, counts: merge_counts } =
                naive(&pre_tokens, options.num_merges, options.min_frequency);
            let mut reported = Vec::new();
            let trained = train(&counted, &options, None, &mut |done| {
                reported.push(done);
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(trained.merges, merges, "{pre_tokens:?}, {} merges", options.num_merges);
            assert_eq!(trained.counts, merge_counts, "{pre_tokens:?}");
            let every = options.progress_every;
            let mut want: Vec<usize> = (every..=merges.len()).step_by(every).collect();
            if !merges.len().is_multiple_of(every) {
                want.push(merges.len());
            }
            assert_eq!(reported, want);
            // Stopped by `progress` after `stop` merges: the naive trainer's first `stop`.
            if !merges.is_empty() {
                let stop = 1 + rng.below(merges.len());
                let options = Options {
                    progress_every: 1,
                    ..options
                };
                let stopped = train(&counted, &options, None, &mut |done| {
                    if done == stop {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })
                .unwrap();
                assert_eq!(stopped.merges, merges[..stop]);
            }
        }
    }
}
