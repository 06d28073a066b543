//! Smoothed Lagrangian dual ascent for the ConvexTok LP, on the full tokenisation graph.
//!
//! The Lagrangian bound L(mu) = sum_w shortestpath_w(n_w + mu_e) - (sum of the K largest M_t)
//! is concave but piecewise linear. Replacing each shortest path by a soft minimum (temperature
//! `tau` tokens, an entropy over the pre-token's paths) and the top-K sum by its entropic
//! version (temperature `colour_tau_t` per colour, with the budget price lambda as an explicit
//! variable) gives a smooth concave function
//!   F(mu, lambda) = sum_w n_w softmin_w - K lambda - sum_t colour_tau_t softplus((M_t - lambda) / colour_tau_t)
//! whose gradient is (edge marginal p_e - colour value c_t) for mu_e and (sum_t c_t - K) for
//! lambda, with c_t = sigmoid((M_t - lambda) / colour_tau_t). It is maximised over mu, lambda >= 0
//! by projected L-BFGS, one stage per temperature, each stage preconditioned by the diagonal
//! of F's curvature where the stage starts. Every evaluation also gives the exact L(mu) (the
//! hard shortest paths come with the soft ones), and the prices with the best exact value are
//! kept: that value, re-evaluated with a rounding margin in Python, is the certified bound.
//! All sums run in a fixed order (the soft paths in fixed blocks, the L-BFGS vector work in
//! fixed chunks), so the result does not depend on the thread count.
use rayon::prelude::*;
use std::collections::VecDeque;
use std::time::Instant;

use crate::lp::graph::{check_temperature, GraphError, GraphInput, TokenGraph};
use crate::lp::soft_paths::{exp_neg, Real, Sink};

/// A point of the ascent: the variables themselves, or scaled ones (x, scale) standing for
/// x[k] x scale[k], so that a stage evaluates its trial points without a third vector.
#[derive(Clone, Copy)]
enum Point<'a> {
    Plain(&'a [f64]),
    Scaled(&'a [f64], &'a [f32]),
}

impl Point<'_> {
    #[inline]
    fn get(&self, k: usize) -> f64 {
        match self {
            Point::Plain(p) => p[k],
            Point::Scaled(x, s) => x[k] * f64::from(s[k]),
        }
    }

    fn len(&self) -> usize {
        match self {
            Point::Plain(p) => p.len(),
            Point::Scaled(x, _) => x.len(),
        }
    }

    /// The budget price lambda, the last variable.
    fn lambda(&self) -> f64 {
        self.get(self.len() - 1)
    }
}

/// The window (in iterations) over which a stage's extension measures the bound's rise.
const WINDOW: usize = 10;

/// Why a dual ascent cannot start or run a stage.
#[derive(Clone, Debug, PartialEq)]
pub enum DualError {
    /// The colour temperature ratio must be finite and positive.
    ColourTauRatio(f64),
    /// A stage's path temperature is not finite and positive (the graph's check).
    Graph(GraphError),
    /// The minimum relative gain that extends a stage must be non-negative.
    Gain(f64),
    /// The stage was given another graph than the one the ascent started on.
    OtherGraph,
    /// The start's budget price, in units of the price scale, must be finite and >= 0.
    StartPrice(f64),
}

/// State of a dual ascent: variables, the best exact bound so far, scratch space.
pub struct DualAscent {
    budget: usize,
    colour_tau_ratio: f64,
    /// The price of a token of budget, estimated: a quarter of the K-th largest weighted colour
    /// frequency (lambda came out at 0.1 to 1 times it on the benchmarks). The colour
    /// temperature is in these units, so the smoothing does not depend on the corpus' size.
    price_scale: f64,
    /// Each shared colour's temperature relative to `price_scale`: min(1, its weighted
    /// frequency / 4 / price_scale). See `new`.
    colour_scale: Vec<f64>,
    /// The weight n_w / F_t of each tied edge in f32, 0 on the others. Tied edges are those
    /// whose colour has no other edge, or is not among the colours given their own prices
    /// (`new`'s `own_prices`). A tied edge e of colour t in
    /// pre-token w is priced lambda x n_w / F_t (F_t = sum of n_w over t's edges), so that
    /// M_t = lambda. For a colour of one edge this is optimal for any lambda: L's shortest-path
    /// part rises with slope p_e <= 1 in mu_e and its colour term (mu_e - lambda)_+ with slope
    /// 1 beyond lambda. For a rare colour of several edges it prices each edge at lambda / F_t
    /// per occurrence, which blocks the edge (costlier than its bytes) once F_t (len - 1) <=
    /// lambda: where the colour is not worth a token of budget, the LP keeps it out too. The
    /// smoothed F keeps no colour term for tied colours, and its lambda gradient counts
    /// sum_e (n_w / F_t) p_e as the budget each uses (its colour value c_t). Held per edge, so
    /// that pricing and summing the tied edges stream through memory instead of gathering
    /// each edge's colour frequency and pre-token count.
    tied_weight: Vec<f32>,
    /// The other edges, ascending: their prices are the variables, in this order, followed by
    /// lambda.
    free: Vec<u32>,
    /// The shared colour (an index into `shared_colours`) of each free edge.
    free_colour: Vec<u32>,
    /// Colours whose edges are free (more than one edge, and given their own prices), in order.
    /// Only these have per-colour state: the others' totals are lambda.
    shared_colours: Vec<u32>,
    /// The number of colours that are not shared (each with M_t = lambda).
    tied_colours: usize,
    point: Vec<f64>,
    best_point: Vec<f64>,
    best_value: f64,
    evaluations: usize,
    /// Colour values c_t of the shared colours at the last evaluation.
    colour_values: Vec<f64>,
    /// Edge marginals p_e at the last evaluation, in f32 (as the prices the soft paths read):
    /// at the paper's scale each per-edge array is gigabytes.
    marginals: Vec<f32>,
    /// Scratch: prices of every edge, the shared colours' totals M_t.
    prices: Vec<f32>,
    totals: Vec<f64>,
}

impl DualAscent {
    /// The edge prices of a point: its mu on the free edges, lambda n_w / F_t on the tied ones.
    fn prices_of<T: Real>(&self, point: Point<'_>, out: &mut Vec<T>) {
        let lambda = point.lambda();
        out.clear();
        out.resize(self.tied_weight.len(), T::from_f64(0.0));
        out.par_chunks_mut(CHUNK)
            .zip(self.tied_weight.par_chunks(CHUNK))
            .for_each(|(out, weight)| {
                for (o, &w) in out.iter_mut().zip(weight) {
                    *o = T::from_f64(lambda * f64::from(w));
                }
            });
        let sink = Sink(out.as_mut_ptr());
        self.free.par_chunks(CHUNK).enumerate().for_each(|(c, free)| {
            for (i, &e) in free.iter().enumerate() {
                // SAFETY: `free` holds distinct edges, each below out.len() (the graph's edge
                // count), so every write is in bounds and no two tasks write one entry.
                unsafe { sink.write(e as usize, T::from_f64(point.get(c * CHUNK + i))) };
            }
        });
    }

    /// Sum over tied edges of f(weight n_w / F_t, e), in fixed chunks added in order
    /// (thread-independent).
    fn tied_sum(&self, f: impl Fn(f64, usize) -> f64 + Sync) -> f64 {
        chunk_sum(self.tied_weight.par_chunks(CHUNK).enumerate().map(|(c, weight)| {
            let mut sum = 0.0;
            for (i, &w) in weight.iter().enumerate() {
                if w != 0.0 {
                    sum += f(f64::from(w), c * CHUNK + i);
                }
            }
            sum
        }))
    }

    /// -F at `point` (minimised), its gradient into `gradient`; returns (-F, exact L).
    fn evaluate(
        &mut self,
        graph: &TokenGraph,
        point: Point<'_>,
        tau: f64,
        colour_tau: f64,
        gradient: &mut [f32],
    ) -> (f64, f64) {
        self.evaluations += 1;
        let lambda = point.lambda();
        let mut prices = std::mem::take(&mut self.prices);
        self.prices_of(point, &mut prices);
        let (soft, hard) = graph.soft_paths(&prices, tau, &mut self.marginals);
        self.prices = prices;
        // The shared colours' totals M_t, the sums of their free prices (the others' are lambda).
        self.totals.iter_mut().for_each(|m| *m = 0.0);
        for (k, &t) in self.free_colour.iter().enumerate() {
            self.totals[t as usize] += point.get(k);
        }
        // Per colour, in fixed chunks whose sums are added in order (thread-independent).
        let (totals, scales) = (&self.totals, &self.colour_scale);
        let parts: Vec<(f64, f64)> = self
            .colour_values
            .par_chunks_mut(CHUNK)
            .enumerate()
            .map(|(c, values)| {
                let (mut softplus, mut used) = (0.0, 0.0);
                for (i, value) in values.iter_mut().enumerate() {
                    let t = c * CHUNK + i;
                    let scale = scales[t];
                    let z = (totals[t] - lambda) / (colour_tau * scale);
                    // softplus(z) = max(z, 0) + ln(1 + e) and sigmoid(z) from e = exp(-|z|).
                    let e = exp_neg(z.abs());
                    let v = if z >= 0.0 {
                        1.0 / (1.0 + e)
                    } else {
                        e / (1.0 + e)
                    };
                    softplus += scale * (z.max(0.0) + if e > 0.0 { e.ln_1p() } else { 0.0 });
                    *value = v;
                    used += v;
                }
                (softplus, used)
            })
            .collect();
        let softplus: f64 = parts.iter().map(|p| p.0).sum();
        let mut used: f64 = parts.iter().map(|p| p.1).sum();
        let marginals = &self.marginals;
        used += self.tied_sum(|weight, e| f64::from(marginals[e]) * weight);
        let values = &self.colour_values;
        gradient[..self.free.len()]
            .par_chunks_mut(CHUNK)
            .zip(self.free_colour.par_chunks(CHUNK).zip(self.free.par_chunks(CHUNK)))
            .for_each(|(g, (colours, free))| {
                for ((g, &t), &e) in g.iter_mut().zip(colours).zip(free) {
                    *g = (values[t as usize] - f64::from(marginals[e as usize])) as f32;
                }
            });
        gradient[self.free.len()] = (self.budget as f64 - used) as f32;
        let value = soft - self.budget as f64 * lambda - colour_tau * softplus;
        let exact = hard - top_sum(&mut self.totals, self.budget, self.tied_colours, lambda);
        if exact > self.best_value {
            self.best_value = exact;
            for (k, b) in self.best_point.iter_mut().enumerate() {
                *b = point.get(k);
            }
        }
        (-value, exact)
    }

    /// Diagonal of -F's Hessian, estimated at the last evaluation: p(1-p) / (tau n_w) per
    /// edge from its own path variance plus c(1-c) / colour_tau from its colour; lambda
    /// gathers the colours' and the tied edges' terms.
    fn curvature(&self, graph: &TokenGraph, tau: f64, colour_tau: f64) -> Vec<f64> {
        let path = |e: usize, w: usize| {
            let p = f64::from(self.marginals[e]);
            p * (1.0 - p) / (tau * graph.counts[w] as f64)
        };
        let colour = |t: usize| {
            self.colour_values[t] * (1.0 - self.colour_values[t])
                / (colour_tau * self.colour_scale[t])
        };
        let mut diagonal = vec![0.0; self.free.len() + 1];
        diagonal[..self.free.len()]
            .par_chunks_mut(CHUNK)
            .zip(self.free.par_chunks(CHUNK).zip(self.free_colour.par_chunks(CHUNK)))
            .for_each(|(d, (free, free_colour))| {
                let first = free[0] as usize;
                let mut w = graph.edge_start.partition_point(|&s| s <= first) - 1;
                for ((d, &e), &t) in d.iter_mut().zip(free).zip(free_colour) {
                    let e = e as usize;
                    while graph.edge_start[w + 1] <= e {
                        w += 1;
                    }
                    *d = path(e, w) + colour(t as usize);
                }
            });
        let mut budget = 0.0;
        for t in 0..self.shared_colours.len() {
            budget += colour(t);
        }
        // A tied edge's price is lambda x its weight n_w / F_t, so its curvature counts squared.
        let weights = &self.tied_weight;
        budget += chunk_sum(weights.par_chunks(CHUNK).enumerate().map(|(c, chunk)| {
            let mut sum = 0.0;
            for_each_owned_edge(graph, c * CHUNK, chunk.len(), |i, e, w| {
                let weight = f64::from(chunk[i]);
                if weight != 0.0 {
                    sum += weight * weight * path(e, w);
                }
            });
            sum
        }));
        diagonal[self.free.len()] = budget;
        diagonal
    }

    /// The stage preconditioner, from the curvature at the last evaluation: 1 / sqrt(curvature +
    /// its mean), so that the scaled variables have curvature about 1 and a unit step is about a
    /// Newton step. The added mean keeps flat coordinates (p and c near 0 or 1) from taking huge
    /// steps.
    fn preconditioner(&self, graph: &TokenGraph, tau: f64, colour_tau: f64) -> Vec<f32> {
        let diagonal = self.curvature(graph, tau, colour_tau);
        let mean = diagonal.iter().sum::<f64>() / diagonal.len() as f64;
        diagonal
            .iter()
            .map(|d| {
                if d + mean > 0.0 {
                    (1.0 / (d + mean).sqrt()) as f32
                } else {
                    1.0
                }
            })
            .collect()
    }

    /// Backtracking (Armijo) line search from x (where -F is f and its scaled gradient g) along
    /// the projected path max(0, x + step d), halving the step from 1, at most 30 times. On
    /// success `trial` holds the point accepted and `g_trial` its scaled gradient, and the value
    /// there is returned; None when no step decreased -F enough.
    #[allow(clippy::too_many_arguments)]
    fn line_search(
        &mut self,
        stage: &Stage<'_>,
        x: &[f64],
        d: &[f64],
        g: &[f32],
        f: f64,
        trial: &mut [f64],
        g_trial: &mut [f32],
    ) -> Option<f64> {
        let mut step = 1.0;
        for _ in 0..30 {
            let decrease = chunk_sum(
                trial
                    .par_chunks_mut(CHUNK)
                    .zip(x.par_chunks(CHUNK).zip(d.par_chunks(CHUNK)))
                    .zip(g.par_chunks(CHUNK))
                    .map(|((t, (x, d)), g)| {
                        let mut sum = 0.0;
                        for i in 0..t.len() {
                            t[i] = (x[i] + step * d[i]).max(0.0);
                            sum += f64::from(g[i]) * (t[i] - x[i]);
                        }
                        sum
                    }),
            );
            let at = Point::Scaled(trial, stage.scale);
            let (f_trial, _) = self.evaluate(stage.graph, at, stage.tau, stage.colour_tau, g_trial);
            g_trial
                .par_chunks_mut(CHUNK)
                .zip(stage.scale.par_chunks(CHUNK))
                .for_each(|(g, s)| g.iter_mut().zip(s).for_each(|(g, s)| *g *= s));
            if f_trial <= f + 1e-4 * decrease {
                return Some(f_trial);
            }
            step *= 0.5;
        }
        None
    }

    /// One temperature stage of projected L-BFGS in the scaled variables x = point / scale.
    /// After `iterations`, up to `extend` more run while the best exact bound still rose by
    /// more than `gain` of itself over the last `WINDOW` iterations; `stop` is asked before
    /// every iteration. Returns the iterations run and whether `stop` ended the stage.
    #[allow(clippy::too_many_arguments)]
    fn run_stage(
        &mut self,
        graph: &TokenGraph,
        tau: f64,
        iterations: usize,
        extend: usize,
        gain: f64,
        memory: usize,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> StageEnd {
        let colour_tau = tau * self.colour_tau_ratio * self.price_scale;
        let n = self.point.len();
        // Taken, not copied (the stage works on x and writes the point back at its end): at
        // the paper's scale every vector of this length is gigabytes.
        // The gradients and the scale are in f32 (like the curvature pairs): at the paper's scale
        // each vector of this length is gigabytes, and the gradient's entries are differences
        // of probabilities.
        let point = std::mem::take(&mut self.point);
        let mut g = vec![0.0f32; n];
        let (mut f, _) = self.evaluate(graph, Point::Plain(&point), tau, colour_tau, &mut g);
        let scale = self.preconditioner(graph, tau, colour_tau);
        let mut x: Vec<f64> = point.iter().zip(&scale).map(|(p, &s)| p / f64::from(s)).collect();
        drop(point);
        g.iter_mut().zip(&scale).for_each(|(g, s)| *g *= s);
        let stage = Stage {
            graph,
            tau,
            colour_tau,
            scale: &scale,
        };
        let mut curvature = Curvature::new(memory);
        let (mut d, mut trial, mut g_trial) = (vec![0.0; n], vec![0.0; n], vec![0.0f32; n]);
        let mut history = vec![self.best_value];
        let mut done = 0;
        let mut stopped = false;
        while done < iterations + extend {
            if deadline.is_some_and(|limit| Instant::now() >= limit) {
                break;
            }
            if stop() {
                stopped = true;
                break;
            }
            if done >= iterations {
                let (now, before) = (history[done], history[done - WINDOW.min(done)]);
                if now - before <= gain * now.abs() {
                    break;
                }
            }
            if !curvature.direction(&x, &g, &mut d) {
                break;
            }
            let Some(f_trial) = self.line_search(&stage, &x, &d, &g, f, &mut trial, &mut g_trial)
            else {
                break;
            };
            curvature.update(&x, &trial, &g, &g_trial);
            std::mem::swap(&mut x, &mut trial);
            std::mem::swap(&mut g, &mut g_trial);
            f = f_trial;
            done += 1;
            history.push(self.best_value);
        }
        // The vectors of the stage go before the final evaluation, so that its scratch space
        // never adds to their peak.
        drop((curvature, d, trial, g_trial));
        let point: Vec<f64> = x.iter().zip(&scale).map(|(x, &s)| x * f64::from(s)).collect();
        drop((x, scale));
        // Leave the colour values and marginals those of the final point.
        self.evaluate(graph, Point::Plain(&point), tau, colour_tau, &mut g);
        self.point = point;
        StageEnd {
            iterations: done,
            stopped,
        }
    }
}

impl DualAscent {
    /// Starts at mu = 0, lambda = 0 for a budget of K tokens on `graph`; the colour temperature
    /// of a stage is `colour_tau_ratio` x its path temperature (in tokens) x the price scale.
    pub fn new(
        g: &TokenGraph,
        budget: usize,
        colour_tau_ratio: f64,
        own_prices: Option<&[bool]>,
    ) -> Result<Self, DualError> {
        if !(colour_tau_ratio > 0.0) || colour_tau_ratio.is_infinite() {
            return Err(DualError::ColourTauRatio(colour_tau_ratio));
        }
        let colours = g.colour_len.len();
        if let Some(own) = own_prices {
            if own.len() != colours {
                return Err(DualError::Graph(GraphError::Length {
                    input: GraphInput::Candidates,
                    got: own.len(),
                    expected: colours,
                }));
            }
        }
        let edges = g.edge_colour.len();
        let mut per_colour = vec![0u32; colours];
        for &t in &g.edge_colour {
            per_colour[t as usize] = per_colour[t as usize].saturating_add(1);
        }
        // A fixed colour (an extension's base) is neither shared nor tied: its edges keep price
        // 0 and it takes no budget.
        let shared = |t: usize| {
            !g.is_fixed(t) && per_colour[t] > 1 && own_prices.is_none_or(|own| own[t])
        };
        let shared_colours: Vec<u32> = (0..colours as u32).filter(|&t| shared(t as usize)).collect();
        // Reused as each shared colour's index into `shared_colours`.
        for (s, &t) in shared_colours.iter().enumerate() {
            per_colour[t as usize] = s as u32;
        }
        let mut tied_weight = vec![0.0f32; edges];
        let mut free = Vec::new();
        let mut free_colour = Vec::new();
        let mut is_shared = vec![0u64; colours.div_ceil(64)];
        for &t in &shared_colours {
            is_shared[t as usize / 64] |= 1 << (t % 64);
        }
        for w in 0..g.counts.len() {
            for e in g.edge_start[w]..g.edge_start[w + 1] {
                let t = g.edge_colour[e] as usize;
                if is_shared[t / 64] >> (t % 64) & 1 == 1 {
                    free.push(e as u32);
                    free_colour.push(per_colour[t]);
                } else if !g.is_fixed(t) {
                    tied_weight[e] = (g.counts[w] as f64 / g.colour_frequency[t] as f64) as f32;
                }
            }
        }
        free.shrink_to_fit();
        free_colour.shrink_to_fit();
        drop((per_colour, is_shared));
        let variables = free.len() + 1;
        let (price_scale, colour_scale) = colour_scales(g, budget, &shared_colours);
        let shared_count = shared_colours.len();
        Ok(DualAscent {
            colour_scale,
            tied_weight,
            free,
            free_colour,
            tied_colours: colours - shared_count - g.fixed.iter().filter(|&&f| f).count(),
            shared_colours,
            budget,
            colour_tau_ratio,
            price_scale,
            point: vec![0.0; variables],
            best_point: vec![0.0; variables],
            best_value: f64::NEG_INFINITY,
            evaluations: 0,
            colour_values: vec![0.0; shared_count],
            marginals: vec![0.0; edges],
            prices: Vec::new(),
            totals: vec![0.0; shared_count],
        })
    }

    /// Moves the start to lambda = `fraction` x the price scale, with every edge price left as
    /// it is (0 on a new ascent): lambda near its scale from the first step, so the hot stages
    /// converge instead of climbing. The best exact value is forgotten.
    pub fn start_budget_price(&mut self, fraction: f64) -> Result<(), DualError> {
        if !(fraction.is_finite() && fraction >= 0.0) {
            return Err(DualError::StartPrice(fraction));
        }
        let n = self.free.len();
        self.point[n] = fraction * self.price_scale;
        self.best_value = f64::NEG_INFINITY;
        self.best_point.copy_from_slice(&self.point);
        Ok(())
    }

    /// Moves the ascent to another budget, keeping its point (mu and lambda) as the start of
    /// the next stage: a warm start, since prices for one budget are near those for the next.
    /// The best exact value is forgotten (it was for the old budget); the best point becomes
    /// the current one until a stage evaluates another.
    pub fn set_budget(&mut self, graph: &TokenGraph, budget: usize) -> Result<(), DualError> {
        if graph.edge_colour.len() != self.marginals.len() {
            return Err(DualError::OtherGraph);
        }
        let (price_scale, colour_scale) = colour_scales(graph, budget, &self.shared_colours);
        self.budget = budget;
        self.price_scale = price_scale;
        self.colour_scale = colour_scale;
        self.best_value = f64::NEG_INFINITY;
        self.best_point.copy_from_slice(&self.point);
        Ok(())
    }

    /// Runs one stage of `iterations` L-BFGS steps at path temperature `tau` on the graph the
    /// ascent started on, then up to `extend` more while the best exact bound rose by more than
    /// `gain` of itself over the last 10 (keeping `memory` curvature pairs, at least 1); stops
    /// early at `deadline` or when `stop` (asked before every step) says so. Returns the steps
    /// run and whether `stop` ended it.
    #[allow(clippy::too_many_arguments)]
    pub fn stage(
        &mut self,
        graph: &TokenGraph,
        tau: f64,
        iterations: usize,
        memory: usize,
        deadline: Option<Instant>,
        extend: usize,
        gain: f64,
        stop: &dyn Fn() -> bool,
    ) -> Result<StageEnd, DualError> {
        check_temperature(tau).map_err(DualError::Graph)?;
        if graph.edge_colour.len() != self.marginals.len() {
            return Err(DualError::OtherGraph);
        }
        if !(gain >= 0.0) {
            return Err(DualError::Gain(gain));
        }
        Ok(self.run_stage(
            graph,
            tau,
            iterations,
            extend,
            gain,
            memory.max(1),
            deadline,
            stop,
        ))
    }

    /// Best exact L(mu) seen (not yet lowered by a rounding margin).
    pub fn best_value(&self) -> f64 {
        self.best_value
    }

    /// Number of variables: the prices of the edges not tied to lambda, and lambda.
    pub fn variables(&self) -> usize {
        self.point.len()
    }

    /// Evaluations of the smoothed function (and of the exact bound) so far.
    pub fn evaluations(&self) -> usize {
        self.evaluations
    }

    /// Edge prices mu of the best exact value (tied edges at lambda n_w / F_t), rounded to f32
    /// as the ascent evaluated them.
    pub fn best_prices(&self, graph: &TokenGraph) -> Vec<f64> {
        self.widened_prices(graph, Point::Plain(&self.best_point))
    }

    /// The current prices mu (tied edges at lambda n_w / F_t), rounded to f32.
    pub fn prices(&self, graph: &TokenGraph) -> Vec<f64> {
        self.widened_prices(graph, Point::Plain(&self.point))
    }

    fn widened_prices(&self, graph: &TokenGraph, point: Point<'_>) -> Vec<f64> {
        assert_eq!(graph.num_edges(), self.tied_weight.len(), "another graph than the ascent's");
        let mut out = Vec::<f32>::new();
        self.prices_of(point, &mut out);
        out.into_iter().map(f64::from).collect()
    }

    /// Colour values c_t of the smoothed problem at the last evaluation (a primal estimate:
    /// sigmoid((M_t - lambda) / colour_tau) for a colour with its own prices, sum_e (n_w / F_t)
    /// p_e over a tied colour's edges).
    pub fn colour_values(&self, graph: &TokenGraph) -> Vec<f64> {
        let mut values = vec![0.0; graph.colour_len.len()];
        for (&t, &c) in self.shared_colours.iter().zip(&self.colour_values) {
            values[t as usize] = c;
        }
        for (e, &weight) in self.tied_weight.iter().enumerate() {
            if weight != 0.0 {
                let t = graph.edge_colour[e] as usize;
                values[t] += f64::from(self.marginals[e]) * f64::from(weight);
            }
        }
        values
    }

    /// The current budget price lambda.
    pub fn budget_price(&self) -> f64 {
        self.point[self.point.len() - 1]
    }
}

/// How a stage ended: the L-BFGS steps it ran, and whether its `stop` check ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageEnd {
    pub iterations: usize,
    pub stopped: bool,
}

/// The price scale of a budget (a quarter of the K-th largest weighted colour frequency, at
/// least 1) and each of the `shared` colours' temperature relative to it: min(1, its frequency
/// / 4 / scale).
fn colour_scales(g: &TokenGraph, budget: usize, shared: &[u32]) -> (f64, Vec<f64>) {
    // The budget buys the colours that are not fixed: the scale is theirs.
    let mut frequencies = g.colour_frequency.clone();
    for (t, frequency) in frequencies.iter_mut().enumerate() {
        if g.is_fixed(t) {
            *frequency = 0;
        }
    }
    let price_scale = crate::lp::census::price_scale(&mut frequencies, budget);
    // A colour's price total M_t can only approach lambda if it is frequent; a rare colour
    // smoothed at the full temperature would still count sigmoid(-lambda / colour_tau) of a
    // token, and the many rare colours together would push lambda up by about
    // colour_tau x ln(#colours / K) (at 5 MB and K=1024 about twice its optimum).
    let colour_scale = shared
        .iter()
        .map(|&t| (g.colour_frequency[t as usize] as f64 / 4.0 / price_scale).min(1.0))
        .collect();
    (price_scale, colour_scale)
}

/// The sum of the `k` largest entries of `values` together with `copies` more entries equal to
/// `value` (all of them when there are at most k); reorders `values`.
fn top_sum(values: &mut [f64], k: usize, copies: usize, value: f64) -> f64 {
    let k = k.min(values.len() + copies);
    if k == 0 {
        return 0.0;
    }
    // The top k of `values` alone, ascending (summed in that order, so the result does not
    // depend on how the selection left them).
    let own = k.min(values.len());
    let split = values.len() - own;
    if split > 0 {
        values.select_nth_unstable_by(split, |a, b| a.total_cmp(b));
    }
    let top = &mut values[split..];
    top.sort_unstable_by(|a, b| a.total_cmp(b));
    // The copies displace the smallest of those that fall below `value` (or fill what is left).
    let below = top.partition_point(|&v| v < value);
    let displaced = below.min(copies.saturating_sub(k - own));
    let copies_taken = (k - own) + displaced;
    top[displaced..].iter().sum::<f64>() + value * copies_taken as f64
}

/// An L-BFGS curvature pair: the step s, the gradient change y, 1 / s.y, s.y and y.y.
struct Pair {
    s: Vec<f32>,
    y: Vec<f32>,
    rho: f64,
    sy: f64,
    yy: f64,
}

/// What every evaluation of a stage shares: the graph, the path and colour temperatures, and
/// the preconditioner (the scaled variables x stand for x x scale).
struct Stage<'a> {
    graph: &'a TokenGraph,
    tau: f64,
    colour_tau: f64,
    scale: &'a [f32],
}

/// Coordinates at their bound with the gradient pushing outwards stay fixed.
#[inline]
fn active(x: f64, g: f32) -> bool {
    x <= 0.0 && g > 0.0
}

/// A stage's L-BFGS memory: its curvature pairs, oldest first, and the vectors of pairs it
/// dropped, for reuse. The pairs are kept in f32: reading them dominates the direction's cost,
/// and single precision halves it (products are taken in f64 from the stored values, so the
/// pairs stay consistent).
struct Curvature {
    pairs: VecDeque<Pair>,
    spare: Vec<(Vec<f32>, Vec<f32>)>,
    /// The two-loop recursion's alphas, newest pair first.
    alphas: Vec<f64>,
    /// The most pairs kept (at least 1).
    memory: usize,
}

impl Curvature {
    fn new(memory: usize) -> Self {
        Curvature {
            pairs: VecDeque::new(),
            spare: Vec::new(),
            alphas: Vec::with_capacity(memory),
            memory,
        }
    }

    /// The projected L-BFGS direction at x, with scaled gradient g, into d: the two-loop
    /// recursion on -g with the fixed coordinates (`active`) at 0, each vector update fused with
    /// the next dot product. When that is not a descent direction the pairs are forgotten and
    /// d is the projected -g. Returns false when that is 0 too (every coordinate fixed).
    fn direction(&mut self, x: &[f64], g: &[f32], d: &mut [f64]) -> bool {
        let pairs = &self.pairs;
        self.alphas.clear();
        let newest: &[f32] = pairs.back().map_or(&[], |p| &p.s);
        let mut next = chunk_sum(
            d.par_chunks_mut(CHUNK)
                .zip(x.par_chunks(CHUNK))
                .zip(g.par_chunks(CHUNK))
                .enumerate()
                .map(|(c, ((d, x), g))| {
                    let s = newest.get(c * CHUNK..(c * CHUNK + d.len())).unwrap_or(&[]);
                    for ((d, &x), &g) in d.iter_mut().zip(x).zip(g) {
                        *d = if active(x, g) { 0.0 } else { -f64::from(g) };
                    }
                    s.iter()
                        .zip(d.iter())
                        .map(|(&s, &d)| f64::from(s) * d)
                        .sum::<f64>()
                }),
        );
        for (k, p) in pairs.iter().enumerate().rev() {
            let alpha = p.rho * next;
            self.alphas.push(alpha);
            next = match k.checked_sub(1) {
                Some(before) => axpy_dot(-alpha, &p.y, d, &pairs[before].s),
                None => axpy_dot(-alpha, &p.y, d, &[] as &[f32]),
            };
        }
        if let Some(p) = pairs.back() {
            // Pairs are kept only with s.y > 0, so y.y > 0 too.
            let gamma = p.sy / p.yy;
            next = chunk_sum(
                d.par_chunks_mut(CHUNK)
                    .zip(pairs[0].y.par_chunks(CHUNK))
                    .map(|(d, y)| {
                        let mut sum = 0.0;
                        for (d, &y) in d.iter_mut().zip(y) {
                            *d *= gamma;
                            sum += f64::from(y) * *d;
                        }
                        sum
                    }),
            );
        }
        let m = pairs.len();
        for (k, (p, alpha)) in pairs.iter().zip(self.alphas.iter().rev()).enumerate() {
            let beta = p.rho * next;
            next = if k + 1 < m {
                axpy_dot(alpha - beta, &p.s, d, &pairs[k + 1].y)
            } else {
                axpy_dot(alpha - beta, &p.s, d, &[] as &[f32])
            };
        }
        let slope = chunk_sum(
            d.par_chunks_mut(CHUNK)
                .zip(x.par_chunks(CHUNK))
                .zip(g.par_chunks(CHUNK))
                .map(|((d, x), g)| {
                    let mut sum = 0.0;
                    for ((d, &x), &g) in d.iter_mut().zip(x).zip(g) {
                        if active(x, g) {
                            *d = 0.0;
                        }
                        sum += *d * f64::from(g);
                    }
                    sum
                }),
        );
        if slope >= 0.0 {
            // Not a descent direction: forget the curvature pairs and step along -g.
            self.spare.extend(self.pairs.drain(..).map(|p| (p.s, p.y)));
            let mut norm = 0.0;
            for ((d, &x), &g) in d.iter_mut().zip(x).zip(g) {
                *d = if active(x, g) { 0.0 } else { -f64::from(g) };
                norm += *d * *d;
            }
            if norm == 0.0 {
                return false;
            }
        }
        true
    }

    /// Adds the pair of the step from x to `trial` and the gradient change from g to `g_trial`
    /// when its s.y is positive enough (else its vectors go to the spare ones). At full memory
    /// the oldest pair's vectors are reused before the new pair is known to be kept, so no more
    /// than `memory` pairs are ever allocated.
    fn update(&mut self, x: &[f64], trial: &[f64], g: &[f32], g_trial: &[f32]) {
        let n = x.len();
        let full = self.pairs.len() >= self.memory;
        let (mut s, mut y) = self
            .spare
            .pop()
            .or_else(|| full.then(|| self.pairs.pop_front().map(|p| (p.s, p.y))).flatten())
            .unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
        let sums: Vec<[f64; 3]> = s
            .par_chunks_mut(CHUNK)
            .zip(y.par_chunks_mut(CHUNK))
            .zip(trial.par_chunks(CHUNK).zip(x.par_chunks(CHUNK)))
            .zip(g_trial.par_chunks(CHUNK).zip(g.par_chunks(CHUNK)))
            .map(|(((s, y), (t, x)), (gt, g))| {
                let mut sums = [0.0; 3];
                for i in 0..s.len() {
                    s[i] = (t[i] - x[i]) as f32;
                    y[i] = (f64::from(gt[i]) - f64::from(g[i])) as f32;
                    let (si, yi) = (f64::from(s[i]), f64::from(y[i]));
                    sums[0] += si * yi;
                    sums[1] += si * si;
                    sums[2] += yi * yi;
                }
                sums
            })
            .collect();
        let [sy, ss, yy] = sums
            .iter()
            .fold([0.0; 3], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2]]);
        if sy > 1e-10 * (ss * yy).sqrt() {
            self.pairs.push_back(Pair {
                s,
                y,
                rho: 1.0 / sy,
                sy,
                yy,
            });
            debug_assert!(self.pairs.len() <= self.memory);
        } else {
            self.spare.push((s, y));
        }
    }
}

/// The L-BFGS vector work runs on fixed chunks of this many coordinates, in parallel; partial
/// sums are added in chunk order, so the results do not depend on the thread count.
const CHUNK: usize = 8192;

/// The sum of per-chunk partial sums, in chunk order.
fn chunk_sum(parts: impl IndexedParallelIterator<Item = f64>) -> f64 {
    parts.collect::<Vec<f64>>().iter().sum()
}

/// d += alpha x, returning next . d (the updated d; 0 when `next` is empty), in one pass over
/// chunks in parallel.
fn axpy_dot(alpha: f64, x: &[f32], d: &mut [f64], next: &[f32]) -> f64 {
    if next.is_empty() {
        d.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(d, x)| {
                d.iter_mut()
                    .zip(x)
                    .for_each(|(d, &x)| *d += alpha * f64::from(x))
            });
        return 0.0;
    }
    chunk_sum(
        d.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .zip(next.par_chunks(CHUNK))
            .map(|((d, x), next)| axpy_dot_chunk(alpha, x, d, next)),
    )
}

/// One chunk of `axpy_dot`; the dot product in eight lanes, in a fixed order.
fn axpy_dot_chunk(alpha: f64, x: &[f32], d: &mut [f64], next: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = d.chunks_exact_mut(8);
    let (x8, n8) = (x.chunks_exact(8), next.chunks_exact(8));
    let (x_tail, n_tail) = (x8.remainder(), n8.remainder());
    for ((d, x), m) in (&mut chunks).zip(x8).zip(n8) {
        for k in 0..8 {
            d[k] += alpha * f64::from(x[k]);
            lanes[k] += f64::from(m[k]) * d[k];
        }
    }
    let mut tail = 0.0;
    for ((d, &x), &m) in chunks.into_remainder().iter_mut().zip(x_tail).zip(n_tail) {
        *d += alpha * f64::from(x);
        tail += f64::from(m) * *d;
    }
    lanes.iter().sum::<f64>() + tail
}

/// Calls f(i, e, w) for the `len` edges e = first + i, with w the pre-token that owns e.
#[inline]
fn for_each_owned_edge(graph: &TokenGraph, first: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) {
    if len == 0 {
        return;
    }
    let mut w = graph.edge_start.partition_point(|&s| s <= first) - 1;
    for i in 0..len {
        let e = first + i;
        while graph.edge_start[w + 1] <= e {
            w += 1;
        }
        f(i, e, w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_colours_keep_price_zero_and_take_no_budget() {
        // "abab" x 5 and "abc" x 3, and the base holds "ab" (16 tokens: 2 x 5 + 2 x 3). The best
        // one-token extension adds "abab": 1 x 5 + 2 x 3 = 11. Without "ab" fixed, the best
        // vocabulary of one token reaches 14 ("abab": 5 + 3 x 3), so a bound above 11 would
        // have ignored the base.
        let mut graph = TokenGraph::new(b"abababc".to_vec(), vec![0, 4, 7], vec![5, 3], 8);
        let fixed = graph.fix_colours(&[b"ab".to_vec()]).to_vec();
        assert_eq!(fixed.iter().filter(|&&f| f).count(), 1);
        let mut ascent = DualAscent::new(&graph, 1, 1.0, None).unwrap();
        ascent.start_budget_price(1.0).unwrap();
        for tau in [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625] {
            ascent.stage(&graph, tau, 30, 5, None, 60, 1e-6, &|| false).unwrap();
        }
        let prices = ascent.best_prices(&graph);
        for (e, &t) in graph.edge_colour.iter().enumerate() {
            if fixed[t as usize] {
                assert_eq!(prices[e], 0.0, "a fixed colour's edge {e} was priced");
            }
        }
        // (the prices are f32: the exact value may exceed 11 by their rounding, which the
        // certificate's margin in Python covers)
        let best = ascent.best_value();
        assert!(best <= 11.0 * (1.0 + 1e-6) && best > 10.5, "{best}");
    }

    #[test]
    fn top_sum_with_copies_is_the_top_k_of_the_union() {
        // Small integers, so every sum is exact whatever its order.
        let mut seed = 12345u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..2000 {
            let values: Vec<f64> = (0..next(8)).map(|_| next(10) as f64).collect();
            let (copies, value, k) = (next(5) as usize, next(10) as f64, next(14) as usize);
            let mut union = values.clone();
            union.extend(std::iter::repeat_n(value, copies));
            union.sort_by(|a, b| b.total_cmp(a));
            let want: f64 = union.iter().take(k).sum();
            let got = top_sum(&mut values.clone(), k, copies, value);
            assert_eq!(got, want, "{values:?} + {copies} x {value}, k = {k}");
        }
    }
}
