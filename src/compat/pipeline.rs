//! Whole documents through the Rust stages of a loaded pipeline: SentencePiece's normaliser
//! and segmenter, or the pre-tokens an HF pipeline's Python stages leave, with its added tokens.
use super::sentencepiece::{Part, SentencePieceNormalizer};
use super::CompatError;
use crate::segment::encoder::Encoder;

/// A document as a loaded pipeline's Python stages leave it: pre-tokens back to back in `data`, cut
/// at `lengths`, and the added tokens found in it as (index of the pre-token they precede, id), in
/// order (an index equal to the number of pre-tokens puts the token at the end).
pub struct PreTokens<'a> {
    data: &'a [u8],
    lengths: &'a [usize],
    added: &'a [(usize, u32)],
}

impl<'a> PreTokens<'a> {
    /// Checks that the lengths add up to the data and that the added tokens' pre-token indices are
    /// in order and at most the number of pre-tokens.
    pub fn new(
        data: &'a [u8],
        lengths: &'a [usize],
        added: &'a [(usize, u32)],
    ) -> Result<Self, CompatError> {
        let total = lengths.iter().sum::<usize>();
        if total != data.len() {
            return Err(CompatError::PreTokenLengths {
                total,
                data: data.len(),
            });
        }
        let in_order = added.windows(2).all(|pair| pair[0].0 <= pair[1].0);
        if !in_order
            || added
                .last()
                .is_some_and(|&(before, _)| before > lengths.len())
        {
            return Err(CompatError::AddedTokenIndices);
        }
        Ok(PreTokens {
            data,
            lengths,
            added,
        })
    }
}

impl Encoder {
    /// SentencePiece's ids of `text`: `normalizer`'s output cut at its user-defined pieces, the
    /// stretches between them segmented whole, as SentencePiece does. The normaliser writes
    /// U+FFFD for invalid input bytes, so the stretches skip the pre-tokeniser's UTF-8 check.
    pub fn sentencepiece_ids(&self, normalizer: &SentencePieceNormalizer, text: &[u8]) -> Vec<u32> {
        let normalized = normalizer.normalize_bytes(text);
        let mut out = Vec::with_capacity(normalized.len() / 2);
        normalizer.split_user_defined(&normalized, |part| match part {
            Part::Text(stretch) => self.segment_pre_token_into(stretch, &mut out),
            Part::UserDefined(id) => out.push(id),
        });
        out
    }

    /// The ids of a pre-tokenised document: each pre-token through the core pre-tokeniser (the
    /// pipeline's regex, if it runs here) and the segmenter, the added tokens in their places.
    pub fn encode_pre_tokens(&self, document: &PreTokens) -> Vec<u32> {
        let mut out = Vec::with_capacity(document.data.len() / 2);
        let mut added = document.added.iter().peekable();
        let mut start = 0;
        for (index, &length) in document.lengths.iter().enumerate() {
            while let Some(&(_, id)) = added.next_if(|&&(before, _)| before == index) {
                out.push(id);
            }
            if length > 0 {
                self.encode_ordinary_into(&document.data[start..start + length], &mut out);
            }
            start += length;
        }
        out.extend(added.map(|&(_, id)| id));
        out
    }
}
