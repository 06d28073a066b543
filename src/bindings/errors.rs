//! The Python exceptions of `polytok._core`, and the words for every typed error of the core:
//! each error's `Display` is its message, and `From<...> for PyErr` picks its exception class
//! (the package catches these classes and adds what the input was).
use std::fmt;

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::compat::CompatError;
use crate::count::CountsError;
use crate::lp::dual_ascent::DualError;
use crate::lp::graph::{GraphError, GraphInput};
use crate::pretokenize::PreTokenizeError;
use crate::segment::encoder::{BuildError, PolicyError};
use crate::segment::{ByteRole, VocabularyError, MAX_UNUSED_IDS};
use crate::train::bpe::BpeError;
use crate::train::extend::ExtendError;
use crate::train::unigram::UnigramError;

pyo3::create_exception!(
    polytok._core,
    SpecialTokenFound,
    PyException,
    "A disallowed special token occurs in the input: args = (token bytes, document index)."
);
pyo3::create_exception!(
    polytok._core,
    InvalidTokenId,
    PyException,
    "An id that is no token: args = (id, position in the input)."
);
pyo3::create_exception!(
    polytok._core,
    InvalidPattern,
    PyException,
    "The pre-tokenisation regex does not compile: args = (message,)."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SpecialTokenFound", m.py().get_type::<SpecialTokenFound>())?;
    m.add("InvalidTokenId", m.py().get_type::<InvalidTokenId>())?;
    m.add("InvalidPattern", m.py().get_type::<InvalidPattern>())?;
    Ok(())
}

/// A ValueError whose message is `error`'s.
fn value_error(error: impl fmt::Display) -> PyErr {
    PyValueError::new_err(error.to_string())
}

pub fn thread_pool_error(threads: usize, error: rayon::ThreadPoolBuildError) -> PyErr {
    PyValueError::new_err(format!("cannot start {threads} threads: {error}"))
}

// ---- counts ---------------------------------------------------------------------------------

impl fmt::Display for CountsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CountsError::OffsetsLength { offsets, counts } => write!(
                f,
                "{offsets} offsets for {counts} counts; expected one more entry in offsets than in counts"
            ),
            CountsError::OffsetsEnds { first, last, data } => write!(
                f,
                "offsets run from {first} to {last}; expected 0 to {data} (they start at 0 and end at the data length {data})"
            ),
            CountsError::OffsetsDecrease { index } => write!(
                f,
                "offsets must not decrease, but offsets[{index}] > offsets[{}]",
                index + 1
            ),
            CountsError::EmptyPreToken { index } => write!(f, "pre-token {index} is empty"),
            CountsError::Unsorted { index } => write!(
                f,
                "pre-tokens {} and {index} are not in strictly increasing byte order",
                index - 1
            ),
        }
    }
}

impl From<CountsError> for PyErr {
    fn from(error: CountsError) -> PyErr {
        value_error(error)
    }
}

// ---- pre-tokenisation -----------------------------------------------------------------------

impl fmt::Display for PreTokenizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreTokenizeError::EmptySpecialToken { index } => {
                write!(f, "special token {index} is empty")
            }
            PreTokenizeError::SpecialTokens(error) => write!(f, "{error}"),
            PreTokenizeError::Pattern(error) => write!(f, "{}", innermost(error)),
            PreTokenizeError::GaveUp { offset, error } => {
                write!(f, "regex gave up at byte {offset}: {error}")
            }
        }
    }
}

/// The regex crate's own explanation of a pattern error (e.g. which `\p{..}` class is
/// unknown): it sits in the source chain of fancy-regex's "error parsing pattern".
fn innermost(error: &fancy_regex::Error) -> String {
    if let fancy_regex::Error::CompileError(compile_error) = error {
        if let fancy_regex::CompileError::InnerError(build_error) = compile_error.as_ref() {
            let mut innermost: &dyn std::error::Error = build_error;
            while let Some(source) = innermost.source() {
                innermost = source;
            }
            return innermost.to_string();
        }
    }
    error.to_string()
}

impl From<PreTokenizeError> for PyErr {
    fn from(error: PreTokenizeError) -> PyErr {
        value_error(error)
    }
}

// ---- segmenters and encoders ----------------------------------------------------------------

impl fmt::Display for VocabularyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            VocabularyError::EmptyToken { id } => write!(f, "vocabulary token {id} is empty"),
            VocabularyError::RepeatedToken { id } => {
                write!(f, "token {id} repeats the bytes of an earlier token")
            }
            VocabularyError::RepeatedMerge { rank, left, right } => {
                write!(f, "merge {rank} ({left}, {right}) repeats an earlier merge")
            }
            VocabularyError::MissingByte { byte, role } => {
                let role = match role {
                    ByteRole::Any => "",
                    ByteRole::WordInitial => " word-initial",
                    ByteRole::Continuation => " continuation",
                };
                write!(
                    f,
                    "byte 0x{byte:02x} is not a{role} token; the segmenter needs all 256 single bytes"
                )
            }
            VocabularyError::ScoreCount { tokens, scores } => {
                write!(f, "{tokens} tokens but {scores} scores")
            }
            VocabularyError::NonFiniteScore { id, score } => {
                write!(
                    f,
                    "score of token {id} is {score}, expected a finite number"
                )
            }
            VocabularyError::EmptySpecialToken { id } => write!(f, "special token {id} is empty"),
            VocabularyError::SpecialIdTaken { id } => {
                write!(f, "special token id {id} is already a token")
            }
            VocabularyError::SpecialIdOutOfRange { id, limit } => write!(
                f,
                "special token id {id} is too large: ids must be below {limit}, the ordinary and \
                 special tokens with at most {MAX_UNUSED_IDS} unused ids between them"
            ),
            VocabularyError::MergeId { rank, id, tokens } => write!(
                f,
                "merge {rank} names id {id}, which is no token: the ids of the {tokens} tokens are \
                 0..{}, empty entries aside",
                tokens.saturating_sub(1)
            ),
            VocabularyError::TooManyTokens { tokens } => {
                write!(f, "{tokens} tokens; at most 2^32 - 1 fit the ids")
            }
            VocabularyError::TooManyUnusedIds { unused } => write!(
                f,
                "{unused} tokens are empty (ids no token has); at most {MAX_UNUSED_IDS} may be"
            ),
        }
    }
}

impl From<VocabularyError> for PyErr {
    fn from(error: VocabularyError) -> PyErr {
        value_error(error)
    }
}

/// A pattern that does not compile raises `InvalidPattern`, a bad vocabulary ValueError.
impl From<BuildError> for PyErr {
    fn from(error: BuildError) -> PyErr {
        match error {
            BuildError::Pattern(error) => InvalidPattern::new_err(error.to_string()),
            BuildError::Vocabulary(error) => error.into(),
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::NotSpecial(text) => {
                write!(
                    f,
                    "{:?} is not a special token",
                    String::from_utf8_lossy(text)
                )
            }
            PolicyError::Matcher(error) => write!(f, "{error}"),
        }
    }
}

impl From<PolicyError> for PyErr {
    fn from(error: PolicyError) -> PyErr {
        value_error(error)
    }
}

// ---- loaded files ---------------------------------------------------------------------------

impl fmt::Display for CompatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CompatError::MergeRanks { ranks, merges } => {
                write!(
                    f,
                    "{ranks} ranks for {merges} merges; one rank per merge is needed"
                )
            }
            CompatError::UnknownScore(score) => {
                write!(f, "the unknown score is {score}; it must be finite")
            }
            CompatError::CharsmapHeader { .. } => {
                write!(f, "the charsmap is shorter than its 4-byte header")
            }
            CompatError::CharsmapSize { size, length } => {
                write!(
                    f,
                    "the charsmap's trie size {size} does not fit its {length} bytes"
                )
            }
            CompatError::PreTokenLengths { total, data } => write!(
                f,
                "the pre-token lengths add up to {total} bytes, not to the {data} bytes of the data"
            ),
            CompatError::AddedTokenIndices => write!(
                f,
                "the added tokens' pre-token indices must be in order and at most the number of \
                 pre-tokens"
            ),
            CompatError::AddedTokens(ref error) => {
                write!(f, "the added tokens cannot be matched: {error}")
            }
            CompatError::UserDefinedMatcher(ref error) => {
                write!(f, "the user-defined pieces cannot be matched: {error}")
            }
            CompatError::IdOutOfRange { what, id, tokens } => write!(
                f,
                "{what} name the id {id}, but the ids of the {tokens} tokens are 0..{}",
                tokens.saturating_sub(1)
            ),
        }
    }
}

impl From<CompatError> for PyErr {
    fn from(error: CompatError) -> PyErr {
        value_error(error)
    }
}

// ---- trainers -------------------------------------------------------------------------------

impl fmt::Display for BpeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BpeError::TooManyMerges { num_merges } => {
                write!(f, "num_merges must be below 2^32 - 256, got {num_merges}")
            }
            BpeError::TooLarge => {
                write!(
                    f,
                    "more than 2^32 - 1 pre-tokens, or a pre-token of 2^32 bytes or more"
                )
            }
        }
    }
}

impl From<BpeError> for PyErr {
    fn from(error: BpeError) -> PyErr {
        value_error(error)
    }
}

impl fmt::Display for ExtendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtendError::Bpe(error) => error.fmt(f),
            ExtendError::FirstId { first_id, tokens } => write!(
                f,
                "the first new id {first_id} is below the base's {tokens} ids, or the new ids pass 2^32 - 1"
            ),
            ExtendError::UnknownId { id } => write!(
                f,
                "the base encoder cut a pre-token into id {id}, which has no bytes in the vocabulary given"
            ),
        }
    }
}

impl From<ExtendError> for PyErr {
    fn from(error: ExtendError) -> PyErr {
        value_error(error)
    }
}

impl fmt::Display for UnigramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            UnigramError::ShrinkingFactor(factor) => {
                write!(
                    f,
                    "shrinking_factor is {factor}, expected a number in (0, 1)"
                )
            }
            UnigramError::BytesFirst => {
                write!(
                    f,
                    "pieces must start with the 256 single bytes in byte order"
                )
            }
            UnigramError::ScoreCount { pieces, scores } => {
                write!(f, "{pieces} pieces but {scores} scores")
            }
            UnigramError::BasePiece(index) => {
                write!(f, "base piece {index} is empty or repeats an earlier piece")
            }
            UnigramError::BaseScore(index) => {
                write!(f, "base piece {index} has no finite score")
            }
        }
    }
}

impl From<UnigramError> for PyErr {
    fn from(error: UnigramError) -> PyErr {
        value_error(error)
    }
}

// ---- the LP ---------------------------------------------------------------------------------

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GraphError::Length {
                input,
                got,
                expected,
            } => {
                let name = match input {
                    GraphInput::Candidates => "candidate",
                    GraphInput::LpPrices => "lp prices",
                    GraphInput::Prices => "prices",
                };
                write!(f, "{name} has {got} entries, expected {expected}")
            }
            GraphError::Prices => write!(f, "prices must be finite and >= 0"),
            GraphError::Temperature(tau) => write!(f, "tau must be finite and > 0, got {tau}"),
            GraphError::Colour(colour) => write!(f, "colour {colour} out of range"),
        }
    }
}

impl From<GraphError> for PyErr {
    fn from(error: GraphError) -> PyErr {
        value_error(error)
    }
}

impl fmt::Display for DualError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DualError::ColourTauRatio(ratio) => {
                write!(f, "colour_tau_ratio must be > 0, got {ratio}")
            }
            DualError::Graph(error) => write!(f, "{error}"),
            DualError::Gain(gain) => write!(f, "gain must be >= 0, got {gain}"),
            DualError::OtherGraph => write!(f, "this dual ascent was started on another graph"),
            DualError::StartPrice(fraction) => {
                write!(f, "the start's budget price must be finite and >= 0 price scales, got {fraction}")
            }
        }
    }
}

impl From<DualError> for PyErr {
    fn from(error: DualError) -> PyErr {
        value_error(error)
    }
}
