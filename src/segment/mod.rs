//! Segmenters: how a pre-token is cut into vocabulary ids. One file per kind; the `Encoder`
//! (pre-tokeniser + segmenter + special tokens) is the Python-facing object that drives them.
use pyo3::prelude::*;

pub mod dropout;
pub mod encoder;
pub mod longest_match;
pub mod merges;
pub mod rng;
pub mod shortest_path;
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

impl RandomKind {
    pub fn name(self) -> &'static str {
        match self {
            RandomKind::Sample => "sample",
            RandomKind::Dropout => "dropout",
        }
    }
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    encoder::register(m)?;
    Ok(())
}
