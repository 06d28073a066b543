//! The tokenisation graph of a counted corpus (ConvexTok, section 3), as flat arrays.
//!
//! Every unique pre-token w (count n_w, length L) has nodes 0..L, a free byte edge (i, i+1) and a
//! priced token edge (i, j) for 2 <= j - i <= max_token_bytes, coloured by the substring w[i..j].
//! Colours are shared across pre-tokens. This module owns two hot loops:
//!
//! * building the *reduced* LP (candidate colours only, cut into independent segments, identical
//!   segments merged, byte chains contracted) as flat edge arrays for `polytok.lp.graph`;
//! * evaluating the Lagrangian bound on the *full* graph: one shortest path per pre-token with
//!   edge costs n_w + mu_e, in parallel (fixed-order sums, so independent of the thread count).
//!
//! Its smoothed version, for the dual solver, is in `soft_paths.rs`.
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// Marks a full-graph edge whose colour is not in the reduced LP.
const DROPPED: u32 = u32::MAX;

/// The share of its bound a long edge's price takes in `uncapped_shortest_paths`: a colour's
/// total then stays below theta despite the rounding of its many terms (each within 2^-53).
const LONG_EDGE_SHARE: f64 = 1.0 - 1e-9;

/// An input of the graph's computations whose length is fixed by the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphInput {
    /// A flag per colour.
    Candidates,
    /// A price per reduced-LP priced edge.
    LpPrices,
    /// A price per full-graph edge.
    Prices,
}

/// Why the graph's computations cannot take an input.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphError {
    /// `input` has `got` entries where the graph needs `expected`.
    Length {
        input: GraphInput,
        got: usize,
        expected: usize,
    },
    /// A price is negative, infinite or NaN.
    Prices,
    /// A temperature that is not finite and positive.
    Temperature(f64),
    /// No colour has this id.
    Colour(u32),
}

/// Checks that `tau` is a finite, positive temperature.
pub fn check_temperature(tau: f64) -> Result<(), GraphError> {
    if !(tau > 0.0) || tau.is_infinite() {
        return Err(GraphError::Temperature(tau));
    }
    Ok(())
}

pub struct TokenGraph {
    data: Vec<u8>,
    offsets: Vec<usize>,
    pub(crate) counts: Vec<u64>,
    pub(crate) max_len: usize,
    /// First full-graph edge of each pre-token (n + 1 entries); edges of a pre-token are in
    /// order (i ascending, then j ascending).
    pub(crate) edge_start: Vec<usize>,
    pub(crate) edge_colour: Vec<u32>,
    /// Each colour is the substring data[colour_start .. colour_start + colour_len] (its first
    /// occurrence).
    colour_start: Vec<usize>,
    pub(crate) colour_len: Vec<u32>,
    /// Sum of n_w over every occurrence of the colour as an edge.
    pub(crate) colour_frequency: Vec<u64>,
    /// Reduced-LP priced edge of each full edge, or DROPPED; set by `reduced_lp` (empty before
    /// the first: the dual solver never builds an LP and never pays for it).
    edge_lp: Vec<u32>,
    /// Weight (merged count) of the segment each reduced-LP priced edge belongs to.
    lp_edge_weight: Vec<f64>,
    /// How `soft_paths` groups and blocks the pre-tokens, made on its first call.
    pub(crate) soft_plan: std::sync::OnceLock<crate::lp::soft_paths::SoftPlan>,
    /// Colours every vocabulary of the bound holds (an extension's base; empty: none), set by
    /// `fix_colours`: the dual ascent leaves their edges unpriced and their colours outside
    /// the budget.
    pub(crate) fixed: Vec<bool>,
}

/// Fails unless `got` is `expected`.
fn check_length(input: GraphInput, got: usize, expected: usize) -> Result<(), GraphError> {
    if got != expected {
        return Err(GraphError::Length {
            input,
            got,
            expected,
        });
    }
    Ok(())
}

/// The reduced LP: free and priced edges of the merged segments, with their costs.
#[derive(Default)]
pub struct ReducedLp {
    pub constant: f64,
    pub segment_weight: Vec<f64>,
    pub node_supply: Vec<f64>,
    pub free_tail: Vec<u32>,
    pub free_head: Vec<u32>,
    pub free_cost: Vec<f64>,
    pub priced_tail: Vec<u32>,
    pub priced_head: Vec<u32>,
    pub priced_cost: Vec<f64>,
    /// Compact LP colour id of each priced edge.
    pub priced_colour: Vec<u32>,
    /// Full-graph colour id of each compact LP colour.
    pub lp_colours: Vec<u32>,
}

/// The end positions j of the token edges leaving position i of a pre-token of length `len`.
#[inline]
pub(crate) fn ends(i: usize, len: usize, max_len: usize) -> std::ops::RangeInclusive<usize> {
    (i + 2)..=len.min(i.saturating_add(max_len))
}

impl TokenGraph {
    pub fn new(data: Vec<u8>, offsets: Vec<usize>, counts: Vec<u64>, max_len: usize) -> Self {
        let n = counts.len();
        let mut edge_start = Vec::with_capacity(n + 1);
        // Reserved exactly: a growing vector would hold up to twice the edges at its peak.
        let total: usize = (0..n)
            .map(|w| {
                let len = offsets[w + 1] - offsets[w];
                (0..len)
                    .map(|i| (len.min(i.saturating_add(max_len)) + 1).saturating_sub(i + 2))
                    .sum::<usize>()
            })
            .sum();
        let mut edge_colour = Vec::with_capacity(total);
        let mut colour_start = Vec::new();
        let mut colour_len = Vec::new();
        let mut colour_frequency = Vec::new();
        {
            // Colours are numbered in order of first occurrence; pre-tokens are sorted, so the
            // numbering is a function of the counts alone.
            let mut ids: FxHashMap<&[u8], u32> = FxHashMap::default();
            for w in 0..n {
                edge_start.push(edge_colour.len());
                let (a, b) = (offsets[w], offsets[w + 1]);
                let pre_token = &data[a..b];
                for i in 0..pre_token.len() {
                    for j in ends(i, pre_token.len(), max_len) {
                        let next = colour_start.len() as u32;
                        let id = *ids.entry(&pre_token[i..j]).or_insert(next);
                        if id == next {
                            colour_start.push(a + i);
                            colour_len.push((j - i) as u32);
                            colour_frequency.push(0);
                        }
                        colour_frequency[id as usize] += counts[w];
                        edge_colour.push(id);
                    }
                }
            }
            edge_start.push(edge_colour.len());
        }
        // They grew by doubling: up to twice the colours' memory, held as long as the graph.
        colour_start.shrink_to_fit();
        colour_len.shrink_to_fit();
        colour_frequency.shrink_to_fit();
        TokenGraph {
            data,
            offsets,
            counts,
            max_len,
            edge_start,
            edge_colour,
            colour_start,
            colour_len,
            colour_frequency,
            edge_lp: Vec::new(),
            lp_edge_weight: Vec::new(),
            soft_plan: std::sync::OnceLock::new(),
            fixed: Vec::new(),
        }
    }

    /// The reduced-LP priced edge of full edge e, DROPPED when none (or no LP built yet).
    fn lp_edge(&self, e: usize) -> u32 {
        self.edge_lp.get(e).copied().unwrap_or(DROPPED)
    }

    pub(crate) fn pre_token_len(&self, w: usize) -> usize {
        self.offsets[w + 1] - self.offsets[w]
    }

    /// The number of full-graph (token) edges.
    pub fn num_edges(&self) -> usize {
        self.edge_colour.len()
    }

    /// The number of colours.
    pub fn num_colours(&self) -> usize {
        self.colour_start.len()
    }

    /// The colour of every full-graph edge.
    pub fn edge_colours(&self) -> &[u32] {
        &self.edge_colour
    }

    /// The length in bytes of every colour.
    pub fn colour_lengths(&self) -> &[u32] {
        &self.colour_len
    }

    /// The weighted frequency of every colour: the sum of counts over its occurrences.
    pub fn colour_frequencies(&self) -> &[u64] {
        &self.colour_frequency
    }

    /// The bytes of colour `t`.
    pub fn colour_bytes(&self, t: u32) -> Result<&[u8], GraphError> {
        let index = t as usize;
        if index >= self.colour_start.len() {
            return Err(GraphError::Colour(t));
        }
        let start = self.colour_start[index];
        Ok(&self.data[start..start + self.colour_len[index] as usize])
    }

    /// Checks a flag per colour, as `reduced_lp` takes.
    pub fn check_candidates(&self, candidate: &[bool]) -> Result<(), GraphError> {
        check_length(GraphInput::Candidates, candidate.len(), self.num_colours())
    }

    /// Checks a price per reduced-LP priced edge (of the last `reduced_lp`), as
    /// `prices_from_lp` takes.
    pub fn check_lp_prices(&self, lp_mu: &[f64]) -> Result<(), GraphError> {
        check_length(GraphInput::LpPrices, lp_mu.len(), self.lp_edge_weight.len())
    }

    /// Checks a price per full-graph edge, of any value (`price_dropped` takes them).
    pub fn check_price_count(&self, mu: &[f64]) -> Result<(), GraphError> {
        check_length(GraphInput::Prices, mu.len(), self.num_edges())
    }

    /// Checks a finite, non-negative price per full-graph edge, as the shortest paths take.
    pub fn check_prices(&self, mu: &[f64]) -> Result<(), GraphError> {
        self.check_price_count(mu)?;
        if mu.iter().any(|&m| !(m >= 0.0) || m.is_infinite()) {
            return Err(GraphError::Prices);
        }
        Ok(())
    }

    /// Builds the reduced LP over the colours with `candidate[colour]` set.
    ///
    /// Reductions, each exact for the restricted problem (only candidate colours priced):
    /// * a position no candidate edge jumps over cuts a pre-token into independent segments
    ///   (the path must pass through it), so the LP is a sum over segments;
    /// * identical segments have identical graphs, so they merge into one with the summed count;
    /// * a segment of one byte has exactly one path: a constant;
    /// * a node where no candidate edge starts or ends is only crossed by byte edges, so each
    ///   run of such nodes contracts into one free edge costing (bytes skipped) x count.
    pub fn reduced_lp(&mut self, candidate: &[bool]) -> ReducedLp {
        let n = self.counts.len();
        let mut lp = ReducedLp::default();
        self.lp_edge_weight.clear();
        let mut segment_ids: FxHashMap<&[u8], u32> = FxHashMap::default();
        // First occurrence (pre-token, start, end) of each unique segment.
        let mut segment_place: Vec<(usize, usize, usize)> = Vec::new();
        // Per pre-token, its multi-byte segments as (segment id, start), in order.
        let mut pre_token_segments: Vec<Vec<(u32, usize)>> = Vec::with_capacity(n);
        for w in 0..n {
            let len = self.pre_token_len(w);
            let pre_token = &self.data[self.offsets[w]..self.offsets[w + 1]];
            let count = self.counts[w] as f64;
            let mut pieces = Vec::new();
            let mut emit = |a: usize, b: usize, lp: &mut ReducedLp| {
                if b - a == 1 {
                    lp.constant += count;
                    return;
                }
                let next = segment_place.len() as u32;
                let id = *segment_ids.entry(&pre_token[a..b]).or_insert(next);
                if id == next {
                    segment_place.push((w, a, b));
                    lp.segment_weight.push(0.0);
                }
                lp.segment_weight[id as usize] += count;
                pieces.push((id, a));
            };
            let mut reach = 0;
            let mut start = 0;
            let mut e = self.edge_start[w];
            for i in 0..len {
                if i > 0 && reach <= i {
                    emit(start, i, &mut lp);
                    start = i;
                }
                for j in ends(i, len, self.max_len) {
                    if candidate[self.edge_colour[e] as usize] {
                        reach = reach.max(j);
                    }
                    e += 1;
                }
            }
            emit(start, len, &mut lp);
            pre_token_segments.push(pieces);
        }

        // Graph of each unique segment, contracted, built from its first occurrence.
        let mut lp_colour_of: FxHashMap<u32, u32> = FxHashMap::default();
        let mut segment_priced_start = Vec::with_capacity(segment_place.len());
        let mut kept: Vec<u32> = Vec::new();
        for (s, &(w, a, b)) in segment_place.iter().enumerate() {
            let weight = lp.segment_weight[s];
            let len = b - a;
            let pre_token_len = self.pre_token_len(w);
            // Full edges of the pre-token starting at position a: skip those starting earlier.
            let mut e = self.edge_start[w];
            for i in 0..a {
                e += ends(i, pre_token_len, self.max_len).count();
            }
            let mut edges_here: Vec<(usize, usize, u32)> = Vec::new();
            for i in a..b {
                for j in ends(i, pre_token_len, self.max_len) {
                    let colour = self.edge_colour[e];
                    if candidate[colour as usize] {
                        debug_assert!(j <= b);
                        edges_here.push((i - a, j - a, colour));
                    }
                    e += 1;
                }
            }
            // Node id of each local position, u32::MAX where contracted away.
            kept.clear();
            kept.resize(len + 1, u32::MAX);
            kept[0] = 0;
            kept[len] = 0;
            for &(i, j, _) in &edges_here {
                kept[i] = 0;
                kept[j] = 0;
            }
            let mut previous: Option<(usize, u32)> = None;
            for p in 0..=len {
                if kept[p] == u32::MAX {
                    continue;
                }
                let node = lp.node_supply.len() as u32;
                kept[p] = node;
                lp.node_supply.push(if p == 0 {
                    -1.0
                } else if p == len {
                    1.0
                } else {
                    0.0
                });
                if let Some((q, tail)) = previous {
                    lp.free_tail.push(tail);
                    lp.free_head.push(node);
                    lp.free_cost.push(weight * (p - q) as f64);
                }
                previous = Some((p, node));
            }
            segment_priced_start.push(lp.priced_tail.len());
            for &(i, j, colour) in &edges_here {
                let next = lp.lp_colours.len() as u32;
                let lp_colour = *lp_colour_of.entry(colour).or_insert(next);
                if lp_colour == next {
                    lp.lp_colours.push(colour);
                }
                lp.priced_tail.push(kept[i]);
                lp.priced_head.push(kept[j]);
                lp.priced_cost.push(weight);
                lp.priced_colour.push(lp_colour);
                self.lp_edge_weight.push(weight);
            }
        }

        // Map every full edge of a candidate colour to its reduced-LP edge: a segment's
        // candidate edges appear in the same canonical order in each of its occurrences.
        self.edge_lp.clear();
        self.edge_lp.resize(self.edge_colour.len(), DROPPED);
        for w in 0..n {
            let len = self.pre_token_len(w);
            let pieces = &pre_token_segments[w];
            let mut piece = 0;
            let mut next_edge = 0usize;
            let mut e = self.edge_start[w];
            for i in 0..len {
                for _ in ends(i, len, self.max_len) {
                    if candidate[self.edge_colour[e] as usize] {
                        while piece + 1 < pieces.len() && pieces[piece + 1].1 <= i {
                            piece += 1;
                            next_edge = 0;
                        }
                        let (s, _) = pieces[piece];
                        self.edge_lp[e] = (segment_priced_start[s as usize] + next_edge) as u32;
                        next_edge += 1;
                    }
                    e += 1;
                }
            }
        }
        lp
    }

    /// Shortest path distances from node 0 of pre-token w, with byte edges costing n_w and the
    /// token edges for which `use_edge(e)` holds costing n_w + mu_e. Fills `dist` and, for each
    /// node, the edge that reaches it (usize::MAX for a byte edge).
    fn distances(
        &self,
        w: usize,
        mu: &[f64],
        use_edge: impl Fn(usize) -> bool,
        dist: &mut Vec<f64>,
        via: &mut Vec<usize>,
    ) {
        let len = self.pre_token_len(w);
        let count = self.counts[w] as f64;
        dist.clear();
        dist.resize(len + 1, f64::INFINITY);
        via.clear();
        via.resize(len + 1, usize::MAX);
        dist[0] = 0.0;
        let mut e = self.edge_start[w];
        for i in 0..len {
            let here = dist[i];
            if here + count < dist[i + 1] {
                dist[i + 1] = here + count;
                via[i + 1] = usize::MAX;
            }
            for j in ends(i, len, self.max_len) {
                if use_edge(e) {
                    let cost = here + count + mu[e];
                    if cost < dist[j] {
                        dist[j] = cost;
                        via[j] = e;
                    }
                }
                e += 1;
            }
        }
    }

    /// Sum over pre-tokens of the shortest path with costs n_w + mu_e, and a 0/1 mark on every
    /// full edge used by the chosen shortest paths (a subgradient ingredient).
    pub fn shortest_paths(&self, mu: &[f64]) -> (f64, Vec<u8>) {
        let n = self.counts.len();
        let per_pre_token: Vec<(f64, Vec<usize>)> = (0..n)
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(dist, via), w| {
                    self.distances(w, mu, |_| true, dist, via);
                    let len = self.pre_token_len(w);
                    let mut used = Vec::new();
                    let mut node = len;
                    while node > 0 {
                        let e = via[node];
                        if e == usize::MAX {
                            node -= 1;
                        } else {
                            used.push(e);
                            node -= self.edge_length(w, e);
                        }
                    }
                    (dist[len], used)
                },
            )
            .collect();
        let mut total = 0.0;
        let mut on_path = vec![0u8; self.edge_colour.len()];
        for (value, used) in per_pre_token {
            total += value;
            for e in used {
                on_path[e] = 1;
            }
        }
        (total, on_path)
    }

    /// Sum over pre-tokens of the shortest path on each pre-token's *uncapped* graph, when this
    /// graph is capped at `max_len` bytes: its own edges cost n_w + mu_e, and every longer
    /// substring edge (i, j), generated on the fly and never stored, costs
    /// n_w + theta x n_w / F x LONG_EDGE_SHARE, with F the smallest weighted frequency of the
    /// `max_len`-byte windows inside w[i..j]. A window occurs wherever the long substring does,
    /// so F bounds the long colour's own frequency and its price total M_t stays below `theta`;
    /// with theta the K-th largest colour total of this graph, no long colour enters the top-K
    /// sum, and the Lagrangian bound holds for every vocabulary, of tokens of any length.
    /// Summed in pre-token order (independent of the thread count).
    pub fn uncapped_shortest_paths(&self, mu: &[f64], theta: f64) -> f64 {
        let n = self.counts.len();
        let m = self.max_len;
        let per_pre_token: Vec<f64> = (0..n)
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(dist, window): &mut (Vec<f64>, Vec<f64>), w| {
                    let len = self.pre_token_len(w);
                    let count = self.counts[w] as f64;
                    dist.clear();
                    dist.resize(len + 1, f64::INFINITY);
                    dist[0] = 0.0;
                    let long = m < len;
                    window.clear();
                    if long {
                        // The frequency of window (a, a + m): the last edge of position a.
                        let mut e = self.edge_start[w];
                        for _ in 0..=(len - m) {
                            window.push(
                                self.colour_frequency[self.edge_colour[e + m - 2] as usize] as f64,
                            );
                            e += m - 1;
                        }
                    }
                    let share = theta * count * LONG_EDGE_SHARE;
                    let mut e = self.edge_start[w];
                    for i in 0..len {
                        let here = dist[i];
                        if here + count < dist[i + 1] {
                            dist[i + 1] = here + count;
                        }
                        for j in ends(i, len, m) {
                            let cost = here + count + mu[e];
                            if cost < dist[j] {
                                dist[j] = cost;
                            }
                            e += 1;
                        }
                        if long && i + m < len {
                            let mut fewest = window[i];
                            for j in (i + m + 1)..=len {
                                fewest = fewest.min(window[j - m]);
                                let cost = here + count + share / fewest;
                                if cost < dist[j] {
                                    dist[j] = cost;
                                }
                            }
                        }
                    }
                    dist[len]
                },
            )
            .collect();
        per_pre_token.iter().sum()
    }

    /// Marks as fixed the colours whose bytes are among `tokens`; returns the flag per colour.
    pub fn fix_colours(&mut self, tokens: &[Vec<u8>]) -> &[bool] {
        let tokens: rustc_hash::FxHashSet<&[u8]> = tokens.iter().map(|t| &t[..]).collect();
        self.fixed = (0..self.colour_len.len())
            .map(|t| {
                let start = self.colour_start[t];
                tokens.contains(&self.data[start..start + self.colour_len[t] as usize])
            })
            .collect();
        &self.fixed
    }

    /// Whether colour t is fixed (`fix_colours`).
    #[inline]
    pub(crate) fn is_fixed(&self, t: usize) -> bool {
        self.fixed.get(t).copied().unwrap_or(false)
    }

    /// The colour totals M_t = sum of mu over the edges of colour t, summed in edge order.
    pub fn colour_totals(&self, mu: &[f64]) -> Vec<f64> {
        let mut totals = vec![0.0; self.colour_len.len()];
        for (&t, &m) in self.edge_colour.iter().zip(mu) {
            totals[t as usize] += m;
        }
        totals
    }

    /// The subgradient of L at the prices whose shortest paths marked `on_path` and whose top-K
    /// colours are flagged `in_top`: d_e = on_path_e - in_top(colour of e), in {-1, 0, 1}.
    /// Returns |d|^2, the number of edges where it is not 0.
    pub fn subgradient_norm(&self, on_path: &[u8], in_top: &[bool]) -> usize {
        self.edge_colour
            .par_iter()
            .zip(on_path)
            .filter(|&(&t, &p)| (p != 0) != in_top[t as usize])
            .count()
    }

    /// max(0, mu + step x d) for the subgradient d of `subgradient_norm`, edge by edge.
    pub fn subgradient_step(&self, mu: &[f64], on_path: &[u8], in_top: &[bool], step: f64) -> Vec<f64> {
        self.edge_colour
            .par_iter()
            .zip(on_path)
            .zip(mu)
            .map(|((&t, &p), &m)| {
                let d = f64::from(p != 0) - f64::from(u8::from(in_top[t as usize]));
                (m + step * d).max(0.0)
            })
            .collect()
    }

    /// Length in bytes of full edge e of pre-token w.
    fn edge_length(&self, _w: usize, e: usize) -> usize {
        self.colour_len[self.edge_colour[e] as usize] as usize
    }

    /// Prices every dropped edge so it is never cheaper than the path it skips: with dist the
    /// shortest distances using only reduced-LP edges (at prices mu), a dropped edge (i, j)
    /// gets mu = max(0, dist[j] - dist[i] - n_w). Reduced-LP edges keep their price.
    pub fn price_dropped(&self, mu: &[f64]) -> Vec<f64> {
        let n = self.counts.len();
        let parts: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(dist, via), w| {
                    self.distances(w, mu, |e| self.lp_edge(e) != DROPPED, dist, via);
                    let len = self.pre_token_len(w);
                    let count = self.counts[w] as f64;
                    let mut out = Vec::with_capacity(self.edge_start[w + 1] - self.edge_start[w]);
                    let mut e = self.edge_start[w];
                    for i in 0..len {
                        for j in ends(i, len, self.max_len) {
                            out.push(if self.lp_edge(e) == DROPPED {
                                (dist[j] - dist[i] - count).max(0.0)
                            } else {
                                mu[e]
                            });
                            e += 1;
                        }
                    }
                    out
                },
            )
            .collect();
        parts.concat()
    }

    /// Spreads reduced-LP edge prices over the full graph: a merged segment of weight N
    /// occurring in pre-token w takes the share n_w / N, which keeps every shortest path and
    /// every colour total M_t unchanged. Dropped edges get 0.
    pub fn prices_from_lp(&self, lp_mu: &[f64]) -> Vec<f64> {
        let n = self.counts.len();
        let mut mu = vec![0.0; self.edge_colour.len()];
        for w in 0..n {
            let count = self.counts[w] as f64;
            for e in self.edge_start[w]..self.edge_start[w + 1] {
                let lp = self.lp_edge(e);
                if lp != DROPPED {
                    mu[e] = lp_mu[lp as usize] * count / self.lp_edge_weight[lp as usize];
                }
            }
        }
        mu
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::{random_pre_tokens, SplitMix64};
    use std::collections::HashMap;

    fn graph_of(pre_tokens: &[(Vec<u8>, u64)], max_len: usize) -> TokenGraph {
        let data = pre_tokens.iter().flat_map(|(pre_token, _)| pre_token.iter().copied()).collect();
        let mut offsets = vec![0];
        for (pre_token, _) in pre_tokens {
            offsets.push(offsets.last().unwrap() + pre_token.len());
        }
        let counts = pre_tokens.iter().map(|&(_, count)| count).collect();
        TokenGraph::new(data, offsets, counts, max_len)
    }

    /// Every token edge (w, i, j): pre-token w's substring [i, j) of 2 to `max_len` bytes, in
    /// pre-token order, then i, then j.
    fn token_edges(pre_tokens: &[(Vec<u8>, u64)], max_len: usize) -> Vec<(usize, usize, usize)> {
        let mut edges = Vec::new();
        for (w, (pre_token, _)) in pre_tokens.iter().enumerate() {
            for i in 0..pre_token.len() {
                for j in i + 2..=pre_token.len() {
                    if j - i <= max_len {
                        edges.push((w, i, j));
                    }
                }
            }
        }
        edges
    }

    /// Every path from node 0 to node `len`, as its steps (i, j) of any length.
    fn paths(len: usize) -> Vec<Vec<(usize, usize)>> {
        if len == 0 {
            return vec![Vec::new()];
        }
        let mut all = Vec::new();
        for last in 0..len {
            for mut path in paths(last) {
                path.push((last, len));
                all.push(path);
            }
        }
        all
    }

    const MAX_LENS: [usize; 5] = [2, 3, 4, 6, usize::MAX];

    #[test]
    fn colours_are_the_enumerated_substrings() {
        let mut rng = SplitMix64::new(31);
        for round in 0..200 {
            let alphabet = &['a', 'b', 'c'][..1 + round % 3];
            let size = 1 + rng.below(8);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..6);
            let max_len = MAX_LENS[rng.below(MAX_LENS.len())];
            let graph = graph_of(&pre_tokens, max_len);
            let edges = token_edges(&pre_tokens, max_len);
            assert_eq!(graph.num_edges(), edges.len());
            for (w, (pre_token, _)) in pre_tokens.iter().enumerate() {
                // Nodes 0..=len; the pre-token's edges are a run of the edge arrays.
                assert_eq!(graph.pre_token_len(w), pre_token.len());
                let first = edges.iter().position(|&(v, _, _)| v >= w).unwrap_or(edges.len());
                assert_eq!(graph.edge_start[w], first);
            }
            assert_eq!(graph.edge_start[pre_tokens.len()], edges.len());
            // Colours: the distinct substrings, numbered in order of first occurrence, each with
            // its length and the sum of the counts of its occurrences.
            let mut colours: Vec<&[u8]> = Vec::new();
            let mut frequency: HashMap<&[u8], u64> = HashMap::new();
            for &(w, i, j) in &edges {
                let bytes = &pre_tokens[w].0[i..j];
                if !colours.contains(&bytes) {
                    colours.push(bytes);
                }
                *frequency.entry(bytes).or_default() += pre_tokens[w].1;
            }
            assert_eq!(graph.num_colours(), colours.len());
            for (e, &(w, i, j)) in edges.iter().enumerate() {
                let bytes = &pre_tokens[w].0[i..j];
                let colour = graph.edge_colours()[e];
                assert_eq!(colours.iter().position(|&c| c == bytes), Some(colour as usize));
                assert_eq!(graph.colour_bytes(colour), Ok(bytes));
            }
            for (t, &bytes) in colours.iter().enumerate() {
                assert_eq!(graph.colour_lengths()[t] as usize, bytes.len());
                assert_eq!(graph.colour_frequencies()[t], frequency[bytes]);
            }
            let none = colours.len() as u32;
            assert_eq!(graph.colour_bytes(none), Err(GraphError::Colour(none)));
        }
    }

    #[test]
    fn shortest_paths_are_the_cheapest_enumerated() {
        let mut rng = SplitMix64::new(37);
        for round in 0..200 {
            let alphabet = &['a', 'b', 'c'][..1 + round % 3];
            let size = 1 + rng.below(8);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..6);
            let max_len = MAX_LENS[rng.below(MAX_LENS.len())];
            let graph = graph_of(&pre_tokens, max_len);
            let edges = token_edges(&pre_tokens, max_len);
            let index: HashMap<(usize, usize, usize), usize> =
                edges.iter().enumerate().map(|(e, &edge)| (edge, e)).collect();
            // Quarters: every sum below is exact.
            let mu: Vec<f64> = edges.iter().map(|_| rng.below(12) as f64 / 4.0).collect();
            let (total, on_path) = graph.shortest_paths(&mu);
            let mut want = 0.0;
            for (w, (pre_token, count)) in pre_tokens.iter().enumerate() {
                let count = *count as f64;
                let cost = |path: &[(usize, usize)]| -> Option<f64> {
                    path.iter()
                        .map(|&(i, j)| match j - i {
                            1 => Some(count),
                            _ => index.get(&(w, i, j)).map(|&e| count + mu[e]),
                        })
                        .sum()
                };
                let cheapest = paths(pre_token.len())
                    .iter()
                    .filter_map(|p| cost(p))
                    .fold(f64::INFINITY, f64::min);
                want += cheapest;
                // The marked edges of w, with byte edges between them, make a cheapest path.
                let mut marked: Vec<(usize, usize)> = edges
                    .iter()
                    .enumerate()
                    .filter(|&(e, &(v, _, _))| v == w && on_path[e] == 1)
                    .map(|(_, &(_, i, j))| (i, j))
                    .collect();
                marked.sort();
                let mut path = Vec::new();
                let mut at = 0;
                for (i, j) in marked {
                    assert!(i >= at, "{pre_token:?}: marked edges overlap");
                    path.extend((at..i).map(|k| (k, k + 1)));
                    path.push((i, j));
                    at = j;
                }
                path.extend((at..pre_token.len()).map(|k| (k, k + 1)));
                assert_eq!(cost(&path), Some(cheapest), "{pre_token:?}");
            }
            assert_eq!(total, want, "{pre_tokens:?}, max_len {max_len}");
        }
    }

    #[test]
    fn uncapped_paths_price_the_long_substrings() {
        let mut rng = SplitMix64::new(41);
        for round in 0..200 {
            let alphabet = &['a', 'b', 'c'][..1 + round % 3];
            let size = 1 + rng.below(8);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..6);
            let max_len = 2 + rng.below(3);
            let graph = graph_of(&pre_tokens, max_len);
            let edges = token_edges(&pre_tokens, max_len);
            let index: HashMap<(usize, usize, usize), usize> =
                edges.iter().enumerate().map(|(e, &edge)| (edge, e)).collect();
            let mu: Vec<f64> = edges.iter().map(|_| 3.0 * rng.next_f64()).collect();
            let theta = 0.1 + 5.0 * rng.next_f64();
            // A substring longer than max_len costs n_w + theta n_w / F x LONG_EDGE_SHARE, F the
            // least weighted frequency of its max_len-byte windows.
            let window_frequency = |w: usize, a: usize| {
                let colour = graph.edge_colours()[index[&(w, a, a + max_len)]];
                graph.colour_frequencies()[colour as usize] as f64
            };
            let mut want = 0.0;
            for (w, (pre_token, count)) in pre_tokens.iter().enumerate() {
                let count = *count as f64;
                let step = |(i, j): (usize, usize)| match j - i {
                    1 => count,
                    length if length <= max_len => count + mu[index[&(w, i, j)]],
                    _ => {
                        let fewest = (i..=j - max_len)
                            .map(|a| window_frequency(w, a))
                            .fold(f64::INFINITY, f64::min);
                        count + theta * count * LONG_EDGE_SHARE / fewest
                    }
                };
                want += paths(pre_token.len())
                    .iter()
                    .map(|path| path.iter().map(|&s| step(s)).sum::<f64>())
                    .fold(f64::INFINITY, f64::min);
            }
            let got = graph.uncapped_shortest_paths(&mu, theta);
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "{pre_tokens:?}, max_len {max_len}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn reduced_lp_keeps_the_shortest_paths_of_candidate_edges() {
        let mut rng = SplitMix64::new(43);
        for round in 0..200 {
            let alphabet = &['a', 'b', 'c'][..1 + round % 3];
            let size = 1 + rng.below(8);
            let pre_tokens = random_pre_tokens(&mut rng, alphabet, size, 8, 1..6);
            let max_len = MAX_LENS[rng.below(MAX_LENS.len())];
            let mut graph = graph_of(&pre_tokens, max_len);
            let edges = token_edges(&pre_tokens, max_len);
            let index: HashMap<(usize, usize, usize), usize> =
                edges.iter().enumerate().map(|(e, &edge)| (edge, e)).collect();
            let candidate: Vec<bool> = (0..graph.num_colours())
                .map(|_| rng.below(3) > 0)
                .collect();
            let lp = graph.reduced_lp(&candidate);
            assert!(lp.lp_colours.iter().all(|&t| candidate[t as usize]));
            // Its segments by enumeration: a pre-token is cut at every position that no candidate
            // edge jumps over; a one-byte segment is a constant, the others merge by their bytes
            // (numbered by first occurrence) and keep the nodes that candidate edges touch.
            let is_candidate = |&(w, i, j): &(usize, usize, usize)| {
                candidate[graph.edge_colours()[index[&(w, i, j)]] as usize]
            };
            let mut constant = 0.0;
            let mut segments: Vec<(&[u8], f64)> = Vec::new();
            let (mut nodes, mut priced) = (0, 0);
            for (w, (pre_token, count)) in pre_tokens.iter().enumerate() {
                let inside = edges.iter().filter(|&&(v, _, _)| v == w).filter(|e| is_candidate(e));
                let mut cuts: Vec<usize> = (1..pre_token.len())
                    .filter(|&p| !inside.clone().any(|&(_, i, j)| i < p && p < j))
                    .collect();
                cuts.insert(0, 0);
                cuts.push(pre_token.len());
                for pair in cuts.windows(2) {
                    let (a, b) = (pair[0], pair[1]);
                    if b - a == 1 {
                        constant += *count as f64;
                        continue;
                    }
                    let bytes = &pre_token[a..b];
                    match segments.iter_mut().find(|(s, _)| *s == bytes) {
                        Some((_, weight)) => *weight += *count as f64,
                        None => {
                            segments.push((bytes, *count as f64));
                            let here: Vec<(usize, usize)> = inside
                                .clone()
                                .filter(|&&(_, i, j)| a <= i && j <= b)
                                .map(|&(_, i, j)| (i, j))
                                .collect();
                            let mut touched: Vec<usize> =
                                here.iter().flat_map(|&(i, j)| [i, j]).chain([a, b]).collect();
                            touched.sort();
                            touched.dedup();
                            nodes += touched.len();
                            priced += here.len();
                        }
                    }
                }
            }
            assert_eq!(lp.constant, constant);
            let weights: Vec<f64> = segments.iter().map(|&(_, weight)| weight).collect();
            assert_eq!(lp.segment_weight, weights);
            assert_eq!(lp.node_supply.len(), nodes);
            assert_eq!(lp.free_tail.len(), nodes - segments.len());
            assert_eq!(lp.priced_tail.len(), priced);
            let priced = lp.priced_tail.len();
            let lp_mu: Vec<f64> = (0..priced).map(|_| 2.0 * rng.next_f64()).collect();
            // The reduced LP's value at lp_mu: its constant plus a shortest path through each
            // merged segment (nodes from supply -1 to supply 1, edges forward in node order).
            let mut arcs: Vec<(u32, u32, f64)> = Vec::new();
            for k in 0..lp.free_tail.len() {
                arcs.push((lp.free_tail[k], lp.free_head[k], lp.free_cost[k]));
            }
            for k in 0..priced {
                assert!(candidate[lp.lp_colours[lp.priced_colour[k] as usize] as usize]);
                arcs.push((lp.priced_tail[k], lp.priced_head[k], lp.priced_cost[k] + lp_mu[k]));
            }
            arcs.sort_by_key(|&(tail, head, _)| (tail, head));
            let mut dist: Vec<f64> = lp
                .node_supply
                .iter()
                .map(|&s| if s < 0.0 { 0.0 } else { f64::INFINITY })
                .collect();
            for &(tail, head, cost) in &arcs {
                assert!(tail < head);
                dist[head as usize] = dist[head as usize].min(dist[tail as usize] + cost);
            }
            let ends = (0..dist.len()).filter(|&v| lp.node_supply[v] > 0.0);
            let reduced = lp.constant + ends.map(|v| dist[v]).sum::<f64>();
            // By enumeration: each pre-token's cheapest path over byte edges and candidate edges
            // only, at the prices spread from the LP.
            let mu = graph.prices_from_lp(&lp_mu);
            let mut want = 0.0;
            for (w, (pre_token, count)) in pre_tokens.iter().enumerate() {
                let count = *count as f64;
                let cost = |path: &[(usize, usize)]| -> Option<f64> {
                    path.iter()
                        .map(|&(i, j)| match j - i {
                            1 => Some(count),
                            _ => index
                                .get(&(w, i, j))
                                .filter(|&&e| candidate[graph.edge_colours()[e] as usize])
                                .map(|&e| count + mu[e]),
                        })
                        .sum()
                };
                want += paths(pre_token.len())
                    .iter()
                    .filter_map(|p| cost(p))
                    .fold(f64::INFINITY, f64::min);
            }
            assert!(
                (reduced - want).abs() <= 1e-9 * want,
                "{pre_tokens:?}, max_len {max_len}: {reduced} vs {want}"
            );
            // Pricing the dropped edges makes none of them a shortcut: the full graph's shortest
            // paths cost the same, and the candidate edges keep their prices.
            let full = graph.price_dropped(&mu);
            assert!(full.iter().all(|&m| m >= 0.0));
            for (e, &m) in full.iter().enumerate() {
                if candidate[graph.edge_colours()[e] as usize] {
                    assert_eq!(m, mu[e]);
                }
            }
            let (total, _) = graph.shortest_paths(&full);
            assert!(
                (total - want).abs() <= 1e-9 * want,
                "{pre_tokens:?}, max_len {max_len}: {total} vs {want}"
            );
        }
    }
}
