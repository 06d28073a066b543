//! Smoothed Lagrangian dual ascent for the ConvexTok LP, on the full tokenisation graph.
//!
//! The Lagrangian bound L(mu) = sum_w shortestpath_w(n_w + mu_e) - (sum of the K largest M_t)
//! is concave but piecewise linear. Replacing each shortest path by a soft minimum (temperature
//! `tau` tokens, an entropy over the pre-token's paths) and the top-K sum by its entropic
//! version (temperature `colour_tau`, with the budget price lambda as an explicit variable)
//! gives a smooth concave function
//!   F(mu, lambda) = sum_w n_w softmin_w - K lambda - colour_tau sum_t softplus((M_t - lambda) / colour_tau)
//! whose gradient is (edge marginal p_e - colour value c_t) for mu_e and (sum_t c_t - K) for
//! lambda, with c_t = sigmoid((M_t - lambda) / colour_tau). It is maximised over mu, lambda >= 0
//! by projected L-BFGS, one stage per temperature, each stage preconditioned by the diagonal
//! of F's curvature where the stage starts. Every evaluation also gives the exact L(mu) (the
//! hard shortest paths come with the soft ones), and the prices with the best exact value are
//! kept: that value, re-evaluated with a rounding margin in Python, is the certified bound.
//! All sums run in a fixed order, so the result does not depend on the thread count.
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::time::Instant;

use crate::graph::{PyTokenGraph, TokenGraph};

/// Above this, exp(-x) is below 2.4e-16 of the largest term and counts as 0.
const NEGLIGIBLE: f64 = 36.0;

/// State of a dual ascent: variables, the best exact bound so far, scratch space.
#[pyclass(name = "DualAscent", module = "polytok._core")]
pub struct DualAscent {
    budget: usize,
    colour_tau_ratio: f64,
    /// The price of a token of budget, estimated: a quarter of the K-th largest weighted colour
    /// frequency (lambda came out at 0.1 to 0.25 of it on the benchmarks). The colour
    /// temperature is in these units, so the smoothing does not depend on the corpus' size.
    price_scale: f64,
    /// Edges whose colour has no other edge. Their price is tied to lambda: for any lambda,
    /// mu_e = lambda maximises L (its shortest-path part rises with slope p_e <= 1 in mu_e and
    /// its colour term (mu_e - lambda)_+ with slope 1 beyond lambda), and then the colour term
    /// vanishes. The smoothed F keeps no term for their colours, and its lambda gradient counts
    /// their marginals p_e as the budget those colours use (c_t = p_e, as in the LP presolve).
    tied: Vec<bool>,
    /// The other edges: their prices are the variables, in this order, followed by lambda.
    free: Vec<usize>,
    /// Colours with more than one edge (the others are tied).
    shared: Vec<bool>,
    point: Vec<f64>,
    best_point: Vec<f64>,
    best_value: f64,
    evaluations: usize,
    /// Colour values c_t at the last evaluation.
    colour_values: Vec<f64>,
    /// Edge marginals p_e at the last evaluation.
    marginals: Vec<f64>,
    /// Scratch: prices of every edge, colour totals M_t.
    prices: Vec<f64>,
    totals: Vec<f64>,
}

impl DualAscent {
    /// The edge prices of a point: its mu on the free edges, lambda on the tied ones.
    fn prices_of(&self, point: &[f64], out: &mut Vec<f64>) {
        let lambda = point[point.len() - 1];
        out.clear();
        out.resize(self.tied.len(), lambda);
        for (k, &e) in self.free.iter().enumerate() {
            out[e] = point[k];
        }
    }

    /// -F at `point` (minimised), its gradient into `gradient`; returns (-F, exact L).
    fn evaluate(
        &mut self,
        graph: &TokenGraph,
        point: &[f64],
        tau: f64,
        colour_tau: f64,
        gradient: &mut [f64],
    ) -> (f64, f64) {
        self.evaluations += 1;
        let lambda = point[point.len() - 1];
        let mut prices = std::mem::take(&mut self.prices);
        self.prices_of(point, &mut prices);
        let (soft, hard) = graph.soft_paths(&prices, tau, &mut self.marginals);
        self.totals.iter_mut().for_each(|m| *m = 0.0);
        for (&t, &m) in graph.edge_colour.iter().zip(&prices) {
            self.totals[t as usize] += m;
        }
        self.prices = prices;
        let mut softplus = 0.0;
        let mut used = 0.0;
        for t in 0..self.totals.len() {
            if !self.shared[t] {
                continue;
            }
            let z = (self.totals[t] - lambda) / colour_tau;
            let c = if z < -NEGLIGIBLE {
                0.0
            } else if z > NEGLIGIBLE {
                softplus += z;
                1.0
            } else {
                softplus += z.max(0.0) + (-z.abs()).exp().ln_1p();
                1.0 / (1.0 + (-z).exp())
            };
            self.colour_values[t] = c;
            used += c;
        }
        for (e, &tied) in self.tied.iter().enumerate() {
            if tied {
                let p = self.marginals[e];
                self.colour_values[graph.edge_colour[e] as usize] = p;
                used += p;
            }
        }
        for (k, &e) in self.free.iter().enumerate() {
            gradient[k] = self.colour_values[graph.edge_colour[e] as usize] - self.marginals[e];
        }
        gradient[self.free.len()] = self.budget as f64 - used;
        let value = soft - self.budget as f64 * lambda - colour_tau * softplus;
        let exact = hard - top_sum(&mut self.totals, self.budget);
        if exact > self.best_value {
            self.best_value = exact;
            self.best_point.copy_from_slice(point);
        }
        (-value, exact)
    }

    /// Diagonal of -F's Hessian, estimated at the last evaluation: p(1-p) / (tau n_w) per
    /// edge from its own path variance plus c(1-c) / colour_tau from its colour; lambda
    /// gathers the colours' and the tied edges' terms.
    fn curvature(&self, graph: &TokenGraph, tau: f64, colour_tau: f64) -> Vec<f64> {
        let mut path = vec![0.0; self.tied.len()];
        for w in 0..graph.counts.len() {
            let count = graph.counts[w] as f64;
            for e in graph.edge_start[w]..graph.edge_start[w + 1] {
                let p = self.marginals[e];
                path[e] = p * (1.0 - p) / (tau * count);
            }
        }
        let colour = |t: usize| self.colour_values[t] * (1.0 - self.colour_values[t]) / colour_tau;
        let mut diagonal: Vec<f64> = self
            .free
            .iter()
            .map(|&e| path[e] + colour(graph.edge_colour[e] as usize))
            .collect();
        let mut budget = 0.0;
        for t in 0..self.shared.len() {
            if self.shared[t] {
                budget += colour(t);
            }
        }
        for (e, &tied) in self.tied.iter().enumerate() {
            if tied {
                budget += path[e];
            }
        }
        diagonal.push(budget);
        diagonal
    }

    /// One temperature stage of projected L-BFGS in the scaled variables x = point / scale.
    fn run_stage(
        &mut self,
        graph: &TokenGraph,
        tau: f64,
        iterations: usize,
        memory: usize,
        deadline: Option<Instant>,
    ) {
        let colour_tau = tau * self.colour_tau_ratio * self.price_scale;
        let n = self.point.len();
        let point = self.point.clone();
        let mut g = vec![0.0; n];
        let (mut f, _) = self.evaluate(graph, &point, tau, colour_tau, &mut g);
        // Stage preconditioner: 1 / sqrt(curvature + its mean), so that the scaled variables
        // have curvature about 1 and a unit step is about a Newton step. The added mean keeps
        // flat coordinates (p and c near 0 or 1) from taking huge steps.
        let diagonal = self.curvature(graph, tau, colour_tau);
        let mean = diagonal.iter().sum::<f64>() / n as f64;
        let scale: Vec<f64> = diagonal
            .iter()
            .map(|d| {
                if d + mean > 0.0 {
                    1.0 / (d + mean).sqrt()
                } else {
                    1.0
                }
            })
            .collect();
        let mut x: Vec<f64> = point.iter().zip(&scale).map(|(p, s)| p / s).collect();
        g.iter_mut().zip(&scale).for_each(|(g, s)| *g *= s);
        // Curvature pairs (s, y, 1 / s.y), oldest first, their vectors recycled. They are kept
        // in f32: reading them dominates the direction's cost, and single precision halves it
        // (products are taken in f64 from the stored values, so the pairs stay consistent).
        let mut pairs: VecDeque<(Vec<f32>, Vec<f32>, f64)> = VecDeque::new();
        let mut spare: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
        let (mut d, mut trial, mut unscaled, mut g_trial) =
            (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let mut alphas = Vec::with_capacity(memory);
        // Coordinates at their bound with the gradient pushing outwards stay fixed.
        let active = |i: usize, x: &[f64], g: &[f64]| x[i] <= 0.0 && g[i] > 0.0;
        for _ in 0..iterations {
            if deadline.is_some_and(|limit| Instant::now() >= limit) {
                break;
            }
            for i in 0..n {
                d[i] = if active(i, &x, &g) { 0.0 } else { -g[i] };
            }
            alphas.clear();
            for (s, y, rho) in pairs.iter().rev() {
                let alpha = rho * dot(s, &d);
                axpy(-alpha, y, &mut d);
                alphas.push(alpha);
            }
            if let Some((s, y, _)) = pairs.back() {
                // Pairs are kept only with s.y > 0, so y.y > 0 too.
                let gamma = dot(s, y) / dot(y, y);
                d.iter_mut().for_each(|v| *v *= gamma);
            }
            for ((s, y, rho), alpha) in pairs.iter().zip(alphas.iter().rev()) {
                let beta = rho * dot(y, &d);
                axpy(alpha - beta, s, &mut d);
            }
            for i in 0..n {
                if active(i, &x, &g) {
                    d[i] = 0.0;
                }
            }
            if dot(&d, &g) >= 0.0 {
                // Not a descent direction: forget the curvature pairs and step along -g.
                spare.extend(pairs.drain(..).map(|(s, y, _)| (s, y)));
                for i in 0..n {
                    d[i] = if active(i, &x, &g) { 0.0 } else { -g[i] };
                }
                if dot(&d, &d) == 0.0 {
                    break;
                }
            }
            // Backtracking (Armijo) along the projected path.
            let mut step = 1.0;
            let mut accepted = false;
            let mut f_trial = f;
            for _ in 0..30 {
                let mut decrease = 0.0;
                for i in 0..n {
                    trial[i] = (x[i] + step * d[i]).max(0.0);
                    unscaled[i] = trial[i] * scale[i];
                    decrease += g[i] * (trial[i] - x[i]);
                }
                (f_trial, _) = self.evaluate(graph, &unscaled, tau, colour_tau, &mut g_trial);
                g_trial.iter_mut().zip(&scale).for_each(|(g, s)| *g *= s);
                if f_trial <= f + 1e-4 * decrease {
                    accepted = true;
                    break;
                }
                step *= 0.5;
            }
            if !accepted {
                break;
            }
            let (mut s, mut y) = spare.pop().unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
            for i in 0..n {
                s[i] = (trial[i] - x[i]) as f32;
                y[i] = (g_trial[i] - g[i]) as f32;
            }
            let sy = dot(&s, &y);
            if sy > 1e-10 * (dot(&s, &s) * dot(&y, &y)).sqrt() {
                pairs.push_back((s, y, 1.0 / sy));
                if pairs.len() > memory {
                    let (s, y, _) = pairs.pop_front().expect("more pairs than memory");
                    spare.push((s, y));
                }
            } else {
                spare.push((s, y));
            }
            std::mem::swap(&mut x, &mut trial);
            std::mem::swap(&mut g, &mut g_trial);
            f = f_trial;
        }
        self.point = x.iter().zip(&scale).map(|(x, s)| x * s).collect();
        // Leave the colour values and marginals those of the final point.
        let point = self.point.clone();
        self.evaluate(graph, &point, tau, colour_tau, &mut g);
    }
}

/// The sum of the `k` largest entries (all of them when there are at most k); reorders `values`.
fn top_sum(values: &mut [f64], k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    if k >= values.len() {
        return values.iter().sum();
    }
    let split = values.len() - k;
    values.select_nth_unstable_by(split, |a, b| a.total_cmp(b));
    // Summed in ascending order, so the result does not depend on how the selection left them.
    let top = &mut values[split..];
    top.sort_unstable_by(|a, b| a.total_cmp(b));
    top.iter().sum()
}

/// a . b in f64 with eight independent lanes (vectorisable; a fixed order, so deterministic).
fn dot<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(&x, &y)| x.into() * y.into())
        .sum();
    for (x, y) in a8.zip(b8) {
        for k in 0..8 {
            lanes[k] += x[k].into() * y[k].into();
        }
    }
    lanes.iter().sum::<f64>() + tail
}

/// y += alpha x, in f64.
fn axpy<X: Copy + Into<f64>>(alpha: f64, x: &[X], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(y, &x)| *y += alpha * x.into());
}

#[pymethods]
impl DualAscent {
    /// Starts at mu = 0, lambda = 0 for a budget of K tokens; the colour temperature of a
    /// stage is `colour_tau_ratio` x its path temperature (in tokens) x the price scale.
    #[new]
    #[pyo3(signature = (graph, budget, colour_tau_ratio=1.0))]
    fn new(graph: PyRef<'_, PyTokenGraph>, budget: usize, colour_tau_ratio: f64) -> PyResult<Self> {
        if !(colour_tau_ratio > 0.0) || colour_tau_ratio.is_infinite() {
            return Err(PyValueError::new_err(format!(
                "colour_tau_ratio must be > 0, got {colour_tau_ratio}"
            )));
        }
        let g = &graph.inner;
        let edges = g.edge_colour.len();
        let mut per_colour = vec![0u32; g.colour_len.len()];
        for &t in &g.edge_colour {
            per_colour[t as usize] += 1;
        }
        let tied = g
            .edge_colour
            .iter()
            .map(|&t| per_colour[t as usize] == 1)
            .collect();
        let shared = per_colour.iter().map(|&n| n > 1).collect();
        let free: Vec<usize> = (0..edges)
            .filter(|&e| per_colour[g.edge_colour[e] as usize] > 1)
            .collect();
        let variables = free.len() + 1;
        let mut frequencies: Vec<u64> = g.colour_frequency.clone();
        let price_scale = if budget == 0 || frequencies.is_empty() {
            1.0
        } else {
            let split = frequencies.len() - budget.min(frequencies.len());
            (*frequencies.select_nth_unstable(split).1 as f64 / 4.0).max(1.0)
        };
        Ok(DualAscent {
            tied,
            free,
            shared,
            budget,
            colour_tau_ratio,
            price_scale,
            point: vec![0.0; variables],
            best_point: vec![0.0; variables],
            best_value: f64::NEG_INFINITY,
            evaluations: 0,
            colour_values: vec![0.0; g.colour_len.len()],
            marginals: vec![0.0; edges],
            prices: Vec::new(),
            totals: vec![0.0; g.colour_len.len()],
        })
    }

    /// Runs one stage of at most `iterations` L-BFGS steps at path temperature `tau`,
    /// stopping early after `seconds` (None: no limit).
    #[pyo3(signature = (graph, tau, iterations, memory=5, seconds=None))]
    fn stage(
        &mut self,
        py: Python<'_>,
        graph: PyRef<'_, PyTokenGraph>,
        tau: f64,
        iterations: usize,
        memory: usize,
        seconds: Option<f64>,
    ) -> PyResult<()> {
        if !(tau > 0.0) || tau.is_infinite() {
            return Err(PyValueError::new_err(format!(
                "tau must be finite and > 0, got {tau}"
            )));
        }
        let g = &graph.inner;
        if g.edge_colour.len() != self.tied.len() {
            return Err(PyValueError::new_err(
                "this dual ascent was started on another graph",
            ));
        }
        let deadline =
            seconds.map(|s| Instant::now() + std::time::Duration::from_secs_f64(s.max(0.0)));
        py.detach(|| self.run_stage(g, tau, iterations, memory.max(1), deadline));
        Ok(())
    }

    /// Best exact L(mu) seen (not yet lowered by a rounding margin).
    #[getter]
    fn best_value(&self) -> f64 {
        self.best_value
    }

    /// Number of variables: the prices of the edges not tied to lambda, and lambda.
    #[getter]
    fn variables(&self) -> usize {
        self.point.len()
    }

    /// Evaluations of the smoothed function (and of the exact bound) so far.
    #[getter]
    fn evaluations(&self) -> usize {
        self.evaluations
    }

    /// Edge prices mu of the best exact value (tied edges at their lambda).
    fn best_prices<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        let mut out = Vec::new();
        self.prices_of(&self.best_point, &mut out);
        out.into_pyarray(py)
    }

    /// The current prices mu (tied edges at lambda).
    fn prices<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        let mut out = Vec::new();
        self.prices_of(&self.point, &mut out);
        out.into_pyarray(py)
    }

    /// Colour values c_t of the smoothed problem at the current point (a primal estimate:
    /// sigmoid((M_t - lambda) / colour_tau), or the edge's marginal for single-edge colours).
    fn colour_values<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.colour_values.clone().into_pyarray(py)
    }

    /// The current budget price lambda.
    #[getter]
    fn budget_price(&self) -> f64 {
        self.point[self.point.len() - 1]
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DualAscent>()?;
    Ok(())
}
