//! Token healing (src/heal.rs) for polytok.healing.
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::heal::{Healer, NotAToken, SortedTokens};
use crate::pretokenize::PreTokenizer;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHealer>()?;
    m.add_class::<PySortedTokens>()
}

/// A tokeniser's ordinary tokens in byte order, for `tokens_starting_with`.
#[pyclass(name = "SortedTokens", module = "polytok._core", frozen)]
pub struct PySortedTokens {
    sorted: SortedTokens,
}

#[pymethods]
impl PySortedTokens {
    /// `tokens` sorted by their bytes.
    #[new]
    fn new(tokens: Vec<Vec<u8>>) -> Self {
        PySortedTokens {
            sorted: SortedTokens::new(&tokens),
        }
    }

    /// (low, high): the tokens low..high are those that start with `prefix`.
    fn range(&self, prefix: &[u8]) -> (usize, usize) {
        self.sorted.range(prefix)
    }
}

/// One tokeniser's healing data: its pattern's pre-tokeniser, the probe continuations, every
/// id's bytes and its special ids.
#[pyclass(name = "Healer", module = "polytok._core", frozen)]
pub struct PyHealer {
    healer: Healer,
}

#[pymethods]
impl PyHealer {
    /// `tokens[id]`: the bytes ordinary id `id` stands for (None: no ordinary token);
    /// `word_starts`: the pattern is a preset's, where a space or line end before an ASCII
    /// letter always starts a pre-token.
    #[new]
    fn new(
        pattern: &str,
        probes: Vec<Vec<u8>>,
        tokens: Vec<Option<Vec<u8>>>,
        special_ids: Vec<usize>,
        word_starts: bool,
    ) -> PyResult<Self> {
        let pretokenizer = PreTokenizer::new(Some(pattern), Vec::new())?;
        Ok(PyHealer {
            healer: Healer::new(pretokenizer, probes, &tokens, &special_ids, word_starts),
        })
    }

    /// (ids kept, removed bytes) for the prompt `ids` (see src/heal.rs); ValueError naming
    /// the position of an id it reads that is no token.
    fn heal<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyList>,
    ) -> PyResult<(usize, Bound<'py, PyBytes>)> {
        let id_at = |at: usize| ids.get_item(at).ok()?.extract::<u32>().ok();
        match self.healer.heal(ids.len(), id_at) {
            Ok((kept, removed)) => Ok((kept, PyBytes::new(py, &removed))),
            Err(NotAToken(at)) => Err(pyo3::exceptions::PyValueError::new_err(at)),
        }
    }

    /// The last pre-token start of `text` that no probe moves (see src/heal.rs).
    fn stable_start(&self, py: Python<'_>, text: &[u8]) -> usize {
        py.detach(|| self.healer.stable_start(text))
    }
}
