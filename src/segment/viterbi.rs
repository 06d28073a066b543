//! The `viterbi` segmenter (Unigram): the cut of a pre-token that maximises the sum of its
//! tokens' log-probabilities, found in O(n · L) over the lattice of vocabulary matches. The same
//! lattice gives subword sampling (forward filtering, backward sampling) and n-best lists, and
//! its forward-backward pass is the E-step of the Unigram trainer.
//!
//! Ties are broken deterministically: among equal scores the path whose last token starts
//! earliest (is longest) wins, position by position from the end.
use std::cell::Cell;

use super::longest_match::ByteTrie;
use super::rng::SplitMix64;
use super::scratch::{reserve_huge, with_buffer};
use super::{ByteRole, RandomKind, RandomSegmenter, RankedSegmenter, Segmenter, VocabularyError};

/// One vocabulary match in a pre-token: bytes [start, end) are token `token`.
#[derive(Clone, Copy, Debug)]
pub struct Edge {
    pub start: u32,
    pub end: u32,
    pub token: u32,
}

/// log(exp(a) + exp(b)) without overflow; -inf is the identity.
#[inline]
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (high, low) = if a > b { (a, b) } else { (b, a) };
    high + (low - high).exp().ln_1p()
}

/// Appends to `edges` every match of a token with finite score in `piece`, ordered by start and
/// then by length. `score_of` gives -inf for tokens that must not be used.
pub fn build_lattice(
    trie: &ByteTrie,
    root: u32,
    piece: &[u8],
    score_of: impl Fn(u32) -> f64,
    edges: &mut Vec<Edge>,
) {
    for start in 0..piece.len() {
        trie.for_each_prefix(root, &piece[start..], |length, token| {
            if score_of(token) > f64::NEG_INFINITY {
                edges.push(Edge {
                    start: start as u32,
                    end: (start + length) as u32,
                    token,
                });
            }
        });
    }
}

/// Forward-backward over a lattice of `length` bytes whose edges are ordered by start; edges
/// whose token scores -inf count as absent. Calls `marginal(token, probability)` for every edge
/// with its posterior probability and returns the log of the total probability of all
/// segmentations (-inf when there is none).
pub fn forward_backward(
    edges: &[Edge],
    length: usize,
    score_of: impl Fn(u32) -> f64,
    forward: &mut Vec<f64>,
    backward: &mut Vec<f64>,
    mut marginal: impl FnMut(u32, f64),
) -> f64 {
    forward.clear();
    forward.resize(length + 1, f64::NEG_INFINITY);
    backward.clear();
    backward.resize(length + 1, f64::NEG_INFINITY);
    forward[0] = 0.0;
    backward[length] = 0.0;
    // Edges are ordered by start, so forward[start] is complete when its edges are reached,
    // and in reverse order backward[end] is complete for the same reason.
    for edge in edges {
        let (s, e) = (edge.start as usize, edge.end as usize);
        forward[e] = log_add_exp(forward[e], forward[s] + score_of(edge.token));
    }
    for edge in edges.iter().rev() {
        let (s, e) = (edge.start as usize, edge.end as usize);
        backward[s] = log_add_exp(backward[s], score_of(edge.token) + backward[e]);
    }
    let total = forward[length];
    if total == f64::NEG_INFINITY {
        return total;
    }
    for edge in edges {
        let (s, e) = (edge.start as usize, edge.end as usize);
        let log_probability = forward[s] + score_of(edge.token) + backward[e] - total;
        if log_probability > f64::NEG_INFINITY {
            marginal(edge.token, log_probability.exp());
        }
    }
    total
}

/// The best path through a lattice ordered by start: (score, tokens), or None when the lattice
/// does not connect the two ends.
pub fn best_path(
    edges: &[Edge],
    length: usize,
    score_of: impl Fn(u32) -> f64,
) -> Option<(f64, Vec<u32>)> {
    let mut best = vec![f64::NEG_INFINITY; length + 1];
    let mut back: Vec<usize> = vec![usize::MAX; length + 1];
    best[0] = 0.0;
    for (index, edge) in edges.iter().enumerate() {
        let candidate = best[edge.start as usize] + score_of(edge.token);
        // Strictly greater: the earliest start (longest last token) keeps a tie.
        if candidate > best[edge.end as usize] {
            best[edge.end as usize] = candidate;
            back[edge.end as usize] = index;
        }
    }
    if best[length] == f64::NEG_INFINITY {
        return None;
    }
    let mut tokens = Vec::new();
    let mut position = length;
    while position > 0 {
        let edge = edges[back[position]];
        tokens.push(edge.token);
        position = edge.start as usize;
    }
    tokens.reverse();
    Some((best[length], tokens))
}

/// A Unigram vocabulary ready to segment: token spellings with their log-probabilities.
pub struct Viterbi {
    trie: ByteTrie,
    root: u32,
    scores: Vec<f64>,
}

impl Viterbi {
    /// `vocab[i]` has log-probability `scores[i]` (finite); an empty `vocab[i]` is an unused id.
    /// All 256 single bytes must be in the vocabulary so that every input has a segmentation. A
    /// duplicated spelling keeps its first id.
    pub fn new(vocab: &[Vec<u8>], scores: &[f64]) -> Result<Self, VocabularyError> {
        if vocab.len() != scores.len() {
            return Err(VocabularyError::ScoreCount {
                tokens: vocab.len(),
                scores: scores.len(),
            });
        }
        let mut trie = ByteTrie::new();
        let root = trie.add_root();
        for (id, (token, &score)) in vocab.iter().zip(scores).enumerate() {
            if token.is_empty() {
                continue; // an id no token has; its score is never read
            }
            if !score.is_finite() {
                return Err(VocabularyError::NonFiniteScore { id, score });
            }
            trie.insert(root, token, id as u32);
        }
        for byte in 0..=255u8 {
            if trie.get(root, &[byte]).is_none() {
                return Err(VocabularyError::MissingByte {
                    byte,
                    role: ByteRole::Any,
                });
            }
        }
        Ok(Viterbi {
            trie,
            root,
            scores: scores.to_vec(),
        })
    }

    fn lattice(&self, piece: &[u8], edges: &mut Vec<Edge>) {
        edges.clear();
        build_lattice(
            &self.trie,
            self.root,
            piece,
            |token| self.scores[token as usize],
            edges,
        );
    }

    /// Draws one segmentation with probability proportional to exp(alpha · score): forward
    /// filtering computes each prefix's total weight, then tokens are drawn from the end.
    pub fn sample(&self, piece: &[u8], alpha: f64, rng: &mut SplitMix64, out: &mut Vec<u32>) {
        let mut edges = Vec::new();
        self.lattice(piece, &mut edges);
        let length = piece.len();
        let mut forward = vec![f64::NEG_INFINITY; length + 1];
        forward[0] = 0.0;
        for edge in &edges {
            let (s, e) = (edge.start as usize, edge.end as usize);
            forward[e] = log_add_exp(
                forward[e],
                forward[s] + alpha * self.scores[edge.token as usize],
            );
        }
        // Edges grouped by end, each group in start order, so a draw is reproducible.
        let mut by_end: Vec<Vec<Edge>> = vec![Vec::new(); length + 1];
        for edge in &edges {
            by_end[edge.end as usize].push(*edge);
        }
        let first = out.len();
        let mut position = length;
        while position > 0 {
            let candidates = &by_end[position];
            let draw = rng.next_f64();
            let mut cumulative = 0.0;
            // Rounding can leave the sum a hair under 1: the last candidate takes the remainder.
            let mut chosen = candidates[candidates.len() - 1];
            for edge in candidates {
                cumulative += (forward[edge.start as usize]
                    + alpha * self.scores[edge.token as usize]
                    - forward[position])
                    .exp();
                if draw < cumulative {
                    chosen = *edge;
                    break;
                }
            }
            out.push(chosen.token);
            position = chosen.start as usize;
        }
        out[first..].reverse();
    }

    /// The `n` best segmentations of `piece`, best first, all distinct, with their scores. Ties
    /// in score keep the order of the single best path's tie-break (earliest last-token start).
    pub fn nbest(&self, piece: &[u8], n: usize) -> Vec<(Vec<u32>, f64)> {
        if n == 0 {
            return Vec::new();
        }
        let mut edges = Vec::new();
        self.lattice(piece, &mut edges);
        let length = piece.len();
        let mut by_end: Vec<Vec<Edge>> = vec![Vec::new(); length + 1];
        for edge in &edges {
            by_end[edge.end as usize].push(*edge);
        }
        // best[j]: up to n partial paths ending at j as (score, edge, rank of the path at the
        // edge's start); distinct (edge, rank) pairs are distinct segmentations.
        struct Partial {
            score: f64,
            edge: Edge,
            previous: usize,
        }
        let mut best: Vec<Vec<Partial>> = Vec::with_capacity(length + 1);
        best.push(vec![Partial {
            score: 0.0,
            edge: Edge {
                start: 0,
                end: 0,
                token: 0,
            },
            previous: 0,
        }]);
        for end in 1..=length {
            let mut candidates = Vec::new();
            for edge in &by_end[end] {
                for (rank, partial) in best[edge.start as usize].iter().enumerate() {
                    candidates.push(Partial {
                        score: partial.score + self.scores[edge.token as usize],
                        edge: *edge,
                        previous: rank,
                    });
                }
            }
            candidates.sort_by(|x, y| {
                y.score
                    .total_cmp(&x.score)
                    .then(x.edge.start.cmp(&y.edge.start))
                    .then(x.previous.cmp(&y.previous))
            });
            candidates.truncate(n);
            best.push(candidates);
        }
        best[length]
            .iter()
            .enumerate()
            .map(|(rank, partial)| {
                let mut tokens = Vec::new();
                let (mut position, mut rank) = (length, rank);
                while position > 0 {
                    let step = &best[position][rank];
                    tokens.push(step.edge.token);
                    rank = step.previous;
                    position = step.edge.start as usize;
                }
                tokens.reverse();
                (tokens, partial.score)
            })
            .collect()
    }
}

impl Viterbi {
    /// Viterbi over `piece` into caller-provided buffers of piece.len() + 1 entries.
    fn best_into(
        &self,
        piece: &[u8],
        best: &mut [f64],
        back_start: &mut [u32],
        back_token: &mut [u32],
        out: &mut Vec<u32>,
    ) {
        let length = piece.len();
        best.fill(f64::NEG_INFINITY);
        best[0] = 0.0;
        for start in 0..length {
            let base = best[start];
            if base == f64::NEG_INFINITY {
                continue;
            }
            self.trie
                .for_each_prefix(self.root, &piece[start..], |token_length, token| {
                    let end = start + token_length;
                    let candidate = base + self.scores[token as usize];
                    // Strictly greater: the earliest start (longest last token) keeps a tie.
                    if candidate > best[end] {
                        best[end] = candidate;
                        back_start[end] = start as u32;
                        back_token[end] = token;
                    }
                });
        }
        let first = out.len();
        let mut position = length;
        while position > 0 {
            out.push(back_token[position]);
            position = back_start[position] as usize;
        }
        out[first..].reverse();
    }
}

impl RandomSegmenter for Viterbi {
    fn kind(&self) -> RandomKind {
        RandomKind::Sample
    }

    fn segment_random(&self, piece: &[u8], alpha: f64, rng: &mut SplitMix64, out: &mut Vec<u32>) {
        self.sample(piece, alpha, rng, out);
    }
}

impl RankedSegmenter for Viterbi {
    fn nbest(&self, piece: &[u8], n: usize) -> Vec<(Vec<u32>, f64)> {
        Viterbi::nbest(self, piece, n)
    }
}

impl Segmenter for Viterbi {
    fn random(&self) -> Option<&dyn RandomSegmenter> {
        Some(self)
    }

    fn ranked(&self) -> Option<&dyn RankedSegmenter> {
        Some(self)
    }

    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        // Most pre-tokens are short: their tables live on the stack, no allocation per piece.
        const ON_STACK: usize = 64;
        let size = piece.len() + 1;
        if size <= ON_STACK {
            let (mut best, mut back_start, mut back_token) =
                ([0.0; ON_STACK], [0u32; ON_STACK], [0u32; ON_STACK]);
            self.best_into(
                piece,
                &mut best[..size],
                &mut back_start[..size],
                &mut back_token[..size],
                out,
            );
        } else {
            thread_local! {
                static BEST: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
                static BACK_START: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
                static BACK_TOKEN: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
            }
            with_buffer(&BEST, |best| {
                with_buffer(&BACK_START, |back_start| {
                    with_buffer(&BACK_TOKEN, |back_token| {
                        reserve_huge(best, size);
                        reserve_huge(back_start, size);
                        reserve_huge(back_token, size);
                        best.resize(size, 0.0);
                        back_start.resize(size, 0);
                        back_token.resize(size, 0);
                        self.best_into(piece, best, back_start, back_token, out);
                    })
                })
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;


    /// A cut of a piece: its tokens, the start of each, and its score summed left to right.
    struct Cut {
        tokens: Vec<u32>,
        starts: Vec<usize>,
        score: f64,
    }

    /// Every cut of `piece` into tokens of `vocab` (a spelling stands for its first id).
    fn cuts(piece: &[u8], vocab: &[Vec<u8>], scores: &[f64]) -> Vec<Cut> {
        let mut first: HashMap<&[u8], u32> = HashMap::new();
        for (id, token) in vocab.iter().enumerate() {
            first.entry(&token[..]).or_insert(id as u32);
        }
        let longest = vocab.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut done = Vec::new();
        let mut open = vec![Cut {
            tokens: Vec::new(),
            starts: Vec::new(),
            score: 0.0,
        }];
        while let Some(cut) = open.pop() {
            let at: usize = cut.tokens.iter().map(|&t| vocab[t as usize].len()).sum();
            if at == piece.len() {
                done.push(cut);
                continue;
            }
            for end in at + 1..=piece.len().min(at + longest) {
                if let Some(&id) = first.get(&piece[at..end]) {
                    let mut longer = Cut {
                        tokens: cut.tokens.clone(),
                        starts: cut.starts.clone(),
                        score: cut.score + scores[id as usize],
                    };
                    longer.tokens.push(id);
                    longer.starts.push(at);
                    open.push(longer);
                }
            }
        }
        // Best first; among equal scores the earliest last start, then the one before it, ...
        done.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.starts.iter().rev().cmp(b.starts.iter().rev()))
        });
        done
    }

    /// The 256 bytes and random tokens of 2 to 4 bytes over "abc" (some spelled twice), with
    /// small integer scores: sums are exact and ties are common.
    fn random_vocab(rng: &mut SplitMix64) -> (Vec<Vec<u8>>, Vec<f64>) {
        let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for _ in 0..rng.below(16) {
            vocab.push((0..2 + rng.below(3)).map(|_| b"abc"[rng.below(3)]).collect());
        }
        let scores = vocab.iter().map(|_| -1.0 - rng.below(6) as f64).collect();
        (vocab, scores)
    }

    /// Short pieces over "abc", and long ones (past the stack buffers) of a filler byte that no
    /// token holds with a few short "abc" islands, whose cuts are few enough to enumerate.
    fn random_piece(rng: &mut SplitMix64) -> Vec<u8> {
        if rng.below(6) > 0 {
            return (0..1 + rng.below(9)).map(|_| b"abc"[rng.below(3)]).collect();
        }
        let mut piece = vec![b'z'; 64 + rng.below(40)];
        for _ in 0..3 {
            let at = rng.below(piece.len() - 4);
            for byte in &mut piece[at..at + 4] {
                *byte = b"abc"[rng.below(3)];
            }
        }
        piece
    }

    #[test]
    fn best_cuts_are_the_best_enumerated() {
        let mut rng = SplitMix64::new(23);
        for _ in 0..300 {
            let (vocab, scores) = random_vocab(&mut rng);
            let viterbi = Viterbi::new(&vocab, &scores).unwrap();
            for _ in 0..8 {
                let piece = random_piece(&mut rng);
                let all = cuts(&piece, &vocab, &scores);
                let best = &all[0];
                let mut got = Vec::new();
                viterbi.segment(&piece, &mut got);
                assert_eq!(got, best.tokens, "{:?}", String::from_utf8_lossy(&piece));
                let mut edges = Vec::new();
                viterbi.lattice(&piece, &mut edges);
                let path = best_path(&edges, piece.len(), |t| scores[t as usize]);
                assert_eq!(path, Some((best.score, best.tokens.clone())));
                let n = 1 + rng.below(all.len() + 2);
                let want: Vec<(Vec<u32>, f64)> =
                    all.iter().take(n).map(|c| (c.tokens.clone(), c.score)).collect();
                assert_eq!(viterbi.nbest(&piece, n), want, "{:?}", String::from_utf8_lossy(&piece));
            }
        }
    }

    #[test]
    fn forward_backward_sums_the_enumerated_cuts() {
        let mut rng = SplitMix64::new(29);
        for _ in 0..200 {
            let (vocab, mut scores) = random_vocab(&mut rng);
            for score in &mut scores {
                *score *= 0.37;
            }
            let viterbi = Viterbi::new(&vocab, &scores).unwrap();
            let piece = random_piece(&mut rng);
            let all = cuts(&piece, &vocab, &scores);
            let total: f64 = all.iter().map(|c| c.score.exp()).sum();
            let mut want = vec![0.0; vocab.len()];
            for cut in &all {
                for &t in &cut.tokens {
                    want[t as usize] += cut.score.exp() / total;
                }
            }
            let mut edges = Vec::new();
            viterbi.lattice(&piece, &mut edges);
            let mut got = vec![0.0; vocab.len()];
            let (mut forward, mut backward) = (Vec::new(), Vec::new());
            let log_total = forward_backward(
                &edges,
                piece.len(),
                |t| scores[t as usize],
                &mut forward,
                &mut backward,
                |t, p| got[t as usize] += p,
            );
            assert!((log_total - total.ln()).abs() <= 1e-9 * total.ln().abs().max(1.0));
            for (t, (&got, &want)) in got.iter().zip(&want).enumerate() {
                assert!((got - want).abs() <= 1e-9, "token {t}: {got} vs {want}");
            }
        }
    }
}
