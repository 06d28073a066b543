//! Token healing's stable-start search (src/heal.rs) for polytok.healing.
use pyo3::prelude::*;

use crate::heal::stable_start;
use crate::pretokenize::PreTokenizer;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStableStart>()
}

/// A pre-tokeniser with the probe continuations healing tries.
#[pyclass(name = "StableStart", module = "polytok._core", frozen)]
pub struct PyStableStart {
    pretokenizer: PreTokenizer,
    probes: Vec<Vec<u8>>,
}

#[pymethods]
impl PyStableStart {
    #[new]
    fn new(pattern: &str, probes: Vec<Vec<u8>>) -> PyResult<Self> {
        Ok(PyStableStart {
            pretokenizer: PreTokenizer::new(Some(pattern), Vec::new())?,
            probes,
        })
    }

    /// The last pre-token start of `text` that no probe moves (see src/heal.rs).
    fn cut(&self, py: Python<'_>, text: &[u8], first_window: usize) -> usize {
        py.detach(|| stable_start(&self.pretokenizer, text, &self.probes, first_window))
    }
}
