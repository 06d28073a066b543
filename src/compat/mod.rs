//! What reading other libraries' files (HF tokenizer.json, SentencePiece .model) needs in the
//! core: their segmenters, which work on characters, and SentencePiece's normaliser.
//!
//! Their vocabularies are character strings, not bytes: a pre-token starts as its UTF-8 characters,
//! a character outside the vocabulary becomes its `<0xXX>` byte tokens (byte fallback) or the
//! unknown token, and the rules follow the original libraries exactly:
//! - `CharMerges` (HF BPE and SentencePiece BPE): repeatedly join the adjacent pair of lowest
//!   rank, leftmost first;
//! - `CharViterbi` (Unigram): the segmentation of highest total score; a character no token
//!   starts with costs the unknown score; earlier candidates win ties;
//! - `CharLongestMatch` (WordPiece): the longest vocabulary prefix, then the longest continuation
//!   (with the `##` marker), and the whole pre-token is unknown if a step finds nothing.
//!
//! Each pre-token arrives as its UTF-8 bytes; bytes that are not UTF-8 count as
//! one-byte characters (they can only reach the vocabulary through byte fallback). The files:
//! `trie.rs` (the double-array trie of the lattice strings), one file per segmenter,
//! `added_tokens.rs` (HF's added tokens found in a text),
//! `sentencepiece.rs` (the normaliser) and `pipeline.rs` (whole documents through a loaded
//! pipeline's Rust stages).
use rustc_hash::FxHashMap;

use crate::segment::utf8::utf8_char_len;

pub mod added_tokens;
pub mod char_longest_match;
pub mod char_merges;
pub mod char_viterbi;
pub mod pipeline;
pub mod sentencepiece;
mod trie;

const NONE: u32 = u32::MAX;

/// Why a loaded file's segmenter, normaliser or pre-tokenised document is not well formed.
#[derive(Clone, Debug, PartialEq)]
pub enum CompatError {
    /// Explicit merge ranks were given, but not one per merge.
    MergeRanks { ranks: usize, merges: usize },
    /// The score of an unknown character is not a finite number.
    UnknownScore(f64),
    /// The precompiled charsmap is shorter than its 4-byte header.
    CharsmapHeader { length: usize },
    /// The charsmap's trie size (from its header) does not fit the charsmap.
    CharsmapSize { size: usize, length: usize },
    /// A document's pre-token lengths do not add up to its data.
    PreTokenLengths { total: usize, data: usize },
    /// A document's added tokens are not in pre-token order, or point past its last pre-token.
    AddedTokenIndices,
    /// The added tokens' matcher could not be built (the error's words).
    AddedTokens(String),
    /// The matcher of the user-defined pieces could not be built (the error's words).
    UserDefinedMatcher(String),
    /// An id given for `what` (e.g. "merges") is not below the number of tokens.
    IdOutOfRange { what: &'static str, id: u32, tokens: usize },
}

/// Err for the first of `ids` (given for `what`) that is not the id of one of `tokens` tokens:
/// a segmenter's ids index the encoder's tables, so each must be a token.
pub fn check_ids(
    what: &'static str,
    ids: impl IntoIterator<Item = u32>,
    tokens: usize,
) -> Result<(), CompatError> {
    match ids.into_iter().find(|&id| id as usize >= tokens) {
        Some(id) => Err(CompatError::IdOutOfRange { what, id, tokens }),
        None => Ok(()),
    }
}

/// The byte length of the character starting at `text[at]` (1 for a byte that starts none).
#[inline]
pub(crate) fn char_len(text: &[u8], at: usize) -> usize {
    utf8_char_len(text, at).unwrap_or(1)
}

/// What becomes of characters outside the vocabulary: their byte tokens, else the unknown token.
pub struct Unknowns {
    /// `<0xXX>` token of each byte, NONE where the vocabulary has none.
    byte_ids: [u32; 256],
    byte_fallback: bool,
    pub(crate) unk: Option<u32>,
    /// Consecutive unknown characters become one unknown token.
    pub(crate) fuse_unk: bool,
}

impl Unknowns {
    pub fn new(
        byte_tokens: &[(u8, u32)],
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
    ) -> Self {
        let mut byte_ids = [NONE; 256];
        for &(byte, id) in byte_tokens {
            byte_ids[byte as usize] = id;
        }
        Unknowns {
            byte_ids,
            byte_fallback,
            unk,
            fuse_unk,
        }
    }

    /// The byte tokens of `text`, if byte fallback is on and every byte has one.
    pub(crate) fn bytes_of(&self, text: &[u8]) -> Option<Vec<u32>> {
        if !self.byte_fallback {
            return None;
        }
        text.iter()
            .map(|&b| Some(self.byte_ids[b as usize]).filter(|&id| id != NONE))
            .collect()
    }
}

/// A token map from strings to (id, score).
#[derive(Default)]
pub(crate) struct Strings {
    ids: FxHashMap<Box<[u8]>, (u32, f64)>,
}

impl Strings {
    pub(crate) fn insert(&mut self, text: &[u8], id: u32, score: f64) {
        self.ids.entry(text.into()).or_insert((id, score));
    }

    #[inline]
    pub(crate) fn get(&self, text: &[u8]) -> Option<(u32, f64)> {
        self.ids.get(text).copied()
    }
}

/// The string map of (text, id, score) entries; the first of two equal texts keeps its id.
pub(crate) fn strings(entries: &[(Vec<u8>, u32, f64)]) -> Strings {
    let mut map = Strings::default();
    for (text, id, score) in entries {
        map.insert(text, *id, *score);
    }
    map
}

/// A path score: SentencePiece sums in f32, HF in f64, and the last bit decides ties.
pub trait Score: Copy + PartialOrd + std::ops::Add<Output = Self> + Send + Sync + 'static {
    const ZERO: Self;
    const NEG_INFINITY: Self;
    fn from_f64(value: f64) -> Self;
}

impl Score for f32 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl Score for f64 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn from_f64(value: f64) -> Self {
        value
    }
}
