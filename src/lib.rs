//! polytok's Rust core: the hot loops only. Each module owns its algorithm and registers its
//! own PyO3 bindings (so modules can be worked on independently); this file only wires them.
use pyo3::prelude::*;

mod bpe;
mod count;
mod dual;
mod graph;
mod metrics;
mod pretokenize;
mod progress;
mod segment;
mod soft;
mod unigram;
mod wordpiece;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    pretokenize::register(m)?;
    count::register(m)?;
    bpe::register(m)?;
    segment::register(m)?;
    graph::register(m)?;
    dual::register(m)?;
    metrics::register(m)?;
    unigram::register(m)?;
    wordpiece::register(m)?;
    Ok(())
}
