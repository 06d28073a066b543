//! The decode stream of polytok's own tokenisers (polytok.streaming): `step(id)` returns the
//! complete UTF-8 characters the id's bytes finish and holds the bytes of an unfinished one; a
//! token of whole characters while nothing is held returns its cached text.
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString, PyType};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStreamTable>()?;
    m.add_class::<PyDecodeStream>()
}

/// Each id's bytes (None: no token), its text when they are whole characters, and the
/// exception a bad id raises.
struct StreamTable {
    bytes: Vec<Option<Vec<u8>>>,
    texts: Vec<Option<Py<PyString>>>,
    error: Py<PyType>,
}

/// One tokeniser's stream table; `stream()` starts a stream on it.
#[pyclass(name = "StreamTable", module = "polytok._core", frozen)]
pub struct PyStreamTable {
    table: Arc<StreamTable>,
}

#[pymethods]
impl PyStreamTable {
    /// `tokens[id]`: the bytes id `id` stands for (None: no token); `error`: the exception
    /// class a bad id raises (polytok's DecodeError).
    #[new]
    fn new(py: Python<'_>, tokens: Vec<Option<Vec<u8>>>, error: Py<PyType>) -> Self {
        let texts = tokens
            .iter()
            .map(|token| {
                let text = std::str::from_utf8(token.as_deref()?).ok()?;
                Some(PyString::new(py, text).unbind())
            })
            .collect();
        PyStreamTable {
            table: Arc::new(StreamTable {
                bytes: tokens,
                texts,
                error,
            }),
        }
    }

    /// A new stream, holding nothing.
    fn stream(&self) -> PyDecodeStream {
        PyDecodeStream {
            table: Arc::clone(&self.table),
            held: Vec::new(),
        }
    }
}

/// One stream of ids to text.
#[pyclass(name = "DecodeStream", module = "polytok._core")]
pub struct PyDecodeStream {
    table: Arc<StreamTable>,
    held: Vec<u8>,
}

impl PyDecodeStream {
    fn bad_id(&self, token_id: &Bound<'_, PyAny>, integer: bool) -> PyErr {
        let shown = if integer {
            token_id.str()
        } else {
            token_id.repr()
        }
        .map(|text| text.to_string())
        .unwrap_or_else(|_| "the id".to_string());
        let message = if integer {
            format!(
                "decode stream: id {shown} is not a token of this tokeniser (ids are below {})",
                self.table.bytes.len()
            )
        } else {
            format!("decode stream: {shown} is not an integer id")
        };
        PyErr::from_type(self.table.error.bind(token_id.py()).clone(), message)
    }
}

#[pymethods]
impl PyDecodeStream {
    /// The text `token_id` completes (possibly ""); the table's error for an id that is no token.
    fn step(&mut self, token_id: &Bound<'_, PyAny>) -> PyResult<Py<PyString>> {
        let py = token_id.py();
        if token_id.is_instance_of::<PyBool>() {
            return Err(self.bad_id(token_id, false));
        }
        let id = match token_id.extract::<i64>() {
            Ok(id) => id,
            Err(_) => {
                let integer =
                    token_id.is_instance_of::<PyInt>() || token_id.hasattr("__index__")?;
                return Err(self.bad_id(token_id, integer));
            }
        };
        let table = &*self.table;
        let Some(Some(data)) = usize::try_from(id).ok().and_then(|id| table.bytes.get(id)) else {
            return Err(self.bad_id(token_id, true));
        };
        if self.held.is_empty() {
            if let Some(text) = &table.texts[id as usize] {
                return Ok(text.clone_ref(py));
            }
        }
        self.held.extend_from_slice(data);
        let text = take_complete(&mut self.held);
        Ok(PyString::new(py, &text).unbind())
    }

    /// The bytes still held (U+FFFD for an unfinished character); the stream starts anew.
    fn flush(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        text
    }
}

/// The text of `held` up to an unfinished character at its end, which stays held; invalid
/// sequences become U+FFFD (one per maximal invalid part, as Python's decoder replaces them).
fn take_complete(held: &mut Vec<u8>) -> String {
    let mut out = String::new();
    let mut at = 0;
    while at < held.len() {
        match std::str::from_utf8(&held[at..]) {
            Ok(text) => {
                out.push_str(text);
                at = held.len();
            }
            Err(error) => {
                let valid = error.valid_up_to();
                out.push_str(std::str::from_utf8(&held[at..at + valid]).unwrap_or_default());
                at += valid;
                match error.error_len() {
                    None => break,
                    Some(length) => {
                        out.push('\u{FFFD}');
                        at += length;
                    }
                }
            }
        }
    }
    held.drain(..at);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_character_stays_held() {
        let mut held = "a😀".as_bytes()[..3].to_vec();
        assert_eq!(take_complete(&mut held), "a");
        assert_eq!(held, &"😀".as_bytes()[..2]);
        held.extend_from_slice(&"😀".as_bytes()[2..]);
        assert_eq!(take_complete(&mut held), "😀");
        assert!(held.is_empty());
        let mut invalid = b"\xffx\xe4".to_vec();
        assert_eq!(take_complete(&mut invalid), "\u{FFFD}x");
        assert_eq!(invalid, b"\xe4");
    }
}
