//! Pre-tokenisation: special tokens are split out first, then a regex cuts the rest into pieces.
//!
//! Input is bytes that may be invalid UTF-8. The regex runs on each maximal valid UTF-8 run;
//! every maximal run of invalid bytes becomes one pre-token of its own, so nothing is lost.
use aho_corasick::{AhoCorasick, MatchKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// One part of a document after special tokens are split out.
pub enum Segment<'a> {
    Text(&'a [u8]),
    /// Index into the special-token list.
    Special(usize),
}

pub struct PreTokenizer {
    regex: Option<fancy_regex::Regex>,
    specials: Option<AhoCorasick>,
    pub special_tokens: Vec<Vec<u8>>,
}

impl PreTokenizer {
    pub fn new(pattern: Option<&str>, special_tokens: Vec<Vec<u8>>) -> Result<Self, String> {
        let regex = match pattern {
            None => None,
            Some(p) => Some(fancy_regex::Regex::new(p).map_err(|e| e.to_string())?),
        };
        let specials = if special_tokens.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&special_tokens)
                    .map_err(|e| e.to_string())?,
            )
        };
        Ok(PreTokenizer { regex, specials, special_tokens })
    }

    /// Calls `f` on each text segment and special token of `text`, in order.
    pub fn for_each_segment<'a>(&self, text: &'a [u8], mut f: impl FnMut(Segment<'a>)) {
        match &self.specials {
            None => f(Segment::Text(text)),
            Some(ac) => {
                let mut start = 0;
                for m in ac.find_iter(text) {
                    if m.start() > start {
                        f(Segment::Text(&text[start..m.start()]));
                    }
                    f(Segment::Special(m.pattern().as_usize()));
                    start = m.end();
                }
                if start < text.len() {
                    f(Segment::Text(&text[start..]));
                }
            }
        }
    }

    /// Calls `f` on each pre-token of `text` (which holds no special tokens).
    pub fn for_each_piece<'a>(&self, text: &'a [u8], mut f: impl FnMut(&'a [u8])) {
        let mut rest = text;
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    self.split_str(valid, &mut f);
                    return;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    // SAFETY-free: from_utf8 validated rest[..good].
                    self.split_str(std::str::from_utf8(&rest[..good]).unwrap(), &mut f);
                    let mut bad = good + e.error_len().unwrap_or(rest.len() - good);
                    // Extend over following invalid bytes so a run of garbage is one pre-token.
                    while bad < rest.len() {
                        match std::str::from_utf8(&rest[bad..]) {
                            Err(e2) if e2.valid_up_to() == 0 => {
                                bad += e2.error_len().unwrap_or(rest.len() - bad)
                            }
                            _ => break,
                        }
                    }
                    f(&rest[good..bad]);
                    rest = &rest[bad..];
                }
            }
        }
    }

    fn split_str<'a>(&self, s: &'a str, f: &mut impl FnMut(&'a [u8])) {
        if s.is_empty() {
            return;
        }
        match &self.regex {
            None => f(s.as_bytes()),
            Some(re) => {
                for m in re.find_iter(s) {
                    let m = m.expect("regex backtrack limit exceeded");
                    if m.start() < m.end() {
                        f(&s.as_bytes()[m.start()..m.end()]);
                    }
                }
            }
        }
    }
}

/// Python view of the pre-tokeniser, mainly for tests and inspection.
#[pyclass(name = "PreTokenizer", module = "polytok._core", frozen)]
pub struct PyPreTokenizer {
    pub inner: PreTokenizer,
}

#[pymethods]
impl PyPreTokenizer {
    #[new]
    #[pyo3(signature = (pattern, special_tokens=Vec::new()))]
    fn new(pattern: Option<&str>, special_tokens: Vec<Vec<u8>>) -> PyResult<Self> {
        let inner = PreTokenizer::new(pattern, special_tokens).map_err(PyValueError::new_err)?;
        Ok(PyPreTokenizer { inner })
    }

    /// The pre-tokens of `text`; special tokens come out whole, as their own pieces.
    fn split<'py>(&self, py: Python<'py>, text: &[u8]) -> Vec<Bound<'py, PyBytes>> {
        let mut out: Vec<&[u8]> = Vec::new();
        self.inner.for_each_segment(text, |seg| match seg {
            Segment::Text(t) => self.inner.for_each_piece(t, |p| out.push(p)),
            Segment::Special(i) => out.push(&self.inner.special_tokens[i]),
        });
        out.into_iter().map(|p| PyBytes::new(py, p)).collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPreTokenizer>()?;
    Ok(())
}
