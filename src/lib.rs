//! polytok's Rust core, the module `polytok._core`: the hot loops only. The algorithm modules
//! (pre-tokenising and counting, segmenters, trainers, the ConvexTok LP, the readers of other
//! libraries' files, text statistics) hold no Python types; `bindings` wraps them all for
//! Python. This file only wires the modules together.
use pyo3::prelude::*;

mod bindings;
mod compat;
mod count;
mod heal;
mod literals;
mod lp;
mod metrics;
mod pretokenize;
mod segment;
mod train;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bindings::register(m)
}
