//! The trainers, each on counted pre-tokens (`count::PreTokenCounts`): BPE learns merges (and
//! continues a base's, `extend`), WordPiece merges by a likelihood score, Unigram prunes a seed
//! vocabulary by EM.
pub mod bpe;
pub mod extend;
pub mod unigram;
pub mod wordpiece;
