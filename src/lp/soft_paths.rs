//! Entropy-smoothed shortest paths over the full tokenisation graph, the inner loop of the
//! dual solver (`dual_ascent.rs`): for every pre-token, the soft minimum over its paths, the hard
//! minimum, and each edge's probability under the Gibbs distribution over paths.
//!
//! Pre-tokens of one length have the same graph, so they are evaluated four at a time in
//! lockstep, one per lane of a `[f64; 4]`: the per-node bookkeeping is shared and every
//! operation, the exponential included, runs on four values at once (it vectorises). A node
//! has only a few edges on average, so this is what makes the loops wide, not the edges.
use rayon::prelude::*;
use std::ops::Range;

use crate::lp::graph::{ends, TokenGraph};

const LANES: usize = 4;
type Lanes = [f64; LANES];

/// Above this, exp(-x) is below 2.4e-16 and counts as 0: a path that much longer than the
/// shortest carries no weight at this precision.
const NEGLIGIBLE: f64 = 36.0;

#[inline(always)]
fn map(f: impl Fn(usize) -> f64) -> Lanes {
    std::array::from_fn(f)
}

/// The smaller of a and b (a when equal): a plain compare, so that it vectorises.
#[inline(always)]
fn less(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// exp(-x) for x >= 0 (small negative x from rounding allowed), 0 beyond `NEGLIGIBLE`.
/// Branch-free so that it vectorises: x = n ln 2 + r with |r| <= ln 2 / 2, exp(-r) by its
/// Taylor series to degree 13 (truncation below 1e-17 relative), 2^-n by writing the float's
/// exponent. Agrees with the libm exponential to a few ulp.
#[inline(always)]
pub(crate) fn exp_neg(x: f64) -> f64 {
    // Adding 1.5 x 2^52 rounds to an integer, which then sits in the low bits of the sum.
    const SHIFTER: f64 = 6_755_399_441_055_744.0;
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    /// 1/k!, k = 13 down to 0, for Horner's rule.
    const TAYLOR: [f64; 14] = [
        1.6059043836821613e-10,
        2.08767569878681e-09,
        2.505210838544172e-08,
        2.755731922398589e-07,
        2.7557319223985893e-06,
        2.48015873015873e-05,
        0.0001984126984126984,
        0.001388888888888889,
        0.008333333333333333,
        0.041666666666666664,
        0.16666666666666666,
        0.5,
        1.0,
        1.0,
    ];
    let y = -x.clamp(-1.0, NEGLIGIBLE + 4.0);
    let shifted = y * std::f64::consts::LOG2_E + SHIFTER;
    let n = shifted - SHIFTER;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let p = TAYLOR.iter().fold(0.0, |p, &c| p * r + c);
    let exponent = (shifted.to_bits() as i64 - SHIFTER.to_bits() as i64 + 1023) as u64;
    let value = p * f64::from_bits(exponent << 52);
    if x > NEGLIGIBLE {
        0.0
    } else {
        value
    }
}

#[inline(always)]
fn exp_neg_lanes(x: Lanes) -> Lanes {
    map(|l| exp_neg(x[l]))
}

/// Scratch space of one block, reused across its groups; all lane-interleaved.
#[derive(Default)]
struct Buffers {
    cost: Vec<Lanes>,
    out: Vec<Lanes>,
    from: Vec<Lanes>,
    to: Vec<Lanes>,
    forward: Vec<Lanes>,
    backward: Vec<Lanes>,
    node_edges: Vec<usize>,
}

fn reset(v: &mut Vec<Lanes>, len: usize, value: f64) {
    v.clear();
    v.resize(len, [value; LANES]);
}

/// A float type the soft paths read prices from and write marginals to: f64 for exactness
/// checks, f32 for the dual solver, which holds one of each per edge of a graph of 10^8 edges.
pub(crate) trait Real: Copy + Send + Sync {
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl Real for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value
    }
}

impl Real for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

/// An array written by several threads at disjoint entries (here the marginals; the dual
/// ascent's prices too).
pub(crate) struct Sink<T>(pub(crate) *mut T);
// SAFETY: every user writes each entry from one task only, and nothing reads the array during
// the writes. Here every pre-token belongs to exactly one group and every group to one block,
// so each edge's marginal is written by exactly one task.
unsafe impl<T> Sync for Sink<T> {}
unsafe impl<T> Send for Sink<T> {}

impl<T> Sink<T> {
    /// Writes entry i. SAFETY: i is in bounds and no other task touches entry i meanwhile.
    pub(crate) unsafe fn write(&self, i: usize, value: T) {
        unsafe { *self.0.add(i) = value };
    }
}

/// Pre-tokens of two or more bytes by length (then id), cut into groups of up to four of one
/// length, and the groups into a fixed number of blocks of about equal edge counts; depends on
/// the graph alone, so the block sums are the same at any thread count.
pub(crate) struct SoftPlan {
    order: Vec<usize>,
    /// Each group is order[a..b].
    groups: Vec<(usize, usize)>,
    /// Block k holds groups bounds[k]..bounds[k + 1].
    bounds: Vec<usize>,
    /// n_w x length summed over the pre-tokens of one byte (no token edge: one path).
    single: f64,
}

impl SoftPlan {
    fn new(graph: &TokenGraph) -> Self {
        const BLOCKS: usize = 256;
        let n = graph.counts.len();
        let mut order: Vec<usize> = (0..n).filter(|&w| graph.pre_token_len(w) >= 2).collect();
        order.sort_by_key(|&w| (graph.pre_token_len(w), w));
        let mut groups = Vec::new();
        let mut start = 0;
        for run in order.chunk_by(|&a, &b| graph.pre_token_len(a) == graph.pre_token_len(b)) {
            for chunk in run.chunks(LANES) {
                groups.push((start, start + chunk.len()));
                start += chunk.len();
            }
        }
        let single = (0..n)
            .filter(|&w| graph.pre_token_len(w) < 2)
            .map(|w| graph.counts[w] as f64 * graph.pre_token_len(w) as f64)
            .sum();
        let total_edges = graph.edge_colour.len().max(1);
        let mut bounds = vec![0usize];
        let mut done = 0usize;
        for (g, &(a, b)) in groups.iter().enumerate() {
            done += order[a..b]
                .iter()
                .map(|&w| graph.edge_start[w + 1] - graph.edge_start[w])
                .sum::<usize>();
            if done * BLOCKS >= total_edges * bounds.len() && g + 1 < groups.len() {
                bounds.push(g + 1);
            }
        }
        bounds.push(groups.len());
        SoftPlan {
            order,
            groups,
            bounds,
            single,
        }
    }
}

impl TokenGraph {
    /// Entropy-smoothed shortest paths (temperature `tau`, in tokens) at prices mu: returns
    /// (sum_w n_w softmin_w, sum_w n_w min_w) and fills `marginals` with each edge's probability
    /// under the Gibbs distribution over paths, the gradient of the smoothed sum in mu. Each
    /// pre-token is scaled by its hard shortest distances, so every exponent is <= 0 and the
    /// path sums lie in [1, #paths]. The groups are cut into a fixed number of blocks and the
    /// block sums added in order, so the result does not depend on the thread count. The work
    /// is in f64 whatever the type `mu` and `marginals` are stored in.
    pub(crate) fn soft_paths<P: Real, M: Real>(&self, mu: &[P], tau: f64, marginals: &mut [M]) -> (f64, f64) {
        assert_eq!(mu.len(), self.edge_colour.len());
        assert_eq!(marginals.len(), self.edge_colour.len());
        let plan = self.soft_plan.get_or_init(|| SoftPlan::new(self));
        let sink = Sink(marginals.as_mut_ptr());
        #[cfg(target_arch = "x86_64")]
        let wide = std::arch::is_x86_feature_detected!("avx2");
        let parts: Vec<(f64, f64)> = plan
            .bounds
            .par_windows(2)
            .map(|pair| {
                let block = (plan, pair[0]..pair[1]);
                #[cfg(target_arch = "x86_64")]
                if wide {
                    // SAFETY: the CPU has AVX2 (checked above).
                    return unsafe { self.soft_block_avx2(block, mu, tau, &sink) };
                }
                self.soft_block(block, mu, tau, &sink)
            })
            .collect();
        parts
            .iter()
            .fold((plan.single, plan.single), |(s, h), &(a, b)| (s + a, h + b))
    }

    /// `soft_block` compiled for AVX2, where a `[f64; 4]` is one register. No fused
    /// multiply-add is used (Rust never contracts), so the results are bit-identical to the
    /// baseline build's.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn soft_block_avx2<P: Real, M: Real>(
        &self,
        block: (&SoftPlan, Range<usize>),
        mu: &[P],
        tau: f64,
        sink: &Sink<M>,
    ) -> (f64, f64) {
        self.soft_block(block, mu, tau, sink)
    }

    /// The groups of one block (the plan's groups in `range`), in order: (sum of soft minima,
    /// sum of hard minima).
    #[inline(always)]
    fn soft_block<P: Real, M: Real>(
        &self,
        (plan, range): (&SoftPlan, Range<usize>),
        mu: &[P],
        tau: f64,
        sink: &Sink<M>,
    ) -> (f64, f64) {
        let mut buffers = Buffers::default();
        let (mut soft, mut hard) = (0.0, 0.0);
        for &(a, b) in &plan.groups[range] {
            let group = &plan.order[a..b];
            let (s, h) = self.soft_group(group, mu, tau, 1.0 / tau, sink, &mut buffers);
            soft += s;
            hard += h;
        }
        (soft, hard)
    }

    /// Up to four pre-tokens of one length (>= 2) in lockstep: (sum of n_w softmin_w, sum of
    /// n_w min_w), their edge marginals written through `sink`. A group of fewer than four
    /// repeats its last pre-token in the spare lanes, whose results are dropped.
    #[inline(always)]
    fn soft_group<P: Real, M: Real>(
        &self,
        pre_tokens: &[usize],
        mu: &[P],
        tau: f64,
        per_tau: f64,
        sink: &Sink<M>,
        b: &mut Buffers,
    ) -> (f64, f64) {
        let lane_pre_token: [usize; LANES] =
            std::array::from_fn(|l| pre_tokens[l.min(pre_tokens.len() - 1)]);
        let len = self.pre_token_len(lane_pre_token[0]);
        let first: [usize; LANES] = lane_pre_token.map(|w| self.edge_start[w]);
        let count: Lanes = lane_pre_token.map(|w| self.counts[w] as f64);
        let per_count: Lanes = count.map(|c| 1.0 / c);
        let edges = self.edge_start[lane_pre_token[0] + 1] - first[0];
        b.node_edges.clear();
        let mut k = 0;
        for i in 0..len {
            b.node_edges.push(k);
            k += ends(i, len, self.max_len).count();
        }
        b.node_edges.push(k);
        debug_assert_eq!(k, edges);
        b.cost.clear();
        b.cost
            .extend((0..edges).map(|k| map(|l| 1.0 + mu[first[l] + k].to_f64() * per_count[l])));
        reset(&mut b.out, edges, 0.0);
        reset(&mut b.from, len + 1, f64::INFINITY);
        reset(&mut b.to, len + 1, f64::INFINITY);
        reset(&mut b.forward, len + 1, 0.0);
        reset(&mut b.backward, len + 1, 0.0);
        let (cost, node_edges, out) = (&b.cost[..], &b.node_edges[..], &mut b.out[..]);
        let (from, to) = (&mut b.from[..], &mut b.to[..]);
        // Hard distances from the start (push, edges in order of tail).
        from[0] = [0.0; LANES];
        for i in 0..len {
            let here = from[i];
            from[i + 1] = map(|l| less(from[i + 1][l], here[l] + 1.0));
            for (k, j) in (node_edges[i]..node_edges[i + 1]).zip(i + 2..) {
                from[j] = map(|l| less(from[j][l], here[l] + cost[k][l]));
            }
        }
        // Hard distances to the end.
        to[len] = [0.0; LANES];
        for i in (0..len).rev() {
            let mut best = map(|l| 1.0 + to[i + 1][l]);
            for (k, j) in (node_edges[i]..node_edges[i + 1]).zip(i + 2..) {
                best = map(|l| less(best[l], cost[k][l] + to[j][l]));
            }
            to[i] = best;
        }
        // Path sums from the start, relative to exp(-from / tau); out[e] holds
        // forward[i] exp(-(from[i] + c_e - from[j]) / tau). Edges negligible in every lane
        // skip the exponential.
        let (forward, backward) = (&mut b.forward[..], &mut b.backward[..]);
        forward[0] = [1.0; LANES];
        for i in 0..len {
            let (f, d) = (forward[i], from[i]);
            let byte = exp_neg_lanes(map(|l| (d[l] + 1.0 - from[i + 1][l]) * per_tau));
            forward[i + 1] = map(|l| forward[i + 1][l] + f[l] * byte[l]);
            for (k, j) in (node_edges[i]..node_edges[i + 1]).zip(i + 2..) {
                let x = map(|l| (d[l] + cost[k][l] - from[j][l]) * per_tau);
                if x.iter().all(|&v| v > NEGLIGIBLE) {
                    continue;
                }
                let factor = exp_neg_lanes(x);
                out[k] = map(|l| f[l] * factor[l]);
                forward[j] = map(|l| forward[j][l] + out[k][l]);
            }
        }
        // Path sums to the end, relative to exp(-to / tau).
        backward[len] = [1.0; LANES];
        for i in (0..len).rev() {
            let t = to[i];
            let byte = exp_neg_lanes(map(|l| (1.0 + to[i + 1][l] - t[l]) * per_tau));
            let mut sum = map(|l| backward[i + 1][l] * byte[l]);
            for (k, j) in (node_edges[i]..node_edges[i + 1]).zip(i + 2..) {
                let x = map(|l| (cost[k][l] + to[j][l] - t[l]) * per_tau);
                if x.iter().all(|&v| v > NEGLIGIBLE) {
                    continue;
                }
                let factor = exp_neg_lanes(x);
                sum = map(|l| sum[l] + backward[j][l] * factor[l]);
            }
            backward[i] = sum;
        }
        // Completing an edge's path through its head j multiplies by
        // backward[j] exp(-(from[j] + to[j] - from[len]) / tau) / (the total); the factors go
        // into `backward`, no longer needed.
        let total = forward[len];
        let shortest = from[len];
        for j in 2..=len {
            let x = map(|l| (from[j][l] + to[j][l] - shortest[l]) * per_tau);
            let factor = exp_neg_lanes(x);
            backward[j] = map(|l| backward[j][l] * factor[l] / total[l]);
        }
        for i in 0..len {
            for (k, j) in (node_edges[i]..node_edges[i + 1]).zip(i + 2..) {
                out[k] = map(|l| out[k][l] * backward[j][l]);
            }
        }
        let (mut soft, mut hard) = (0.0, 0.0);
        for l in 0..pre_tokens.len() {
            // SAFETY: this pre-token's edges lie in first[l]..first[l] + edges, inside the
            // marginals array (checked in soft_paths), and no other task writes them.
            let target = unsafe { std::slice::from_raw_parts_mut(sink.0.add(first[l]), edges) };
            for (m, o) in target.iter_mut().zip(out.iter()) {
                *m = M::from_f64(o[l]);
            }
            soft += count[l] * (shortest[l] - tau * total[l].ln());
            hard += count[l] * shortest[l];
        }
        (soft, hard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_neg_matches_libm_to_a_few_ulp() {
        let mut x = -0.5;
        while x <= NEGLIGIBLE {
            let (got, want) = (exp_neg(x), (-x).exp());
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * want,
                "exp(-{x}): {got} vs {want}"
            );
            x += 0.001_37;
        }
        for x in [NEGLIGIBLE + 1e-9, 40.0, 1e6, f64::INFINITY] {
            assert_eq!(exp_neg(x), 0.0);
        }
        assert_eq!(exp_neg(0.0), 1.0);
    }
}
