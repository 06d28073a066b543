//! The corpus statistics of `polytok.metrics`: per-document text counts of many documents in
//! parallel, and a histogram of the token ids of encoded documents.
use numpy::{IntoPyArray, PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use rayon::prelude::*;

use crate::metrics::{measure, TextStats};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(text_stats, m)?)?;
    m.add_function(wrap_pyfunction!(add_token_counts, m)?)?;
    Ok(())
}

/// Per-document byte, character, word and non-blank line counts of a list of `str` or `bytes`.
#[pyfunction]
fn text_stats<'py>(
    py: Python<'py>,
    documents: &Bound<'py, PyList>,
) -> PyResult<(
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
)> {
    let items: Vec<Bound<'py, PyAny>> = documents.iter().collect();
    let mut texts: Vec<&[u8]> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        if let Ok(text) = item.cast::<PyString>() {
            let text = text.to_str().map_err(|_| {
                PyValueError::new_err(format!(
                    "document {index} is a str with lone surrogates, which is not text; pass it as bytes"
                ))
            })?;
            texts.push(text.as_bytes());
        } else if let Ok(data) = item.cast::<PyBytes>() {
            texts.push(data.as_bytes());
        } else {
            return Err(PyTypeError::new_err(format!(
                "document {index} is a {}, expected str or bytes",
                item.get_type().name()?
            )));
        }
    }
    let stats: Vec<TextStats> = py.detach(|| texts.par_iter().map(|text| measure(text)).collect());
    let column = |field: fn(&TextStats) -> u64| stats.iter().map(field).collect::<Vec<u64>>();
    Ok((
        column(|s| s.bytes).into_pyarray(py),
        column(|s| s.characters).into_pyarray(py),
        column(|s| s.words).into_pyarray(py),
        column(|s| s.lines).into_pyarray(py),
    ))
}

/// Adds the ids of every list in `encoded` (a list of lists of int, as `encode_batch` returns)
/// into the histogram `counts`, and returns how many ids there were. Reading the Python ints
/// here is several times cheaper than building a numpy array from them first.
#[pyfunction]
fn add_token_counts(
    encoded: &Bound<'_, PyList>,
    counts: &Bound<'_, PyArray1<i64>>,
) -> PyResult<u64> {
    let mut counts = counts.readwrite();
    let histogram = counts
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("counts must be contiguous"))?;
    let vocabulary = histogram.len();
    let mut total: u64 = 0;
    for (index, document) in encoded.iter().enumerate() {
        let ids = document.cast::<PyList>().map_err(|_| {
            PyTypeError::new_err(format!(
                "encoded document {index} is not a list of token ids"
            ))
        })?;
        for position in 0..ids.len() {
            // A borrowed reference read without the bounds check and reference counting of
            // `ids.iter()`, which would cost more than the rest of this loop.
            let item = unsafe { ffi::PyList_GET_ITEM(ids.as_ptr(), position as ffi::Py_ssize_t) };
            let id = unsafe { ffi::PyLong_AsUnsignedLong(item) };
            if id == std::os::raw::c_ulong::MAX {
                if let Some(error) = PyErr::take(encoded.py()) {
                    return Err(PyTypeError::new_err(format!(
                        "encoded document {index} holds a value that is not a token id: {error}"
                    )));
                }
            }
            let slot = histogram.get_mut(id as usize).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "token id {id} in encoded document {index} is outside the vocabulary of {vocabulary} ids"
                ))
            })?;
            *slot += 1;
        }
        total += ids.len() as u64;
    }
    Ok(total)
}
