//! The pre-tokeniser and the counting of pre-tokens (`polytok.pretokenize`, `polytok.counts`),
//! and the one reader of the counts triple (data, offsets int64, counts uint64) that every
//! other binding takes.
use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyByteArray, PyBytes, PyString};

use super::{run_on, thread_pool};
use crate::count::{
    merge_sorted_into, merged_sizes, Counter, CounterFull, PreTokenCounts, MAX_DISTINCT,
    MAX_SHARD_BYTES,
};
use crate::pretokenize::{character_class_flags, PreTokenizer, Preset, REGEX_VERSION};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPreTokenizer>()?;
    m.add_function(wrap_pyfunction!(preset_patterns, m)?)?;
    m.add_function(wrap_pyfunction!(preset_character_classes, m)?)?;
    m.add("PRESET_TABLES_REGEX_VERSION", REGEX_VERSION)?;
    m.add_class::<PyCounter>()?;
    m.add_function(wrap_pyfunction!(merge_pre_token_counts, m)?)?;
    m.add_function(wrap_pyfunction!(check_sorted_counts, m)?)?;
    Ok(())
}

/// The counts triple as Python passes it: data, offsets (int64), counts (uint64).
pub type CountsFromPython<'py> = (
    PyBackedBytes,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, u64>,
);

/// The checked view of counts passed as separate `data`, `offsets` and `counts` arguments.
pub fn counts_view<'a>(
    data: &'a [u8],
    offsets: &'a PyReadonlyArray1<'_, i64>,
    counts: &'a PyReadonlyArray1<'_, u64>,
) -> PyResult<PreTokenCounts<'a>> {
    Ok(PreTokenCounts::new(
        data,
        offsets.as_slice()?,
        counts.as_slice()?,
    )?)
}

/// Python view of the pre-tokeniser, for polytok.pretokenize, tests and benchmarks.
#[pyclass(name = "PreTokenizer", module = "polytok._core", frozen)]
pub struct PyPreTokenizer {
    inner: PreTokenizer,
}

#[pymethods]
impl PyPreTokenizer {
    /// `generic`: run even a preset's pattern through fancy-regex (the reference for the
    /// preset matchers).
    #[new]
    #[pyo3(signature = (pattern, special_tokens, generic))]
    fn new(pattern: Option<&str>, special_tokens: Vec<Vec<u8>>, generic: bool) -> PyResult<Self> {
        let inner = match (pattern, generic) {
            (Some(pattern), true) => PreTokenizer::new_generic(pattern, special_tokens),
            _ => PreTokenizer::new(pattern, special_tokens),
        }?;
        Ok(PyPreTokenizer { inner })
    }

    /// The name of the preset whose fast matcher is in use, or None (user regex or no split).
    #[getter]
    fn preset(&self) -> Option<&'static str> {
        self.inner.preset().map(Preset::name)
    }

    /// The pre-tokens of `text`; special tokens come out whole, as their own pieces.
    fn split<'py>(&self, py: Python<'py>, text: &[u8]) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let mut pieces: Vec<&[u8]> = Vec::new();
        py.detach(|| {
            self.inner
                .try_for_each_token(text, |piece| pieces.push(piece))
        })?;
        Ok(pieces
            .into_iter()
            .map(|piece| PyBytes::new(py, piece))
            .collect())
    }

    /// The byte lengths of the pre-tokens of `text`, without creating them (for large inputs).
    fn piece_lengths<'py>(
        &self,
        py: Python<'py>,
        text: &[u8],
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut lengths: Vec<i64> = Vec::new();
        py.detach(|| {
            self.inner
                .try_for_each_token(text, |piece| lengths.push(piece.len() as i64))
        })?;
        Ok(PyArray1::from_vec(py, lengths))
    }
}

/// The four preset names and patterns, as the Rust matchers know them.
#[pyfunction]
fn preset_patterns() -> Vec<(&'static str, &'static str)> {
    Preset::ALL
        .iter()
        .map(|preset| (preset.name(), preset.pattern()))
        .collect()
}

/// The preset matchers' class flags of every code point, one byte each (see
/// `pretokenize::character_class_flags`).
#[pyfunction]
fn preset_character_classes(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &character_class_flags())
}

/// A document handed over from Python, kept alive without copying while the GIL is released.
enum Document {
    Text(PyBackedStr),
    Bytes(PyBackedBytes),
}

impl AsRef<[u8]> for Document {
    fn as_ref(&self) -> &[u8] {
        match self {
            Document::Text(text) => text.as_bytes(),
            Document::Bytes(bytes) => bytes,
        }
    }
}

impl Document {
    fn extract(item: &Bound<'_, PyAny>, index: usize) -> PyResult<Self> {
        if let Ok(text) = item.cast::<PyString>() {
            return match text.extract::<PyBackedStr>() {
                Ok(text) => Ok(Document::Text(text)),
                // Lone surrogates have no UTF-8 form; keep them as bytes, as the pre-tokeniser does.
                Err(_) => Ok(Document::Bytes(
                    text.call_method1("encode", ("utf-8", "surrogatepass"))?
                        .extract::<PyBackedBytes>()?,
                )),
            };
        }
        if item.is_instance_of::<PyBytes>() || item.is_instance_of::<PyByteArray>() {
            return Ok(Document::Bytes(item.extract::<PyBackedBytes>()?));
        }
        Err(PyTypeError::new_err(format!(
            "document {index} is {}; expected str or bytes",
            item.get_type().name()?
        )))
    }
}

/// Flattened counts as Python receives them: (data, offsets int64, counts uint64).
type CountsToPython<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u64>>,
);

/// Counts the pre-tokens of batches of documents on `num_threads` threads (None: every core).
#[pyclass(name = "PreTokenCounter", module = "polytok._core")]
pub struct PyCounter {
    /// None once finished.
    counter: Option<Counter>,
    pool: Option<Arc<rayon::ThreadPool>>,
}

#[pymethods]
impl PyCounter {
    #[new]
    #[pyo3(signature = (pattern, special_tokens, num_threads))]
    fn new(
        pattern: Option<&str>,
        special_tokens: Vec<Vec<u8>>,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let pretokenizer = PreTokenizer::new(pattern, special_tokens)?;
        Ok(PyCounter {
            counter: Some(Counter::new(pretokenizer)),
            pool: thread_pool(num_threads)?,
        })
    }

    /// Counts a batch of documents (str or bytes) with the GIL released; returns their size in bytes.
    fn add(&mut self, py: Python<'_>, documents: &Bound<'_, PyAny>) -> PyResult<u64> {
        let documents = documents
            .try_iter()?
            .enumerate()
            .map(|(index, item)| Document::extract(&item?, index))
            .collect::<PyResult<Vec<Document>>>()?;
        let size = documents
            .iter()
            .map(|document| document.as_ref().len() as u64)
            .sum();
        let pool = self.pool.as_deref();
        let counter = self.counter.as_mut().ok_or_else(finished)?;
        py.detach(|| run_on(pool, || counter.add(&documents)))
            .map_err(counter_full)?;
        Ok(size)
    }

    /// Adds sorted counts (data, offsets int64, counts uint64), e.g. another shard's, with the
    /// GIL released.
    fn add_counts(&mut self, py: Python<'_>, counts: CountsFromPython<'_>) -> PyResult<()> {
        let view = sorted_operand(py, "added", &counts)?;
        let pool = self.pool.as_deref();
        let counter = self.counter.as_mut().ok_or_else(finished)?;
        py.detach(|| run_on(pool, || counter.add_counts(&view)))
            .map_err(counter_full)
    }

    /// The number of distinct pre-tokens counted so far.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.counter.as_ref().ok_or_else(finished)?.len())
    }

    /// (data, offsets int64, counts uint64) of the pre-tokens, sorted bytewise. This ends the
    /// counter: its arrays become the result's.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<CountsToPython<'py>> {
        let counter = self.counter.take().ok_or_else(finished)?;
        let pool = self.pool.as_deref();
        let sorted = py.detach(|| run_on(pool, || counter.into_sorted()));
        let data = PyBytes::new_with(py, sorted.data_len(), |buffer| {
            py.detach(|| sorted.write_data(buffer));
            Ok(())
        })?;
        let (offsets, counts) = py.detach(|| sorted.into_offsets_and_counts());
        Ok((data, offsets.into_pyarray(py), counts.into_pyarray(py)))
    }
}

/// The error for a counter that would hold more than `MAX_DISTINCT` pre-tokens, or more than
/// `MAX_SHARD_BYTES` bytes of them in one of its shards.
fn counter_full(full: CounterFull) -> PyErr {
    PyMemoryError::new_err(match full {
        CounterFull::Distinct => format!(
            "more than {MAX_DISTINCT} distinct pre-tokens; a counter holds at most that many"
        ),
        CounterFull::ShardBytes => format!(
            "more than {MAX_SHARD_BYTES} bytes of distinct pre-tokens in one of the counter's \
             shards; a counter holds at most that many in each"
        ),
    })
}

/// The error for a counter used after `finish`.
fn finished() -> PyErr {
    PyValueError::new_err("this PreTokenCounter is finished; start a new one")
}

/// The checked, sorted view of one operand of `merge_pre_token_counts`; errors name the operand.
fn sorted_operand<'a>(
    py: Python<'_>,
    side: &str,
    (data, offsets, counts): &'a CountsFromPython<'_>,
) -> PyResult<PreTokenCounts<'a>> {
    let (offsets, counts) = (offsets.as_slice()?, counts.as_slice()?);
    py.detach(|| {
        let view = PreTokenCounts::new(data, offsets, counts)?;
        view.check_sorted().map(|()| view)
    })
    .map_err(|error| PyValueError::new_err(format!("{side} operand: {error}")))
}

/// ValueError unless the counts triple is well formed and its pre-tokens are non-empty and in
/// strictly increasing byte order (what a counts file holds), checked with the GIL released.
#[pyfunction]
fn check_sorted_counts(py: Python<'_>, counts: CountsFromPython<'_>) -> PyResult<()> {
    let (data, offsets, counts) = &counts;
    let (offsets, counts) = (offsets.as_slice()?, counts.as_slice()?);
    Ok(py.detach(|| PreTokenCounts::new(data, offsets, counts)?.check_sorted())?)
}

/// The sum of two flattened, sorted count lists, as (data, offsets, counts).
#[pyfunction]
fn merge_pre_token_counts<'py>(
    py: Python<'py>,
    left: CountsFromPython<'py>,
    right: CountsFromPython<'py>,
) -> PyResult<CountsToPython<'py>> {
    let (left, right) = (
        sorted_operand(py, "left", &left)?,
        sorted_operand(py, "right", &right)?,
    );
    let (_, bytes) = py.detach(|| merged_sizes(&left, &right));
    let (mut offsets, mut counts) = (Vec::new(), Vec::new());
    let data = PyBytes::new_with(py, bytes, |buffer| {
        (offsets, counts) = py.detach(|| merge_sorted_into(&left, &right, buffer));
        Ok(())
    })?;
    Ok((data, offsets.into_pyarray(py), counts.into_pyarray(py)))
}
