//! Unigram training (Kudo, 2018), on weighted pre-tokens, following SentencePiece's trainer:
//!
//! 1. Seed: the 256 bytes, every multi-byte character, and the `seed_size` substrings (2 to
//!    `max_piece_bytes` bytes, never cutting a UTF-8 character, never crossing a pre-token) with
//!    the highest frequency × length, found by sorting the suffixes of the unique pre-tokens
//!    (truncated to `max_piece_bytes`) and walking their LCP intervals. Like SentencePiece's
//!    suffix-array seeds, only substrings whose occurrences are not all followed by the same
//!    character are taken. Initial scores are the normalised logs of those weights.
//! 2. EM: the E-step runs forward-backward over each pre-token's lattice (in parallel; expected
//!    counts are summed in fixed point, so the result is independent of the thread count); the
//!    M-step is SentencePiece's Bayesian update score = ψ(count) − ψ(total), dropping pieces
//!    expected less than 0.5 times.
//! 3. Prune: after `sub_iterations` EM rounds, each piece's loss is the drop in likelihood when
//!    its Viterbi uses are replaced by its best alternative segmentation; the pieces with the
//!    largest losses are kept, max(1.1 × target size, shrinking_factor × current size) of them.
//! 4. Finish: the bytes plus the `budget` highest-scoring pieces.
//!
//! The 256 bytes are never removed. A byte the model does not estimate (expected less than 0.5
//! times) scores the lowest estimated score minus 10, SentencePiece's penalty for unknowns.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::count::PreTokenCounts;
use crate::segment::longest_match::ByteTrie;
use crate::segment::viterbi::{best_path, build_lattice, forward_backward, Edge};

/// Expected counts are summed as integers in units of 2^-24 so that the sum does not depend on
/// the order in which threads add.
const FIXED_POINT: f64 = (1u64 << 24) as f64;
/// SentencePiece drops pieces expected fewer times than this in the M-step.
const EXPECTED_COUNT_THRESHOLD: f64 = 0.5;
/// SentencePiece's score penalty for unknown symbols, used for bytes the model leaves unused.
const UNUSED_BYTE_PENALTY: f64 = 10.0;

/// Why training or EM could not run.
#[derive(Clone, Debug, PartialEq)]
pub enum UnigramError {
    /// The shrinking factor must lie in (0, 1), or pruning would never end.
    ShrinkingFactor(f64),
    /// EM's pieces must start with the 256 single bytes in byte order.
    BytesFirst,
    /// The numbers of pieces and of scores differ.
    ScoreCount { pieces: usize, scores: usize },
    /// An extension's base piece `i` is empty or repeats an earlier one.
    BasePiece(usize),
    /// An extension's base piece `i` has no finite score.
    BaseScore(usize),
}

pub struct UnigramOptions {
    pub seed_size: usize,
    pub max_piece_bytes: usize,
    pub shrinking_factor: f64,
    pub sub_iterations: usize,
}

/// One EM round as recorded: pieces alive after it and the log-likelihood of the corpus
/// (natural log, summed over pre-token occurrences) under the model before it.
pub struct Round {
    pub pieces: usize,
    pub log_likelihood: f64,
}

pub struct UnigramTraining {
    pub vocab: Vec<Vec<u8>>,
    pub scores: Vec<f64>,
    pub history: Vec<Round>,
}

fn is_continuation_byte(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// Digamma ψ(x) for x > 0: recurrence up to 7, then the asymptotic series.
fn digamma(mut x: f64) -> f64 {
    let mut result = 0.0;
    while x < 7.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    x -= 0.5;
    let inverse = 1.0 / x;
    let inverse2 = inverse * inverse;
    let inverse4 = inverse2 * inverse2;
    result + x.ln() + inverse2 / 24.0 - 7.0 / 960.0 * inverse4 + 31.0 / 8064.0 * inverse4 * inverse2
        - 127.0 / 30720.0 * inverse4 * inverse4
}

/// Seed pieces with their weights: bytes (ids 0..255), characters, then frequent substrings.
fn seed_pieces(
    pre_tokens: &[&[u8]],
    counts: &[u64],
    options: &UnigramOptions,
) -> (Vec<Vec<u8>>, Vec<f64>) {
    let max_length = options.max_piece_bytes.max(1);
    let mut byte_frequency = [0u64; 256];
    let mut characters: FxHashMap<Vec<u8>, u64> = FxHashMap::default();
    for (&pre_token, &count) in pre_tokens.iter().zip(counts) {
        for &byte in pre_token {
            byte_frequency[byte as usize] += count;
        }
        if let Ok(text) = std::str::from_utf8(pre_token) {
            for (start, character) in text.char_indices() {
                let length = character.len_utf8();
                if length > 1 && length <= max_length {
                    *characters
                        .entry(pre_token[start..start + length].to_vec())
                        .or_insert(0) += count;
                }
            }
        }
    }

    // Suffixes that start on a character boundary, sorted by their first max_length bytes.
    let mut suffixes: Vec<(u32, u32)> = Vec::new();
    for (index, pre_token) in pre_tokens.iter().enumerate() {
        for (position, &byte) in pre_token.iter().enumerate() {
            if !is_continuation_byte(byte) {
                suffixes.push((index as u32, position as u32));
            }
        }
    }
    let key = |&(pre_token, position): &(u32, u32)| -> &[u8] {
        let pre_token = pre_tokens[pre_token as usize];
        let start = position as usize;
        &pre_token[start..(start + max_length).min(pre_token.len())]
    };
    suffixes.par_sort_unstable_by(|x, y| key(x).cmp(key(y)));
    let n = suffixes.len();
    let common = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let lcp: Vec<usize> = (0..n)
        .into_par_iter()
        .map(|i| {
            if i == 0 {
                0
            } else {
                common(key(&suffixes[i - 1]), key(&suffixes[i]))
            }
        })
        .collect();
    let mut weight_prefix = Vec::with_capacity(n + 1);
    weight_prefix.push(0u64);
    for &(pre_token, _) in &suffixes {
        weight_prefix.push(weight_prefix.last().unwrap() + counts[pre_token as usize]);
    }

    // A min-heap of the best substrings so far: lowest score on top, and among equal scores
    // the largest bytes, so that ties keep the lexicographically smallest.
    let mut best: BinaryHeap<Reverse<(u64, Reverse<Vec<u8>>)>> = BinaryHeap::new();
    let mut offer = |entry: usize, depth: usize, parent_depth: usize, frequency: u64| {
        let (pre_token, position) = suffixes[entry];
        let pre_token = pre_tokens[pre_token as usize];
        let start = position as usize;
        // The longest prefix of the node's string that ends on a character boundary.
        let mut length = depth;
        while length > 0
            && start + length < pre_token.len()
            && is_continuation_byte(pre_token[start + length])
        {
            length -= 1;
        }
        if length <= parent_depth || length < 2 || frequency < 2 {
            return;
        }
        let bytes = &pre_token[start..start + length];
        if characters.contains_key(bytes) {
            return;
        }
        let score = frequency * length as u64;
        if best.len() >= options.seed_size {
            let Reverse((lowest, Reverse(ref lowest_bytes))) = *best.peek().unwrap();
            if score < lowest || (score == lowest && bytes >= &lowest_bytes[..]) {
                return;
            }
        }
        best.push(Reverse((score, Reverse(bytes.to_vec()))));
        if best.len() > options.seed_size {
            best.pop();
        }
    };
    if options.seed_size > 0 {
        // Bottom-up walk of the LCP intervals: each popped interval is a node whose string
        // (its depth's prefix) occurs exactly at the suffixes it spans.
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        for i in 1..=n {
            let current = if i < n { lcp[i] } else { 0 };
            let mut left = i - 1;
            while current < stack.last().unwrap().0 {
                let (depth, node_left) = stack.pop().unwrap();
                let parent_depth = current.max(stack.last().unwrap().0);
                offer(
                    node_left,
                    depth,
                    parent_depth,
                    weight_prefix[i] - weight_prefix[node_left],
                );
                left = node_left;
            }
            if current > stack.last().unwrap().0 {
                stack.push((current, left));
            }
        }
        // Leaves: a suffix whose key is longer than what it shares with both neighbours.
        for i in 0..n {
            let shared = lcp[i].max(if i + 1 < n { lcp[i + 1] } else { 0 });
            let length = key(&suffixes[i]).len();
            if length > shared {
                offer(i, length, shared, weight_prefix[i + 1] - weight_prefix[i]);
            }
        }
    }

    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut weights: Vec<f64> = byte_frequency.iter().map(|&f| f as f64).collect();
    let mut characters: Vec<(Vec<u8>, u64)> = characters.into_iter().collect();
    characters.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (bytes, frequency) in characters {
        pieces.push(bytes);
        weights.push(frequency as f64);
    }
    let mut substrings: Vec<(u64, Vec<u8>)> = best
        .into_iter()
        .map(|Reverse((score, Reverse(bytes)))| (score, bytes))
        .collect();
    substrings.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut seen: FxHashSet<Vec<u8>> = FxHashSet::default();
    for (score, bytes) in substrings {
        if seen.insert(bytes.clone()) {
            pieces.push(bytes);
            weights.push(score as f64);
        }
    }
    (pieces, weights)
}

/// The training state: every seed piece keeps its index for the whole run, so the trie is built
/// once; removed pieces score -inf and drop out of every lattice.
struct Model<'c> {
    pre_tokens: &'c [&'c [u8]],
    counts: &'c [u64],
    pieces: Vec<Vec<u8>>,
    scores: Vec<f64>,
    alive: Vec<bool>,
    trie: ByteTrie,
    root: u32,
    /// Each pre-token's lattice over the alive pieces, in chunks of PRE_TOKENS_PER_CHUNK
    /// pre-tokens, built once and filtered as pieces go, so EM scans flat arrays.
    lattices: Vec<LatticeChunk>,
    /// Pieces 0..kept are never pruned: the 256 bytes, and an extended base's pieces.
    kept: usize,
    /// Whether the kept pieces' scores are fixed (an extension's base) or estimated by EM.
    frozen: bool,
}

/// Pre-tokens per lattice chunk: the unit of parallel work, fixed so that sums are added in the
/// same order whatever the thread count.
const PRE_TOKENS_PER_CHUNK: usize = 1024;

struct LatticeChunk {
    /// Edges of the chunk's k-th pre-token are edges[bounds[k]..bounds[k + 1]].
    bounds: Vec<usize>,
    edges: Vec<Edge>,
}

impl<'c> Model<'c> {
    fn new(
        pre_tokens: &'c [&'c [u8]],
        counts: &'c [u64],
        pieces: Vec<Vec<u8>>,
        scores: Vec<f64>,
        kept: usize,
        frozen: bool,
    ) -> Self {
        let mut trie = ByteTrie::new();
        let root = trie.add_root();
        // Substrings share prefixes, so the total length bounds the node count from above.
        trie.reserve(pieces.iter().map(|p| p.len()).sum::<usize>() / 2);
        for (id, piece) in pieces.iter().enumerate() {
            trie.insert(root, piece, id as u32);
        }
        let alive = vec![true; pieces.len()];
        let mut model = Model {
            pre_tokens,
            counts,
            pieces,
            scores,
            alive,
            trie,
            root,
            lattices: Vec::new(),
            kept,
            frozen,
        };
        model.score_unused_bytes();
        model.build_lattices();
        model
    }

    fn build_lattices(&mut self) {
        let live = self.live_scores();
        self.lattices = self
            .pre_tokens
            .par_chunks(PRE_TOKENS_PER_CHUNK)
            .map(|chunk| {
                let mut edges = Vec::new();
                let mut bounds = vec![0];
                for pre_token in chunk {
                    build_lattice(
                        &self.trie,
                        self.root,
                        pre_token,
                        |t| live[t as usize],
                        &mut edges,
                    );
                    bounds.push(edges.len());
                }
                edges.shrink_to_fit();
                LatticeChunk { bounds, edges }
            })
            .collect();
    }

    /// Drops the edges of removed pieces from the cached lattices: a linear pass, where
    /// rebuilding would walk the trie again.
    fn retain_alive_edges(&mut self) {
        let alive = &self.alive;
        self.lattices.par_iter_mut().for_each(|chunk| {
            let mut kept = 0;
            let mut start = 0;
            for k in 0..chunk.bounds.len() - 1 {
                let end = chunk.bounds[k + 1];
                for i in start..end {
                    let edge = chunk.edges[i];
                    if alive[edge.token as usize] {
                        chunk.edges[kept] = edge;
                        kept += 1;
                    }
                }
                start = end;
                chunk.bounds[k + 1] = kept;
            }
            chunk.edges.truncate(kept);
            chunk.edges.shrink_to_fit();
        });
    }

    /// Scores with -inf for removed pieces, indexed by piece.
    fn live_scores(&self) -> Vec<f64> {
        (0..self.pieces.len() as u32)
            .map(|i| self.score(i))
            .collect()
    }

    /// Calls `f(pre_token, count, edges)` for every pre-token, in parallel over fixed chunks, and
    /// returns the per-chunk sums of its results added in chunk order.
    fn sum_over_lattices(
        &self,
        f: impl Fn(&[u8], u64, &[Edge], &mut (Vec<f64>, Vec<f64>)) -> f64 + Sync,
    ) -> f64 {
        let sums: Vec<f64> = self
            .lattices
            .par_iter()
            .zip(self.pre_tokens.par_chunks(PRE_TOKENS_PER_CHUNK))
            .zip(self.counts.par_chunks(PRE_TOKENS_PER_CHUNK))
            .map_init(
                || (Vec::new(), Vec::new()),
                |scratch, ((lattice, pre_tokens), counts)| {
                    let mut sum = 0.0;
                    for (k, (pre_token, &count)) in pre_tokens.iter().zip(counts).enumerate() {
                        let edges = &lattice.edges[lattice.bounds[k]..lattice.bounds[k + 1]];
                        sum += f(pre_token, count, edges, scratch);
                    }
                    sum
                },
            )
            .collect();
        sums.iter().sum()
    }

    fn score(&self, id: u32) -> f64 {
        if self.alive[id as usize] {
            self.scores[id as usize]
        } else {
            f64::NEG_INFINITY
        }
    }

    fn alive_count(&self) -> usize {
        self.alive.iter().filter(|&&a| a).count()
    }

    /// Bytes with no finite score get the lowest finite score minus the unknown penalty.
    fn score_unused_bytes(&mut self) {
        let lowest = (0..self.pieces.len())
            .filter(|&i| self.alive[i] && self.scores[i].is_finite())
            .map(|i| self.scores[i])
            .fold(f64::INFINITY, f64::min);
        let floor = if lowest.is_finite() {
            lowest - UNUSED_BYTE_PENALTY
        } else {
            -UNUSED_BYTE_PENALTY
        };
        for byte in 0..256 {
            if !self.scores[byte].is_finite() {
                self.scores[byte] = floor;
            }
        }
    }

    /// Expected uses of every piece under the current model, and the corpus log-likelihood.
    fn e_step(&self) -> (Vec<f64>, f64) {
        let live = self.live_scores();
        let expected: Vec<AtomicU64> = (0..self.pieces.len()).map(|_| AtomicU64::new(0)).collect();
        let log_likelihood = self.sum_over_lattices(|pre_token, count, edges, (forward, backward)| {
            let weight = count as f64 * FIXED_POINT;
            let score_of = |t: u32| live[t as usize];
            let total = forward_backward(
                edges,
                pre_token.len(),
                score_of,
                forward,
                backward,
                |token, p| {
                    expected[token as usize]
                        .fetch_add((p * weight).round() as u64, AtomicOrdering::Relaxed);
                },
            );
            total * count as f64
        });
        let expected = expected
            .into_iter()
            .map(|e| e.into_inner() as f64 / FIXED_POINT)
            .collect();
        (expected, log_likelihood)
    }

    /// SentencePiece's Bayesian M-step (or the plain maximum-likelihood one when `bayesian` is
    /// false, which never removes a piece and leaves unused ones at -inf).
    fn m_step(&mut self, expected: &[f64], bayesian: bool) {
        if !bayesian {
            let total: f64 = (0..expected.len())
                .filter(|&i| self.alive[i])
                .map(|i| expected[i])
                .sum();
            for i in 0..expected.len() {
                if self.alive[i] {
                    self.scores[i] = (expected[i] / total).ln();
                }
            }
            return;
        }
        let mut total = 0.0;
        let mut estimated = vec![false; expected.len()];
        for i in 0..expected.len() {
            if !self.alive[i] {
                continue;
            }
            if self.frozen && i < self.kept {
                // a base piece keeps its score, and its uses count in the total
                total += expected[i];
            } else if expected[i] < EXPECTED_COUNT_THRESHOLD {
                if i >= self.kept {
                    self.alive[i] = false;
                }
                self.scores[i] = f64::NEG_INFINITY;
            } else {
                estimated[i] = true;
                total += expected[i];
            }
        }
        let log_total = digamma(total);
        for i in 0..expected.len() {
            if estimated[i] {
                self.scores[i] = digamma(expected[i]) - log_total;
            }
        }
        self.score_unused_bytes();
    }

    /// Keeps the `target` pieces (bytes included) whose removal would cost the most likelihood.
    fn prune(&mut self, desired: usize, shrinking_factor: f64) {
        let live = self.live_scores();
        let candidates: Vec<u32> = (self.kept as u32..self.pieces.len() as u32)
            .filter(|&i| self.alive[i as usize])
            .collect();
        // What replaces each piece if it goes: its best segmentation without itself. A piece that
        // this beats is not even used for its own text and goes regardless of its loss; a piece
        // with no alternative at all stays (SentencePiece's rules).
        enum Replacement {
            Alternative(Vec<u32>),
            NotItsOwnBest,
            Irreplaceable,
        }
        let replacements: Vec<Replacement> = candidates
            .par_iter()
            .map_init(Vec::<Edge>::new, |edges, &id| {
                let piece = &self.pieces[id as usize];
                let without = |t: u32| {
                    if t == id {
                        f64::NEG_INFINITY
                    } else {
                        live[t as usize]
                    }
                };
                edges.clear();
                build_lattice(&self.trie, self.root, piece, without, edges);
                match best_path(edges, piece.len(), without) {
                    None => Replacement::Irreplaceable,
                    Some((score, _)) if score > self.scores[id as usize] => {
                        Replacement::NotItsOwnBest
                    }
                    Some((_, tokens)) => Replacement::Alternative(tokens),
                }
            })
            .collect();
        let frequency: Vec<AtomicU64> = (0..self.pieces.len()).map(|_| AtomicU64::new(0)).collect();
        self.sum_over_lattices(|pre_token, count, edges, _| {
            if let Some((_, tokens)) = best_path(edges, pre_token.len(), |t| live[t as usize]) {
                for token in tokens {
                    frequency[token as usize].fetch_add(count, AtomicOrdering::Relaxed);
                }
            }
            0.0
        });
        let frequency: Vec<f64> = frequency
            .into_iter()
            .map(|f| f.into_inner() as f64)
            .collect();
        let total: f64 = frequency.iter().sum();
        let log_total = total.ln();
        let mut losses: Vec<(f64, u32)> = Vec::new();
        let mut kept = self.kept;
        for (&id, replacement) in candidates.iter().zip(&replacements) {
            let f = frequency[id as usize];
            let alternative = match replacement {
                Replacement::Irreplaceable => {
                    kept += 1;
                    losses.push((f64::INFINITY, id));
                    continue;
                }
                Replacement::NotItsOwnBest => continue,
                Replacement::Alternative(_) if f == 0.0 => continue,
                Replacement::Alternative(tokens) => tokens,
            };
            let log_probability = f.ln() - log_total;
            let log_total_after = (total + f * (alternative.len() as f64 - 1.0)).ln();
            let log_probability_after: f64 = alternative
                .iter()
                .map(|&a| (frequency[a as usize] + f).ln() - log_total_after)
                .sum();
            losses.push((f / total * (log_probability - log_probability_after), id));
        }
        losses.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let current = self.kept + candidates.len();
        let target = desired.max((shrinking_factor * current as f64) as usize);
        // Irreplaceable pieces sort first (infinite loss) and are kept even beyond the target.
        let keep = target.saturating_sub(self.kept).max(kept - self.kept);
        for &id in &candidates {
            self.alive[id as usize] = false;
        }
        for &(_, id) in losses.iter().take(keep) {
            self.alive[id as usize] = true;
        }
        self.score_unused_bytes();
        self.retain_alive_edges();
    }
}

/// Learns a Unigram vocabulary of the 256 bytes plus at most `budget` pieces, in parallel on
/// the current rayon pool. `report` is called after every EM round with the number of pieces
/// still alive.
pub fn train(
    counts: &PreTokenCounts,
    budget: usize,
    options: &UnigramOptions,
    report: &mut dyn FnMut(usize),
) -> Result<UnigramTraining, UnigramError> {
    check_shrinking_factor(options.shrinking_factor)?;
    let pre_tokens = counts.pre_tokens();
    let counts = counts.counts();
    let (pieces, weights) = seed_pieces(&pre_tokens, counts, options);
    let total: f64 = weights.iter().sum();
    let scores = weights.iter().map(|&w| (w / total).ln()).collect();
    let model = Model::new(&pre_tokens, counts, pieces, scores, 256, false);
    let desired = ((256 + budget) as f64 * 1.1) as usize;
    Ok(fit(model, budget, desired, options, report))
}

/// Extends a Unigram vocabulary (`base`: the 256 bytes in byte order, then its other pieces,
/// all distinct, with finite `base_scores`) by at most `budget` new pieces. The base's pieces
/// keep their scores and take part in every lattice; EM estimates the new candidates (seeded
/// from the corpus as `train` seeds, less the base's pieces) and pruning removes only them.
/// Returns the base followed by the new pieces, best first, with their scores.
pub fn extend(
    counts: &PreTokenCounts,
    base: Vec<Vec<u8>>,
    base_scores: Vec<f64>,
    budget: usize,
    options: &UnigramOptions,
    report: &mut dyn FnMut(usize),
) -> Result<UnigramTraining, UnigramError> {
    check_shrinking_factor(options.shrinking_factor)?;
    check_bytes_first(&base, &base_scores)?;
    let mut seen: FxHashSet<&[u8]> = FxHashSet::default();
    for (index, piece) in base.iter().enumerate() {
        if piece.is_empty() || !seen.insert(piece) {
            return Err(UnigramError::BasePiece(index));
        }
        if !base_scores[index].is_finite() {
            return Err(UnigramError::BaseScore(index));
        }
    }
    let pre_tokens = counts.pre_tokens();
    let counts = counts.counts();
    let (seeds, weights) = seed_pieces(&pre_tokens, counts, options);
    let new: Vec<(Vec<u8>, f64)> = seeds
        .into_iter()
        .zip(weights)
        .skip(256)
        .filter(|(piece, _)| !seen.contains(&piece[..]))
        .collect();
    let total: f64 = new.iter().map(|(_, weight)| weight).sum();
    let kept = base.len();
    let mut pieces = base;
    let mut scores = base_scores;
    for (piece, weight) in new {
        pieces.push(piece);
        scores.push((weight / total).ln());
    }
    let model = Model::new(&pre_tokens, counts, pieces, scores, kept, true);
    let desired = kept + (budget as f64 * 1.1) as usize;
    Ok(fit(model, budget, desired, options, report))
}

fn check_shrinking_factor(shrinking_factor: f64) -> Result<(), UnigramError> {
    if shrinking_factor > 0.0 && shrinking_factor < 1.0 {
        Ok(())
    } else {
        Err(UnigramError::ShrinkingFactor(shrinking_factor))
    }
}

fn check_bytes_first(pieces: &[Vec<u8>], scores: &[f64]) -> Result<(), UnigramError> {
    if pieces.len() < 256
        || pieces
            .iter()
            .take(256)
            .enumerate()
            .any(|(b, p)| p[..] != [b as u8])
    {
        return Err(UnigramError::BytesFirst);
    }
    if pieces.len() != scores.len() {
        return Err(UnigramError::ScoreCount {
            pieces: pieces.len(),
            scores: scores.len(),
        });
    }
    Ok(())
}

/// EM rounds and pruning until at most `desired` pieces are alive; then the kept pieces and the
/// `budget` best of the others, by score (ties: the smaller bytes).
fn fit(
    mut model: Model<'_>,
    budget: usize,
    desired: usize,
    options: &UnigramOptions,
    report: &mut dyn FnMut(usize),
) -> UnigramTraining {
    let mut history = Vec::new();
    loop {
        for _ in 0..options.sub_iterations.max(1) {
            let (expected, log_likelihood) = model.e_step();
            model.m_step(&expected, true);
            model.retain_alive_edges();
            history.push(Round {
                pieces: model.alive_count(),
                log_likelihood,
            });
            report(model.alive_count());
        }
        if model.alive_count() <= desired {
            break;
        }
        model.prune(desired, options.shrinking_factor);
    }
    let mut chosen: Vec<usize> = (model.kept..model.pieces.len())
        .filter(|&i| model.alive[i])
        .collect();
    chosen.sort_by(|&a, &b| {
        model.scores[b]
            .total_cmp(&model.scores[a])
            .then_with(|| model.pieces[a].cmp(&model.pieces[b]))
    });
    chosen.truncate(budget);
    let ids: Vec<usize> = (0..model.kept).chain(chosen).collect();
    UnigramTraining {
        vocab: ids.iter().map(|&i| model.pieces[i].clone()).collect(),
        scores: ids.iter().map(|&i| model.scores[i]).collect(),
        history,
    }
}

/// Runs `iterations` EM rounds from the given pieces (the 256 bytes first) and scores without
/// pruning; returns the new scores and the log-likelihood before each round. With `bayesian`
/// false this is textbook EM, whose likelihood never decreases.
pub fn em(
    counts: &PreTokenCounts,
    pieces: Vec<Vec<u8>>,
    scores: Vec<f64>,
    iterations: usize,
    bayesian: bool,
) -> Result<(Vec<f64>, Vec<f64>), UnigramError> {
    check_bytes_first(&pieces, &scores)?;
    let pre_tokens = counts.pre_tokens();
    let mut model = Model::new(&pre_tokens, counts.counts(), pieces, scores, 256, false);
    let mut log_likelihoods = Vec::new();
    for _ in 0..iterations {
        let (expected, log_likelihood) = model.e_step();
        model.m_step(&expected, bayesian);
        log_likelihoods.push(log_likelihood);
    }
    let scores = (0..model.pieces.len())
        .map(|i| model.score(i as u32))
        .collect();
    Ok((scores, log_likelihoods))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::{random_pre_tokens, SplitMix64};
    use std::collections::{BTreeMap, BTreeSet};

    /// Flat buffers of `pre_tokens` for `PreTokenCounts`.
    fn flat(pre_tokens: &[(Vec<u8>, u64)]) -> (Vec<u8>, Vec<i64>, Vec<u64>) {
        let data = pre_tokens.iter().flat_map(|(pre_token, _)| pre_token.iter().copied()).collect();
        let mut offsets = vec![0i64];
        for (pre_token, _) in pre_tokens {
            offsets.push(offsets.last().unwrap() + pre_token.len() as i64);
        }
        (data, offsets, pre_tokens.iter().map(|&(_, count)| count).collect())
    }

    /// The seeds by enumeration: the bytes with their frequencies, the multi-byte characters
    /// (most frequent first, then bytewise), then among the substrings of 2 to `max_piece_bytes`
    /// bytes on character boundaries that are not one character, seen at least twice, and not
    /// always followed by the same character (a character that would not fit in
    /// `max_piece_bytes`, or the end of the pre-token, counts as none), the `seed_size` with the
    /// highest frequency x length (ties: bytewise smallest), in that order, weighted by it.
    fn brute_force_seeds(
        pre_tokens: &[(Vec<u8>, u64)],
        options: &UnigramOptions,
    ) -> (Vec<Vec<u8>>, Vec<f64>) {
        let longest = options.max_piece_bytes.max(1);
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let mut weights = vec![0.0; 256];
        let mut characters: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut substrings: BTreeMap<Vec<u8>, (u64, BTreeSet<Option<char>>)> = BTreeMap::new();
        for (pre_token, count) in pre_tokens {
            for &b in pre_token {
                weights[b as usize] += *count as f64;
            }
            let text = std::str::from_utf8(pre_token).unwrap();
            let bounds: Vec<usize> =
                text.char_indices().map(|(i, _)| i).chain([pre_token.len()]).collect();
            for (k, &start) in bounds.iter().enumerate() {
                for &end in &bounds[k + 1..] {
                    if end - start > longest {
                        break;
                    }
                    let next = text[end..]
                        .chars()
                        .next()
                        .filter(|c| end - start + c.len_utf8() <= longest);
                    let entry = substrings.entry(pre_token[start..end].to_vec()).or_default();
                    entry.0 += count;
                    entry.1.insert(next);
                    if k + 1 < bounds.len() && end == bounds[k + 1] && end - start > 1 {
                        *characters.entry(pre_token[start..end].to_vec()).or_default() += count;
                    }
                }
            }
        }
        let mut characters: Vec<(Vec<u8>, u64)> = characters.into_iter().collect();
        characters.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (bytes, frequency) in characters {
            pieces.push(bytes);
            weights.push(frequency as f64);
        }
        let mut chosen: Vec<(u64, Vec<u8>)> = substrings
            .into_iter()
            .filter(|(bytes, (frequency, next))| {
                let one_character = std::str::from_utf8(bytes).unwrap().chars().count() == 1;
                let branches = next.len() > 1 || next.contains(&None);
                bytes.len() >= 2 && !one_character && *frequency >= 2 && branches
            })
            .map(|(bytes, (frequency, _))| (frequency * bytes.len() as u64, bytes))
            .collect();
        chosen.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        chosen.truncate(options.seed_size);
        for (score, bytes) in chosen {
            pieces.push(bytes);
            weights.push(score as f64);
        }
        (pieces, weights)
    }

    fn options(rng: &mut SplitMix64) -> UnigramOptions {
        UnigramOptions {
            seed_size: rng.below(40),
            max_piece_bytes: 1 + rng.below(7),
            shrinking_factor: 0.5 + 0.4 * rng.next_f64(),
            sub_iterations: 1 + rng.below(3),
        }
    }

    const ALPHABETS: [&[char]; 3] = [&['a', 'b'], &['a', 'b', 'c'], &['a', 'é', '€', 'b']];

    #[test]
    fn seeds_are_the_enumerated_substrings() {
        let mut rng = SplitMix64::new(3);
        for round in 0..300 {
            let size = 1 + rng.below(10);
            let alphabet = ALPHABETS[round % ALPHABETS.len()];
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..5);
            let options = options(&mut rng);
            let (slices, counts): (Vec<&[u8]>, Vec<u64>) =
                pre_tokens.iter().map(|(w, c)| (&w[..], *c)).unzip();
            let got = seed_pieces(&slices, &counts, &options);
            let want = brute_force_seeds(&pre_tokens, &options);
            let (size, longest) = (options.seed_size, options.max_piece_bytes);
            assert_eq!(got.0, want.0, "{pre_tokens:?}, seed size {size}, max {longest} bytes");
            assert_eq!(got.1, want.1);
        }
    }

    /// Every segmentation of `pre_token` into pieces with a finite score, as piece ids.
    fn segmentations(pre_token: &[u8], pieces: &[Vec<u8>], scores: &[f64]) -> Vec<Vec<u32>> {
        if pre_token.is_empty() {
            return vec![Vec::new()];
        }
        let mut all = Vec::new();
        for (id, piece) in pieces.iter().enumerate() {
            if scores[id].is_finite() && pre_token.starts_with(piece) {
                for mut rest in segmentations(&pre_token[piece.len()..], pieces, scores) {
                    rest.insert(0, id as u32);
                    all.push(rest);
                }
            }
        }
        all
    }

    /// The 256 bytes and up to `extra` random distinct pieces of 2 to 4 characters, with
    /// random log-probabilities that sum (in probability) to 1.
    fn random_model(
        rng: &mut SplitMix64,
        alphabet: &[char],
        extra: usize,
    ) -> (Vec<Vec<u8>>, Vec<f64>) {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for _ in 0..extra {
            let piece: String = (0..2 + rng.below(3))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            if !pieces.contains(&piece.as_bytes().to_vec()) {
                pieces.push(piece.into_bytes());
            }
        }
        let weights: Vec<f64> = pieces.iter().map(|_| 0.05 + rng.next_f64()).collect();
        let total: f64 = weights.iter().sum();
        (pieces, weights.iter().map(|w| (w / total).ln()).collect())
    }

    #[test]
    fn e_step_is_the_average_over_enumerated_segmentations() {
        let mut rng = SplitMix64::new(5);
        for round in 0..100 {
            let alphabet = ALPHABETS[round % ALPHABETS.len()];
            let size = 1 + rng.below(6);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 5, 1..5);
            let extra = rng.below(12);
            let (pieces, mut scores) = random_model(&mut rng, alphabet, extra);
            // Removed pieces (-inf) take no part.
            for score in scores.iter_mut().skip(256) {
                if rng.below(4) == 0 {
                    *score = f64::NEG_INFINITY;
                }
            }
            let (slices, counts): (Vec<&[u8]>, Vec<u64>) =
                pre_tokens.iter().map(|(w, c)| (&w[..], *c)).unzip();
            let model = Model::new(&slices, &counts, pieces.clone(), scores.clone(), 256, false);
            let (expected, log_likelihood) = model.e_step();
            let mut want = vec![0.0; pieces.len()];
            let mut want_likelihood = 0.0;
            let mut occurrences = 0.0;
            for (pre_token, count) in &pre_tokens {
                let all = segmentations(pre_token, &pieces, &scores);
                let log_probability =
                    |s: &Vec<u32>| s.iter().map(|&t| scores[t as usize]).sum::<f64>();
                let total: f64 = all.iter().map(|s| log_probability(s).exp()).sum();
                want_likelihood += *count as f64 * total.ln();
                for s in &all {
                    let posterior = log_probability(s).exp() / total;
                    for &t in s {
                        want[t as usize] += *count as f64 * posterior;
                    }
                }
                occurrences += (*count * pre_token.len() as u64) as f64;
            }
            assert!(
                (log_likelihood - want_likelihood).abs() <= 1e-9 * want_likelihood.abs().max(1.0),
                "{pre_tokens:?}: {log_likelihood} vs {want_likelihood}"
            );
            for (t, (&got, &want)) in expected.iter().zip(&want).enumerate() {
                // Each edge's share is rounded to 2^-24 in the fixed-point sum.
                assert!(
                    (got - want).abs() <= 1e-6 * occurrences,
                    "{pre_tokens:?}: piece {t} {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn textbook_em_never_lowers_the_likelihood() {
        let mut rng = SplitMix64::new(9);
        for round in 0..60 {
            let alphabet = ALPHABETS[round % ALPHABETS.len()];
            let size = 1 + rng.below(8);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 6, 1..5);
            let extra = 1 + rng.below(15);
            let (pieces, scores) = random_model(&mut rng, alphabet, extra);
            let (data, offsets, counts) = flat(&pre_tokens);
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let (_, likelihoods) = em(&counted, pieces, scores, 8, false).unwrap();
            for pair in likelihoods.windows(2) {
                let not_lower = pair[1] >= pair[0] - 1e-9 * pair[0].abs();
                assert!(not_lower, "{pre_tokens:?}: {likelihoods:?}");
            }
        }
    }

    #[test]
    fn training_keeps_every_byte_and_the_budget() {
        let mut rng = SplitMix64::new(13);
        for round in 0..100 {
            let alphabet = ALPHABETS[round % ALPHABETS.len()];
            let size = 1 + rng.below(12);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..5);
            let (data, offsets, counts) = flat(&pre_tokens);
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let options = options(&mut rng);
            let budget = rng.below(20);
            let mut reported = Vec::new();
            let trained =
                train(&counted, budget, &options, &mut |alive| reported.push(alive)).unwrap();
            let vocab = &trained.vocab;
            assert!((0..=255u8).all(|b| vocab[b as usize] == [b]));
            assert_eq!(vocab.iter().collect::<BTreeSet<_>>().len(), vocab.len());
            assert_eq!(trained.scores.len(), vocab.len());
            assert!(trained.scores.iter().all(|s| s.is_finite()));
            assert!(trained.scores[256..].windows(2).all(|pair| pair[0] >= pair[1]));
            for piece in &vocab[256..] {
                assert!((2..=options.max_piece_bytes).contains(&piece.len()));
                assert!(std::str::from_utf8(piece).is_ok(), "{piece:?} cuts a character");
                let holds = |(w, _): &(Vec<u8>, _)| w.windows(piece.len()).any(|s| s == &piece[..]);
                assert!(pre_tokens.iter().any(holds));
            }
            let alive: Vec<usize> = trained.history.iter().map(|round| round.pieces).collect();
            assert_eq!(reported, alive);
            assert!(alive.windows(2).all(|pair| pair[0] >= pair[1]));
            let last = *alive.last().unwrap();
            assert!(last <= ((256 + budget) as f64 * 1.1) as usize);
            // The bytes, then the `budget` best of the pieces alive at the end.
            assert_eq!(vocab.len(), 256 + budget.min(last - 256));
        }
    }

    #[test]
    fn extension_keeps_the_base_and_adds_only_corpus_pieces() {
        let mut rng = SplitMix64::new(29);
        for round in 0..60 {
            let base_alphabet = ALPHABETS[round % ALPHABETS.len()];
            let alphabet = ALPHABETS[(round + 1) % ALPHABETS.len()];
            let size = 1 + rng.below(10);
            let base_corpus = random_pre_tokens(&mut rng, base_alphabet, size, 8, 1..5);
            let (data, offsets, counts) = flat(&base_corpus);
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let options = options(&mut rng);
            let base = train(&counted, rng.below(15), &options, &mut |_| {}).unwrap();
            let size = 1 + rng.below(12);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..5);
            let (data, offsets, counts) = flat(&pre_tokens);
            let counted = PreTokenCounts::new(&data, &offsets, &counts).unwrap();
            let budget = rng.below(20);
            let (vocab, scores) = (base.vocab.clone(), base.scores.clone());
            let extended = extend(&counted, vocab, scores, budget, &options, &mut |_| {}).unwrap();
            let kept = base.vocab.len();
            assert_eq!(extended.vocab[..kept], base.vocab[..]);
            assert_eq!(extended.scores[..kept], base.scores[..]);
            assert!(extended.vocab.len() <= kept + budget);
            assert_eq!(extended.vocab.iter().collect::<BTreeSet<_>>().len(), extended.vocab.len());
            assert!(extended.scores[kept..].windows(2).all(|pair| pair[0] >= pair[1]));
            for piece in &extended.vocab[kept..] {
                let holds = |(w, _): &(Vec<u8>, _)| w.windows(piece.len()).any(|s| s == &piece[..]);
                assert!(pre_tokens.iter().any(holds), "{piece:?} is in no pre-token");
            }
            let alive = extended.history.last().unwrap().pieces;
            assert!(alive <= kept + (budget as f64 * 1.1) as usize || alive == kept);
            assert_eq!(extended.vocab.len(), kept + budget.min(alive - kept));
        }
    }

    #[test]
    fn extension_refuses_a_bad_base() {
        let counted = PreTokenCounts::new(b"ab", &[0, 2], &[1]).unwrap();
        let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let options = UnigramOptions {
            seed_size: 10,
            max_piece_bytes: 4,
            shrinking_factor: 0.75,
            sub_iterations: 1,
        };
        let extend_with = |pieces: Vec<Vec<u8>>, scores: Vec<f64>| {
            extend(&counted, pieces, scores, 2, &options, &mut |_| {}).err()
        };
        let repeated = [bytes.clone(), vec![b"ab".to_vec(), b"ab".to_vec()]].concat();
        assert_eq!(extend_with(repeated, vec![-1.0; 258]), Some(UnigramError::BasePiece(257)));
        let mut scores = vec![-1.0; 256];
        scores[7] = f64::NAN;
        assert_eq!(extend_with(bytes.clone(), scores), Some(UnigramError::BaseScore(7)));
        let no_zero = bytes[1..].to_vec();
        assert_eq!(extend_with(no_zero, vec![-1.0; 255]), Some(UnigramError::BytesFirst));
    }
}
