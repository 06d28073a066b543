//! The per-document counts behind `polytok.evaluate`: bytes, characters, whitespace-separated
//! words and non-blank lines of many documents at once, and a histogram of token ids. They run
//! here, in parallel and without the GIL, so that measuring a corpus costs little more than
//! encoding it.
use numpy::{IntoPyArray, PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use rayon::prelude::*;

/// The code points for which Python's `str.isspace()` is true, sorted: `str.split()` with no
/// argument splits on exactly these, and the metrics define a word as `str.split()` does.
const PYTHON_WHITESPACE: [u32; 29] = [
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
    0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f,
    0x205f, 0x3000,
];

fn is_python_whitespace(c: char) -> bool {
    let code = c as u32;
    if code < 0x80 {
        return matches!(code, 0x09..=0x0d | 0x1c..=0x20);
    }
    PYTHON_WHITESPACE.binary_search(&code).is_ok()
}

/// What `measure` counts in one document.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct TextStats {
    pub bytes: u64,
    /// Code points; each byte of an invalid UTF-8 sequence counts as one character, as Python
    /// counts the text decoded with `errors="surrogateescape"`.
    pub characters: u64,
    /// Maximal runs of non-whitespace characters: `len(text.split())`.
    pub words: u64,
    /// Pieces between `\n` that hold at least one non-whitespace character.
    pub lines: u64,
}

struct Counter {
    stats: TextStats,
    in_word: bool,
    line_has_text: bool,
}

impl Counter {
    fn character(&mut self, c: Option<char>) {
        self.stats.characters += 1;
        // An invalid byte (None) is never whitespace, as a lone surrogate is not in Python.
        if c.is_some_and(is_python_whitespace) {
            self.in_word = false;
            if c == Some('\n') {
                self.stats.lines += u64::from(self.line_has_text);
                self.line_has_text = false;
            }
        } else {
            self.stats.words += u64::from(!self.in_word);
            self.in_word = true;
            self.line_has_text = true;
        }
    }
}

/// Counts the bytes, characters, words and non-blank lines of one document (UTF-8, possibly invalid).
pub fn measure(text: &[u8]) -> TextStats {
    let mut counter = Counter {
        stats: TextStats { bytes: text.len() as u64, ..TextStats::default() },
        in_word: false,
        line_has_text: false,
    };
    for chunk in text.utf8_chunks() {
        let valid = chunk.valid();
        if valid.is_ascii() {
            for &byte in valid.as_bytes() {
                counter.character(Some(byte as char));
            }
        } else {
            for c in valid.chars() {
                counter.character(Some(c));
            }
        }
        for _ in chunk.invalid() {
            counter.character(None);
        }
    }
    counter.stats.lines += u64::from(counter.line_has_text);
    counter.stats
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
fn add_token_counts(encoded: &Bound<'_, PyList>, counts: &Bound<'_, PyArray1<i64>>) -> PyResult<u64> {
    let mut counts = counts.readwrite();
    let histogram = counts.as_slice_mut().map_err(|_| PyValueError::new_err("counts must be contiguous"))?;
    let vocabulary = histogram.len();
    let mut total: u64 = 0;
    for (index, document) in encoded.iter().enumerate() {
        let ids = document.cast::<PyList>().map_err(|_| {
            PyTypeError::new_err(format!("encoded document {index} is not a list of token ids"))
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(text_stats, m)?)?;
    m.add_function(wrap_pyfunction!(add_token_counts, m)?)?;
    Ok(())
}
