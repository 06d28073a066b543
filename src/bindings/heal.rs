//! Token healing (src/heal.rs) for polytok.healing, and the per-tokeniser tables that healing
//! and offsets share (polytok.token_index): tokens in byte order, token lengths.
use numpy::{PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::heal::{Healer, NotAToken, SortedTokens};
use crate::pretokenize::PreTokenizer;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHealer>()?;
    m.add_class::<PySortedTokens>()?;
    m.add_class::<PyTokenLengths>()
}

/// Every id's byte length (0 for ids that are no token), for offsets.
#[pyclass(name = "TokenLengths", module = "polytok._core", frozen)]
pub struct PyTokenLengths {
    lengths: Vec<i64>,
}

#[pymethods]
impl PyTokenLengths {
    #[new]
    fn new(lengths: Vec<i64>) -> Self {
        PyTokenLengths { lengths }
    }

    /// The (start, end) byte offsets (int64, shape (n, 2)) of the ids of the list `ids` laid
    /// end to end; ValueError for an element that is no id of the table.
    fn offsets<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let mut flat = Vec::with_capacity(2 * ids.len());
        let mut end = 0i64;
        for item in ids.iter() {
            let length = item
                .extract::<usize>()
                .ok()
                .and_then(|id| self.lengths.get(id))
                .ok_or_else(|| {
                    pyo3::exceptions::PyValueError::new_err("not an id of this tokeniser")
                })?;
            flat.push(end);
            end += length;
            flat.push(end);
        }
        let rows = flat.len() / 2;
        numpy::PyArray1::from_vec(py, flat).reshape([rows, 2])
    }
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
