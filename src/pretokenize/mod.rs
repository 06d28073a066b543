//! Pre-tokenisation: special tokens are split out first, then a pattern cuts the rest into pieces.
//!
//! Input is bytes that may be invalid UTF-8. The pattern runs on each maximal valid UTF-8 run;
//! every maximal run of invalid bytes becomes one pre-token of its own, so nothing is lost.
//! The four preset patterns (recognised by their exact text) use hand-written linear-time
//! matchers; any other pattern goes through fancy-regex (lookaround, possessive quantifiers,
//! atomic groups, `\p{..}`).
mod blocks;
mod classes;
mod presets;
mod unicode_tables;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::literals;

pub use presets::Preset;

/// Where pre-tokens go, in order: one at a time, or all those that the block path finds in a
/// block at once (a sink that keeps state per piece can then keep it in registers for the block).
pub trait Sink<'a> {
    fn piece(&mut self, piece: &'a [u8]);

    /// The pieces of `text` from `from` on that end at the set bits of `ends` (bit i: byte
    /// `base + i`), each piece before the next; returns where the last one ends.
    #[inline(always)]
    fn pieces(&mut self, text: &'a [u8], mut from: usize, base: usize, mut ends: u64) -> usize {
        while ends != 0 {
            let at = base + ends.trailing_zeros() as usize;
            self.piece(&text[from..at]);
            from = at;
            ends &= ends - 1;
        }
        from
    }
}

/// A closure as a `Sink`.
pub struct EachPiece<F>(pub F);

impl<'a, F: FnMut(&'a [u8])> Sink<'a> for EachPiece<F> {
    #[inline(always)]
    fn piece(&mut self, piece: &'a [u8]) {
        (self.0)(piece)
    }
}
/// The `regex` release the preset tables were generated from (tools/gen_unicode_tables.py).
pub use unicode_tables::REGEX_VERSION;

/// Why a pre-tokeniser could not be built or could not split a text.
#[derive(Debug)]
pub enum PreTokenizeError {
    /// Special token `index` is empty.
    EmptySpecialToken { index: usize },
    /// The special-token matcher could not be built.
    SpecialTokens(aho_corasick::BuildError),
    /// The pattern does not compile.
    Pattern(fancy_regex::Error),
    /// The regex exceeded its backtracking limit at byte `offset` of the text.
    GaveUp {
        offset: usize,
        error: fancy_regex::Error,
    },
}

/// Text to split: bytes that may be invalid UTF-8, or a `str` (a Python str's UTF-8), which
/// needs no check.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    Bytes(&'a [u8]),
    Str(&'a str),
}

impl<'a> Input<'a> {
    /// The bytes of the text.
    pub fn bytes(self) -> &'a [u8] {
        match self {
            Input::Bytes(bytes) => bytes,
            Input::Str(text) => text.as_bytes(),
        }
    }

    /// Bytes `start..end` of the text, still a `str` where both ends are character boundaries.
    pub fn slice(self, start: usize, end: usize) -> Input<'a> {
        match self {
            Input::Str(text) => match text.get(start..end) {
                Some(part) => Input::Str(part),
                None => Input::Bytes(&text.as_bytes()[start..end]),
            },
            Input::Bytes(bytes) => Input::Bytes(&bytes[start..end]),
        }
    }
}

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
    pub fn new(
        pattern: Option<&str>,
        special_tokens: Vec<Vec<u8>>,
    ) -> Result<Self, PreTokenizeError> {
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
    pub fn new_generic(
        pattern: &str,
        special_tokens: Vec<Vec<u8>>,
    ) -> Result<Self, PreTokenizeError> {
        Self::with_matcher(Matcher::Regex(compile(pattern)?), special_tokens)
    }

    fn with_matcher(
        matcher: Matcher,
        special_tokens: Vec<Vec<u8>>,
    ) -> Result<Self, PreTokenizeError> {
        if let Some(index) = special_tokens.iter().position(|token| token.is_empty()) {
            return Err(PreTokenizeError::EmptySpecialToken { index });
        }
        let specials = if special_tokens.is_empty() {
            None
        } else {
            Some(
                literals::builder(&special_tokens, MatchKind::LeftmostLongest)
                    .build(&special_tokens)
                    .map_err(PreTokenizeError::SpecialTokens)?,
            )
        };
        Ok(PreTokenizer {
            matcher,
            specials,
            special_tokens,
            keep_unmatched: true,
        })
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
    pub fn for_each_piece<'a>(&self, text: &'a [u8], f: impl FnMut(&'a [u8])) {
        self.pieces_into(Input::Bytes(text), &mut EachPiece(f))
    }

    /// `for_each_piece` on `input`, skipping the UTF-8 check when it is a `str`.
    pub fn for_each_piece_of<'a>(&self, input: Input<'a>, f: impl FnMut(&'a [u8])) {
        self.pieces_into(input, &mut EachPiece(f))
    }

    /// `for_each_piece_of` into a `Sink`.
    pub fn pieces_into<'a>(&self, input: Input<'a>, sink: &mut impl Sink<'a>) {
        match input {
            // With the fallback on, split_bytes never returns an error.
            Input::Bytes(text) => drop(self.split_bytes(text, sink, true)),
            Input::Str("") => {}
            Input::Str(text) => {
                let text = text.as_bytes();
                if let Err((stopped, _)) = self.split_valid(text, sink) {
                    sink.piece(&text[stopped..]); // as split_bytes' fallback does
                }
            }
        }
    }

    /// Like `for_each_piece`, but stops with an error (naming the byte offset) when a user regex
    /// exceeds fancy-regex's backtracking limit; the pieces before it have been passed to `f`.
    pub fn try_for_each_piece<'a>(
        &self,
        text: &'a [u8],
        f: impl FnMut(&'a [u8]),
    ) -> Result<(), PreTokenizeError> {
        self.split_bytes(text, &mut EachPiece(f), false)
    }

    /// Calls `f` on each pre-token of `text`, special tokens included (whole, as pieces of their
    /// own), in order; stops at the first regex error, as `try_for_each_piece` does.
    pub fn try_for_each_token<'a>(
        &'a self,
        text: &'a [u8],
        mut f: impl FnMut(&'a [u8]),
    ) -> Result<(), PreTokenizeError> {
        let mut failure = Ok(());
        self.for_each_segment(text, |segment| match segment {
            Segment::Text(segment_text) if failure.is_ok() => {
                failure = self.try_for_each_piece(segment_text, &mut f);
            }
            Segment::Text(_) => {}
            Segment::Special(index) => f(&self.special_tokens[index]),
        });
        failure
    }

    /// Splits each valid UTF-8 run with the matcher and passes each invalid run through whole.
    /// When the regex gives up on a run: with `fallback`, the rest of the run is one piece;
    /// without, the error is returned.
    fn split_bytes<'a>(
        &self,
        text: &'a [u8],
        f: &mut impl Sink<'a>,
        fallback: bool,
    ) -> Result<(), PreTokenizeError> {
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
                        return Err(PreTokenizeError::GaveUp { offset, error });
                    }
                    f.piece(&rest[stopped..valid]);
                }
            }
            if invalid_end > valid {
                f.piece(&rest[valid..invalid_end]);
            }
            rest = &rest[invalid_end..];
        }
        Ok(())
    }

    /// Splits valid UTF-8 `text`; on a regex error, the offset where splitting stopped.
    fn split_valid<'a>(
        &self,
        text: &'a [u8],
        f: &mut impl Sink<'a>,
    ) -> Result<(), (usize, fancy_regex::Error)> {
        match &self.matcher {
            Matcher::Whole => f.piece(text),
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
                        f.piece(&text[end..found.start()]);
                    }
                    if found.start() < found.end() {
                        f.piece(&text[found.start()..found.end()]);
                    }
                    end = found.end();
                }
                if end < text.len() && self.keep_unmatched {
                    f.piece(&text[end..]);
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

fn compile(pattern: &str) -> Result<fancy_regex::Regex, PreTokenizeError> {
    fancy_regex::Regex::new(pattern).map_err(PreTokenizeError::Pattern)
}

/// The preset matchers' class flags of every code point (bit 1 `\p{L}`, 2 `\p{N}`, 4 `\s`,
/// 8 o200k's upper class, 16 its lower class), so a test can compare them with `regex`.
pub fn character_class_flags() -> Vec<u8> {
    let classes = classes::CharClasses::get();
    (0..0x110000u32)
        .map(|code_point| classes.of(code_point))
        .collect()
}
