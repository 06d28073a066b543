//! Segmenters: how a pre-token is cut into vocabulary ids. One file per kind; the `Encoder`
//! (pre-tokeniser + segmenter + special tokens) drives them over whole texts.
pub mod cache;
pub mod dropout;
pub mod encoder;
pub mod longest_match;
pub mod merges;
pub mod rng;
pub mod scratch;
pub mod shortest_path;
pub mod utf8;
pub mod viterbi;

use rng::SplitMix64;

/// Cuts one pre-token (never empty, never containing a special token) into token ids.
///
/// Subword regularisation and n-best lists are optional abilities: a segmenter that has one
/// returns itself from `random` or `ranked`, so the `Encoder` can tell what is supported before
/// it starts (and say so) instead of discovering it piece by piece.
pub trait Segmenter: Send + Sync {
    fn segment(&self, piece: &[u8], out: &mut Vec<u32>);

    /// This segmenter's randomised cut, if it has one.
    fn random(&self) -> Option<&dyn RandomSegmenter> {
        None
    }

    /// This segmenter's ranking of all cuts, if it has one.
    fn ranked(&self) -> Option<&dyn RankedSegmenter> {
        None
    }
}

/// What the `strength` of a random cut means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RandomKind {
    /// Unigram subword sampling: a cut drawn with probability ∝ P(cut)^strength (alpha).
    Sample,
    /// BPE-dropout: every applicable merge is skipped with probability `strength` (p).
    Dropout,
}

/// A segmenter that can draw a random cut of a pre-token (subword regularisation).
pub trait RandomSegmenter: Sync {
    fn kind(&self) -> RandomKind;

    /// Appends a random cut of `piece` drawn from `rng`; `strength` as `kind` says.
    fn segment_random(&self, piece: &[u8], strength: f64, rng: &mut SplitMix64, out: &mut Vec<u32>);
}

/// A segmenter that scores cuts and can list the best ones.
pub trait RankedSegmenter: Sync {
    /// The `n` best distinct cuts of `piece` with their scores, best first.
    fn nbest(&self, piece: &[u8], n: usize) -> Vec<(Vec<u32>, f64)>;
}

/// Which tokens a single byte must exist as (see `VocabularyError::MissingByte`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteRole {
    /// Anywhere in a pre-token.
    Any,
    /// As the first token of a pre-token (longest match with a continuation marker).
    WordInitial,
    /// As a later token of a pre-token (spelled with the continuation marker).
    Continuation,
}

/// Why a vocabulary (or merge list) cannot make a segmenter or an encoder; ids and bytes as
/// found, for the caller to word.
#[derive(Clone, Debug, PartialEq)]
pub enum VocabularyError {
    /// Token `id` has no bytes.
    EmptyToken { id: usize },
    /// Token `id` has the bytes of an earlier token (where ids are ranks, they must be unique).
    RepeatedToken { id: usize },
    /// Merge `rank` joins the same pair (left, right) as an earlier merge.
    RepeatedMerge { rank: usize, left: u32, right: u32 },
    /// No token is the single byte `byte` in `role`: some input could not be cut.
    MissingByte { byte: u8, role: ByteRole },
    /// The numbers of tokens and of scores differ.
    ScoreCount { tokens: usize, scores: usize },
    /// The score of token `id` is not a finite number.
    NonFiniteScore { id: usize, score: f64 },
    /// The special token with id `id` has no bytes.
    EmptySpecialToken { id: u32 },
    /// Special token id `id` is an ordinary token's id.
    SpecialIdTaken { id: u32 },
    /// Special token id `id` is not below `limit`: the ordinary and special ids together leave
    /// more than `MAX_UNUSED_IDS` ids unused (the id table is sized by the largest id).
    SpecialIdOutOfRange { id: u32, limit: usize },
    /// Merge `rank` names the id `id`, which is no token (there are `tokens` tokens).
    MergeId { rank: usize, id: u32, tokens: usize },
    /// More tokens than ids a u32 holds.
    TooManyTokens { tokens: usize },
    /// More than `MAX_UNUSED_IDS` empty tokens (ids no ordinary token has).
    TooManyUnusedIds { unused: usize },
}

/// The most ids below the largest one that may be no token (ids between the ordinary tokens and
/// the special ones, or between special ones): tiktoken's cl100k leaves 16 (100256 and
/// 100261..100275), o200k 19 (199998 and 200000..200017). An encoder's id table has one entry
/// per id, so this keeps it within the tokens given plus this many.
pub const MAX_UNUSED_IDS: usize = 1024;
