//! Pre-tokenisation: special tokens are split out first, then a pattern cuts the rest into pieces.
//!
//! Input is bytes that may be invalid UTF-8. The pattern runs on each maximal valid UTF-8 run;
//! every maximal run of invalid bytes becomes one pre-token of its own, so nothing is lost.
//! The four preset patterns (recognised by their exact text) use hand-written linear-time
//! matchers; any other pattern goes through fancy-regex (lookaround, possessive quantifiers,
//! atomic groups, `\p{..}`).
mod classes;
mod presets;
mod unicode_tables;

use aho_corasick::{AhoCorasick, MatchKind};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

pub use presets::Preset;

/// One part of a document after special tokens are split out.
pub enum Segment<'a> {
    Text(&'a [u8]),
    /// Index into the special-token list.
    Special(usize),
}

enum Matcher {
    /// No split: each text segment is one pre-token.
    Whole,
    Preset(Preset),
    Regex(fancy_regex::Regex),
}

pub struct PreTokenizer {
    matcher: Matcher,
    specials: Option<AhoCorasick>,
    pub special_tokens: Vec<Vec<u8>>,
    /// Whether text a user regex does not match becomes a pre-token (polytok's lossless rule)
    /// or is dropped (how some loaded pipelines, e.g. HF's Whitespace, treat whitespace).
    keep_unmatched: bool,
}

impl PreTokenizer {
    /// A pre-tokeniser for `pattern` (a preset's exact pattern text selects its fast matcher;
    /// `None`: no split) that first cuts out `special_tokens` (leftmost, then longest, first).
    pub fn new(pattern: Option<&str>, special_tokens: Vec<Vec<u8>>) -> Result<Self, String> {
        let matcher = match pattern {
            None => Matcher::Whole,
            Some(pattern) => match Preset::from_pattern(pattern) {
                Some(preset) => Matcher::Preset(preset),
                None => Matcher::Regex(compile(pattern)?),
            },
        };
        Self::with_matcher(matcher, special_tokens)
    }

    /// Like `new`, but always runs `pattern` through fancy-regex, even a preset's: the reference
    /// the preset matchers are tested and benchmarked against (tiktoken splits with fancy-regex).
    pub fn new_generic(pattern: &str, special_tokens: Vec<Vec<u8>>) -> Result<Self, String> {
        Self::with_matcher(Matcher::Regex(compile(pattern)?), special_tokens)
    }

    fn with_matcher(matcher: Matcher, special_tokens: Vec<Vec<u8>>) -> Result<Self, String> {
        if let Some(index) = special_tokens.iter().position(|token| token.is_empty()) {
            return Err(format!("special token {index} is empty"));
        }
        let specials = if special_tokens.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&special_tokens)
                    .map_err(|error| error.to_string())?,
            )
        };
        Ok(PreTokenizer { matcher, specials, special_tokens, keep_unmatched: true })
    }

    /// Drop the text a user regex does not match instead of keeping it as pre-tokens, as the
    /// pre-tokenisers of loaded HF files do (their pipelines are lossy by design).
    pub fn drop_unmatched(&mut self) {
        self.keep_unmatched = false;
    }

    /// The preset whose matcher this pre-tokeniser uses, if any.
    pub fn preset(&self) -> Option<Preset> {
        match self.matcher {
            Matcher::Preset(preset) => Some(preset),
            _ => None,
        }
    }

    /// Calls `f` on each text segment and special token of `text`, in order.
    pub fn for_each_segment<'a>(&self, text: &'a [u8], mut f: impl FnMut(Segment<'a>)) {
        match &self.specials {
            None => f(Segment::Text(text)),
            Some(automaton) => {
                let mut start = 0;
                for found in automaton.find_iter(text) {
                    if found.start() > start {
                        f(Segment::Text(&text[start..found.start()]));
                    }
                    f(Segment::Special(found.pattern().as_usize()));
                    start = found.end();
                }
                if start < text.len() {
                    f(Segment::Text(&text[start..]));
                }
            }
        }
    }

    /// Calls `f` on each pre-token of `text` (which holds no special tokens).
    ///
    /// Never fails: if a user regex hits fancy-regex's backtracking limit, the rest of that
    /// UTF-8 run becomes one pre-token (still lossless). `try_for_each_piece` reports it instead.
    pub fn for_each_piece<'a>(&self, text: &'a [u8], mut f: impl FnMut(&'a [u8])) {
        // With the fallback on, split_bytes never returns an error.
        let _ = self.split_bytes(text, &mut f, true);
    }

    /// Like `for_each_piece`, but stops with an error (naming the byte offset) when a user regex
    /// exceeds fancy-regex's backtracking limit; the pieces before it have been passed to `f`.
    pub fn try_for_each_piece<'a>(
        &self,
        text: &'a [u8],
        mut f: impl FnMut(&'a [u8]),
    ) -> Result<(), String> {
        self.split_bytes(text, &mut f, false)
    }

    /// Splits each valid UTF-8 run with the matcher and passes each invalid run through whole.
    /// When the regex gives up on a run: with `fallback`, the rest of the run is one piece;
    /// without, the error is returned.
    fn split_bytes<'a>(
        &self,
        text: &'a [u8],
        f: &mut impl FnMut(&'a [u8]),
        fallback: bool,
    ) -> Result<(), String> {
        let mut rest = text;
        while !rest.is_empty() {
            let (valid, invalid_end) = match std::str::from_utf8(rest) {
                Ok(_) => (rest.len(), rest.len()),
                Err(error) => {
                    let valid = error.valid_up_to();
                    let mut end = valid + error.error_len().unwrap_or(rest.len() - valid);
                    // Extend over the following invalid bytes so a run of garbage is one pre-token.
                    while end < rest.len() {
                        match std::str::from_utf8(&rest[end..]) {
                            Err(next) if next.valid_up_to() == 0 => {
                                end += next.error_len().unwrap_or(rest.len() - end)
                            }
                            _ => break,
                        }
                    }
                    (valid, end)
                }
            };
            if valid > 0 {
                if let Err((stopped, error)) = self.split_valid(&rest[..valid], f) {
                    if !fallback {
                        let offset = text.len() - rest.len() + stopped;
                        return Err(format!("regex gave up at byte {offset}: {error}"));
                    }
                    f(&rest[stopped..valid]);
                }
            }
            if invalid_end > valid {
                f(&rest[valid..invalid_end]);
            }
            rest = &rest[invalid_end..];
        }
        Ok(())
    }

    /// Splits valid UTF-8 `text`; on a regex error, the offset where splitting stopped.
    fn split_valid<'a>(
        &self,
        text: &'a [u8],
        f: &mut impl FnMut(&'a [u8]),
    ) -> Result<(), (usize, fancy_regex::Error)> {
        match &self.matcher {
            Matcher::Whole => f(text),
            Matcher::Preset(preset) => preset.split(text, f),
            Matcher::Regex(regex) => {
                // SAFETY: split_bytes only passes runs that from_utf8 accepted.
                let valid = unsafe { std::str::from_utf8_unchecked(text) };
                // Text the regex does not match (a user pattern need not cover everything)
                // becomes a pre-token of its own, so pre-tokenisation stays lossless.
                let mut end = 0;
                for found in regex.find_iter(valid) {
                    let found = found.map_err(|error| (end, error))?;
                    if found.start() > end && self.keep_unmatched {
                        f(&text[end..found.start()]);
                    }
                    if found.start() < found.end() {
                        f(&text[found.start()..found.end()]);
                    }
                    end = found.end();
                }
                if end < text.len() && self.keep_unmatched {
                    f(&text[end..]);
                }
            }
        }
        Ok(())
    }
}

// The tokeniser and the counting workers share one PreTokenizer across threads.
const _: () = {
    const fn assert_thread_safe<T: Send + Sync>() {}
    assert_thread_safe::<PreTokenizer>();
};

fn compile(pattern: &str) -> Result<fancy_regex::Regex, String> {
    fancy_regex::Regex::new(pattern).map_err(|error| {
        // The regex crate's own message (e.g. which `\p{..}` class is unknown) sits in the
        // source chain of fancy-regex's "error parsing pattern"; show the innermost one.
        if let fancy_regex::Error::CompileError(compile_error) = &error {
            if let fancy_regex::CompileError::InnerError(build_error) = compile_error.as_ref() {
                let mut innermost: &dyn std::error::Error = build_error;
                while let Some(source) = innermost.source() {
                    innermost = source;
                }
                return innermost.to_string();
            }
        }
        error.to_string()
    })
}

/// Python view of the pre-tokeniser, for polytok.pretokenize, tests and benchmarks.
#[pyclass(name = "PreTokenizer", module = "polytok._core", frozen)]
pub struct PyPreTokenizer {
    pub inner: PreTokenizer,
}

impl PyPreTokenizer {
    /// Calls `f` on each pre-token of `text`, special tokens included, in order; stops at the
    /// first regex error.
    fn for_each_token<'a>(&'a self, text: &'a [u8], mut f: impl FnMut(&'a [u8])) -> Result<(), String> {
        let mut failure = Ok(());
        self.inner.for_each_segment(text, |segment| match segment {
            Segment::Text(segment_text) if failure.is_ok() => {
                failure = self.inner.try_for_each_piece(segment_text, &mut f);
            }
            Segment::Text(_) => {}
            Segment::Special(index) => f(&self.inner.special_tokens[index]),
        });
        failure
    }
}

#[pymethods]
impl PyPreTokenizer {
    #[new]
    #[pyo3(signature = (pattern, special_tokens=Vec::new(), generic=false))]
    fn new(pattern: Option<&str>, special_tokens: Vec<Vec<u8>>, generic: bool) -> PyResult<Self> {
        let inner = match (pattern, generic) {
            (Some(pattern), true) => PreTokenizer::new_generic(pattern, special_tokens),
            _ => PreTokenizer::new(pattern, special_tokens),
        }
        .map_err(PyValueError::new_err)?;
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
        py.detach(|| self.for_each_token(text, |piece| pieces.push(piece)))
            .map_err(PyValueError::new_err)?;
        Ok(pieces.into_iter().map(|piece| PyBytes::new(py, piece)).collect())
    }

    /// The byte lengths of the pre-tokens of `text`, without creating them (for large inputs).
    fn piece_lengths<'py>(&self, py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut lengths: Vec<i64> = Vec::new();
        py.detach(|| self.for_each_token(text, |piece| lengths.push(piece.len() as i64)))
            .map_err(PyValueError::new_err)?;
        Ok(PyArray1::from_vec(py, lengths))
    }
}

/// The four preset names and patterns, as the Rust matchers know them.
#[pyfunction]
fn preset_patterns() -> Vec<(&'static str, &'static str)> {
    Preset::ALL.iter().map(|preset| (preset.name(), preset.pattern())).collect()
}

/// The preset matchers' class flags of every code point (bit 1 `\p{L}`, 2 `\p{N}`, 4 `\s`,
/// 8 o200k's upper class, 16 its lower class), so a test can compare them with `regex`.
#[pyfunction]
fn preset_character_classes<'py>(py: Python<'py>) -> Bound<'py, PyBytes> {
    let classes = classes::CharClasses::get();
    let flags: Vec<u8> = (0..0x110000u32).map(|code_point| classes.of(code_point)).collect();
    PyBytes::new(py, &flags)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPreTokenizer>()?;
    m.add_function(wrap_pyfunction!(preset_patterns, m)?)?;
    m.add_function(wrap_pyfunction!(preset_character_classes, m)?)?;
    // The `regex` release the preset tables were generated from (tools/gen_unicode_tables.py).
    m.add("PRESET_TABLES_REGEX_VERSION", unicode_tables::REGEX_VERSION)?;
    Ok(())
}
