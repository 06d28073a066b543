//! polytok's Rust core: the hot loops only. Each module owns its algorithm and registers its
//! own PyO3 bindings (so modules can be worked on independently); this file only wires them.
use pyo3::prelude::*;

mod bindings;
mod compat;
mod count;
mod lp;
mod metrics;
mod pretokenize;
mod segment;
mod train;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bindings::register(m)?;
    lp::graph::register(m)?;
    lp::dual_ascent::register(m)?;
    metrics::register(m)?;
    Ok(())
}
