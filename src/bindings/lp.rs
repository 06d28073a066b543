//! The ConvexTok LP (`polytok.lp`): the tokenisation graph, its reduced LP and shortest paths,
//! and the dual solver's state.
use std::sync::Mutex;
use std::time::{Duration, Instant};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::counts::counts_view;
use crate::lp::census::census;
use crate::lp::dual_ascent::DualAscent;
use crate::lp::graph::{check_temperature, TokenGraph};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenGraph>()?;
    m.add_class::<PyDualAscent>()?;
    m.add_function(wrap_pyfunction!(substring_census, m)?)?;
    Ok(())
}

/// (edges, colours, colours with one edge, [edges the dual solver prices on their own at each
/// budget]) of the graph of counted pre-tokens (the counts triple) with token edges of at most
/// `max_token_bytes` (0: no cap), without building it; `tie_fraction` as the dual solver's.
#[pyfunction]
#[pyo3(signature = (data, offsets, counts, max_token_bytes, budgets=Vec::new(), tie_fraction=0.0))]
fn substring_census(
    py: Python<'_>,
    data: &[u8],
    offsets: PyReadonlyArray1<'_, i64>,
    counts: PyReadonlyArray1<'_, u64>,
    max_token_bytes: usize,
    budgets: Vec<usize>,
    tie_fraction: f64,
) -> PyResult<(usize, usize, usize, Vec<usize>)> {
    let view = counts_view(data, &offsets, &counts)?;
    let offsets: Vec<usize> = view.offsets().iter().map(|&o| o as usize).collect();
    let max_len = if max_token_bytes == 0 {
        usize::MAX
    } else {
        max_token_bytes
    };
    let counts = view.counts();
    let found = py.detach(|| census(data, &offsets, counts, max_len, &budgets, tie_fraction));
    Ok((found.edges, found.colours, found.single_edge_colours, found.free_edges))
}

/// Python view of the tokenisation graph; see `polytok.lp.graph`.
#[pyclass(name = "TokenGraph", module = "polytok._core")]
pub struct PyTokenGraph {
    inner: TokenGraph,
}

#[pymethods]
impl PyTokenGraph {
    /// Builds the full graph of counted pre-tokens (the counts triple); `max_token_bytes` caps
    /// token edges (0: no cap).
    #[new]
    #[pyo3(signature = (data, offsets, counts, max_token_bytes))]
    fn new(
        py: Python<'_>,
        data: Vec<u8>,
        offsets: PyReadonlyArray1<'_, i64>,
        counts: PyReadonlyArray1<'_, u64>,
        max_token_bytes: usize,
    ) -> PyResult<Self> {
        let view = counts_view(&data, &offsets, &counts)?;
        let offsets: Vec<usize> = view.offsets().iter().map(|&o| o as usize).collect();
        let counts = view.counts().to_vec();
        let max_len = if max_token_bytes == 0 {
            usize::MAX
        } else {
            max_token_bytes
        };
        let inner = py.detach(|| TokenGraph::new(data, offsets, counts, max_len));
        Ok(PyTokenGraph { inner })
    }

    #[getter]
    fn num_edges(&self) -> usize {
        self.inner.num_edges()
    }

    #[getter]
    fn num_colours(&self) -> usize {
        self.inner.num_colours()
    }

    /// Colour of every full-graph edge (uint32).
    fn edge_colours<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.edge_colours())
    }

    /// Colour of the given full-graph edges (uint32): what a caller needs of `edge_colours`
    /// without a copy of all of them.
    fn edge_colours_at<'py>(
        &self,
        py: Python<'py>,
        edges: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let colours = self.inner.edge_colours();
        let picked = edges
            .as_slice()?
            .iter()
            .map(|&e| {
                usize::try_from(e).ok().and_then(|e| colours.get(e).copied()).ok_or_else(|| {
                    pyo3::exceptions::PyIndexError::new_err(format!(
                        "edge {e} is not in the graph's {} edges",
                        colours.len()
                    ))
                })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        Ok(picked.into_pyarray(py))
    }

    /// Length in bytes of every colour (uint32).
    fn colour_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.colour_lengths())
    }

    /// Weighted frequency of every colour: the sum of counts over its occurrences (uint64).
    fn colour_frequencies<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.colour_frequencies())
    }

    /// Fixes the colours whose bytes are among `tokens` (an extension's base, in every
    /// vocabulary the bound covers); returns the flag per colour (bool).
    fn fix_colours<'py>(&mut self, py: Python<'py>, tokens: Vec<Vec<u8>>) -> Bound<'py, PyArray1<bool>> {
        PyArray1::from_slice(py, self.inner.fix_colours(&tokens))
    }

    /// The bytes of the given colours.
    fn colour_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<u32>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        ids.into_iter()
            .map(|t| Ok(PyBytes::new(py, self.inner.colour_bytes(t)?)))
            .collect()
    }

    /// Builds the reduced LP over the colours flagged in `candidate` (bool per colour) and
    /// returns its flat arrays in a dict.
    fn reduced_lp<'py>(
        &mut self,
        py: Python<'py>,
        candidate: PyReadonlyArray1<'_, bool>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let candidate = candidate.as_slice()?.to_vec();
        self.inner.check_candidates(&candidate)?;
        let inner = &mut self.inner;
        let lp = py.detach(|| inner.reduced_lp(&candidate));
        let out = PyDict::new(py);
        out.set_item("constant", lp.constant)?;
        out.set_item("segment_weight", lp.segment_weight.into_pyarray(py))?;
        out.set_item("node_supply", lp.node_supply.into_pyarray(py))?;
        out.set_item("free_tail", lp.free_tail.into_pyarray(py))?;
        out.set_item("free_head", lp.free_head.into_pyarray(py))?;
        out.set_item("free_cost", lp.free_cost.into_pyarray(py))?;
        out.set_item("priced_tail", lp.priced_tail.into_pyarray(py))?;
        out.set_item("priced_head", lp.priced_head.into_pyarray(py))?;
        out.set_item("priced_cost", lp.priced_cost.into_pyarray(py))?;
        out.set_item("priced_colour", lp.priced_colour.into_pyarray(py))?;
        out.set_item("lp_colours", lp.lp_colours.into_pyarray(py))?;
        Ok(out)
    }

    /// Full-graph edge prices from reduced-LP edge prices (see `TokenGraph::prices_from_lp`).
    fn prices_from_lp<'py>(
        &self,
        py: Python<'py>,
        lp_mu: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let lp_mu = lp_mu.as_slice()?;
        self.inner.check_lp_prices(lp_mu)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.prices_from_lp(lp_mu)).into_pyarray(py))
    }

    /// Prices the edges dropped from the reduced LP out of every shortest path.
    fn price_dropped<'py>(
        &self,
        py: Python<'py>,
        mu: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mu = mu.as_slice()?;
        self.inner.check_price_count(mu)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.price_dropped(mu)).into_pyarray(py))
    }

    /// (sum over pre-tokens of the shortest path at costs n_w + mu_e, uint8 mark per edge on
    /// the chosen paths).
    fn shortest_paths<'py>(
        &self,
        py: Python<'py>,
        mu: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<u8>>)> {
        let mu = mu.as_slice()?;
        self.inner.check_prices(mu)?;
        let inner = &self.inner;
        let (total, on_path) = py.detach(|| inner.shortest_paths(mu));
        Ok((total, on_path.into_pyarray(py)))
    }

    /// The colour totals M_t: the sum of mu over each colour's edges (in edge order).
    fn colour_totals<'py>(&self, py: Python<'py>, mu: PyReadonlyArray1<'_, f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mu = mu.as_slice()?;
        self.inner.check_price_count(mu)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.colour_totals(mu)).into_pyarray(py))
    }

    /// |d|^2 of the subgradient d_e = on_path_e - in_top(colour of e) (see `subgradient_step`).
    fn subgradient_norm(
        &self,
        py: Python<'_>,
        on_path: PyReadonlyArray1<'_, u8>,
        in_top: PyReadonlyArray1<'_, bool>,
    ) -> PyResult<usize> {
        let (on_path, in_top) = (on_path.as_slice()?, in_top.as_slice()?);
        self.check_subgradient(on_path, in_top)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.subgradient_norm(on_path, in_top)))
    }

    /// max(0, mu + step x d), d the subgradient of `subgradient_norm`: a step that needs no
    /// temporary array per edge besides its result.
    fn subgradient_step<'py>(
        &self,
        py: Python<'py>,
        mu: PyReadonlyArray1<'_, f64>,
        on_path: PyReadonlyArray1<'_, u8>,
        in_top: PyReadonlyArray1<'_, bool>,
        step: f64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (mu, on_path, in_top) = (mu.as_slice()?, on_path.as_slice()?, in_top.as_slice()?);
        self.inner.check_price_count(mu)?;
        self.check_subgradient(on_path, in_top)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.subgradient_step(mu, on_path, in_top, step)).into_pyarray(py))
    }

    /// Sum of the shortest paths on the uncapped graph, the longer edges priced from `theta`
    /// (see `TokenGraph::uncapped_shortest_paths`).
    fn uncapped_shortest_paths(
        &self,
        py: Python<'_>,
        mu: PyReadonlyArray1<'_, f64>,
        theta: f64,
    ) -> PyResult<f64> {
        let mu = mu.as_slice()?;
        self.inner.check_prices(mu)?;
        if !(theta >= 0.0) || theta.is_infinite() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "theta must be finite and >= 0, got {theta}"
            )));
        }
        let inner = &self.inner;
        Ok(py.detach(|| inner.uncapped_shortest_paths(mu, theta)))
    }

    /// (smoothed sum, hard sum, marginals) of `TokenGraph::soft_paths` at prices mu.
    fn soft_paths<'py>(
        &self,
        py: Python<'py>,
        mu: PyReadonlyArray1<'_, f64>,
        tau: f64,
    ) -> PyResult<(f64, f64, Bound<'py, PyArray1<f64>>)> {
        let mu = mu.as_slice()?;
        check_temperature(tau)?;
        self.inner.check_prices(mu)?;
        let inner = &self.inner;
        let mut marginals = vec![0.0; mu.len()];
        let (soft, hard) = py.detach(|| inner.soft_paths(mu, tau, &mut marginals));
        Ok((soft, hard, marginals.into_pyarray(py)))
    }
}

impl PyTokenGraph {
    /// Checks a mark per edge and a flag per colour.
    fn check_subgradient(&self, on_path: &[u8], in_top: &[bool]) -> PyResult<()> {
        if on_path.len() != self.inner.num_edges() || in_top.len() != self.inner.num_colours() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the subgradient needs a mark per edge ({}) and a flag per colour ({}), got {} and {}",
                self.inner.num_edges(),
                self.inner.num_colours(),
                on_path.len(),
                in_top.len()
            )));
        }
        Ok(())
    }
}

/// The dual solver's state (`polytok.lp.dual`).
#[pyclass(name = "DualAscent", module = "polytok._core")]
pub struct PyDualAscent {
    inner: DualAscent,
}

#[pymethods]
impl PyDualAscent {
    /// Starts at mu = 0, lambda = 0 for a budget of K tokens; the colour temperature of a
    /// stage is `colour_tau_ratio` x its path temperature (in tokens) x the price scale.
    /// `own_prices` (a flag per colour, None: every colour) picks the colours whose edges get
    /// prices of their own; the others' edges are tied to lambda.
    #[new]
    #[pyo3(signature = (graph, budget, colour_tau_ratio, own_prices=None))]
    fn new(
        py: Python<'_>,
        graph: PyRef<'_, PyTokenGraph>,
        budget: usize,
        colour_tau_ratio: f64,
        own_prices: Option<PyReadonlyArray1<'_, bool>>,
    ) -> PyResult<Self> {
        let own = own_prices.as_ref().map(|a| a.as_slice()).transpose()?;
        let inner_graph = &graph.inner;
        let inner = py.detach(|| DualAscent::new(inner_graph, budget, colour_tau_ratio, own))?;
        Ok(PyDualAscent { inner })
    }

    /// Runs one stage of `iterations` L-BFGS steps at path temperature `tau`, then up to
    /// `extend` more while the best exact bound rose by more than `gain` of itself over the
    /// last 10; stops early after `seconds` (None: no limit) or at Ctrl-C (checked before
    /// every step). Returns (steps run, whether Ctrl-C stopped it); a KeyboardInterrupt is
    /// consumed, any other error a signal handler raises is raised.
    #[pyo3(signature = (graph, tau, iterations, memory, seconds, extend, gain))]
    #[allow(clippy::too_many_arguments)]
    fn stage(
        &mut self,
        py: Python<'_>,
        graph: PyRef<'_, PyTokenGraph>,
        tau: f64,
        iterations: usize,
        memory: usize,
        seconds: Option<f64>,
        extend: usize,
        gain: f64,
    ) -> PyResult<(usize, bool)> {
        let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
        let (inner, graph) = (&mut self.inner, &graph.inner);
        let failure: Mutex<Option<PyErr>> = Mutex::new(None);
        let end = py.detach(|| {
            // Signals are only seen with the GIL held: take it briefly before every step.
            let stop = || match Python::attach(|py| py.check_signals()) {
                Ok(()) => false,
                Err(error) => {
                    *failure.lock().expect("signal error slot") = Some(error);
                    true
                }
            };
            inner.stage(
                graph, tau, iterations, memory, deadline, extend, gain, &stop,
            )
        })?;
        if let Some(error) = failure.into_inner().expect("signal error slot") {
            if !error.is_instance_of::<PyKeyboardInterrupt>(py) {
                return Err(error);
            }
        }
        Ok((end.iterations, end.stopped))
    }

    /// Starts at lambda = `fraction` x the price scale, the edge prices as they are.
    fn start_budget_price(&mut self, fraction: f64) -> PyResult<()> {
        Ok(self.inner.start_budget_price(fraction)?)
    }

    /// Moves the ascent to budget K, keeping its prices and lambda as the next stage's start.
    fn set_budget(&mut self, graph: PyRef<'_, PyTokenGraph>, budget: usize) -> PyResult<()> {
        Ok(self.inner.set_budget(&graph.inner, budget)?)
    }

    /// Best exact L(mu) seen (not yet lowered by a rounding margin).
    #[getter]
    fn best_value(&self) -> f64 {
        self.inner.best_value()
    }

    /// Number of variables: the prices of the edges not tied to lambda, and lambda.
    #[getter]
    fn variables(&self) -> usize {
        self.inner.variables()
    }

    /// Evaluations of the smoothed function (and of the exact bound) so far.
    #[getter]
    fn evaluations(&self) -> usize {
        self.inner.evaluations()
    }

    /// Edge prices mu of the best exact value (tied edges at lambda n_w / F_t).
    fn best_prices<'py>(&self, py: Python<'py>, graph: PyRef<'_, PyTokenGraph>) -> Bound<'py, PyArray1<f64>> {
        self.inner.best_prices(&graph.inner).into_pyarray(py)
    }

    /// The current prices mu (tied edges at lambda n_w / F_t).
    fn prices<'py>(&self, py: Python<'py>, graph: PyRef<'_, PyTokenGraph>) -> Bound<'py, PyArray1<f64>> {
        self.inner.prices(&graph.inner).into_pyarray(py)
    }

    /// Colour values c_t of the smoothed problem at the last evaluation.
    fn colour_values<'py>(&self, py: Python<'py>, graph: PyRef<'_, PyTokenGraph>) -> Bound<'py, PyArray1<f64>> {
        self.inner.colour_values(&graph.inner).into_pyarray(py)
    }

    /// The current budget price lambda.
    #[getter]
    fn budget_price(&self) -> f64 {
        self.inner.budget_price()
    }
}
