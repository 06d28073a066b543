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

/// ASCII bytes for which Python's `str.isspace()` is true: tab, line feed, vertical tab, form
/// feed, carriage return, the four separators U+001C..U+001F, and space.
const ASCII_WHITESPACE: [bool; 128] = {
    let mut table = [false; 128];
    let mut byte = 0;
    while byte < 128 {
        table[byte] = matches!(byte, 0x09..=0x0d | 0x1c..=0x20);
        byte += 1;
    }
    table
};

/// Whether the character that starts at `text[at]` (valid UTF-8) is whitespace for Python's
/// `str.isspace()`, and so for `str.split()`. Besides ASCII these are U+0085, U+00A0, U+1680,
/// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F and U+3000, matched on their UTF-8 bytes so
/// that no character has to be decoded.
#[inline]
fn starts_whitespace(text: &[u8], at: usize) -> bool {
    let lead = text[at];
    if lead < 0x80 {
        return ASCII_WHITESPACE[lead as usize];
    }
    let next = |offset: usize| text.get(at + offset).copied().unwrap_or(0);
    match lead {
        0xc2 => matches!(next(1), 0x85 | 0xa0),
        0xe1 => next(1) == 0x9a && next(2) == 0x80,
        0xe2 => match next(1) {
            0x80 => matches!(next(2), 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf),
            0x81 => next(2) == 0x9f,
            _ => false,
        },
        0xe3 => next(1) == 0x80 && next(2) == 0x80,
        _ => false,
    }
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
    /// One character; branch-free, as whitespace and text alternate unpredictably.
    #[inline]
    fn character(&mut self, whitespace: bool, newline: bool) {
        self.stats.characters += 1;
        self.stats.words += u64::from(!whitespace & !self.in_word);
        self.in_word = !whitespace;
        self.stats.lines += u64::from(newline & self.line_has_text);
        self.line_has_text = !newline & (self.line_has_text | !whitespace);
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
        let valid = chunk.valid().as_bytes();
        for (at, &byte) in valid.iter().enumerate() {
            // Continuation bytes (10xxxxxx) belong to the character their lead byte counted.
            if byte & 0xc0 != 0x80 {
                counter.character(starts_whitespace(valid, at), byte == b'\n');
            }
        }
        // Each invalid byte is one character that is not whitespace, as a lone surrogate is not.
        for _ in chunk.invalid() {
            counter.character(false, false);
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
