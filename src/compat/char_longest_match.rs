//! `CharLongestMatch`: WordPiece's greedy longest match on characters, as HF tokenizers runs it.
use super::{char_len, strings, Strings};
use crate::segment::Segmenter;

/// WordPiece's greedy longest match, with a continuation marker and one unknown token per pre-token
/// that cannot be cut or has more than `max_chars` characters.
pub struct CharLongestMatch {
    tokens: Strings,
    /// The byte length of the longest string: no longer candidate is looked up.
    longest: usize,
    continuation: Vec<u8>,
    max_chars: usize,
    unk: u32,
}

impl Segmenter for CharLongestMatch {
    fn segment(&self, pre_token: &[u8], out: &mut Vec<u32>) {
        let mut boundaries = vec![0];
        let mut at = 0;
        while at < pre_token.len() {
            at += char_len(pre_token, at);
            boundaries.push(at);
        }
        if boundaries.len() - 1 > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut key = Vec::new();
        let mut first = 0;
        while first + 1 < boundaries.len() {
            key.clear();
            if first > 0 {
                key.extend_from_slice(&self.continuation);
            }
            // Candidates end at the boundaries after `first` that keep the key within the longest
            // string, tried longest first: a step costs the longest token, not the pre-token.
            let (prefix, start) = (key.len(), boundaries[first]);
            let ends = boundaries[first + 1..]
                .partition_point(|&end| prefix + end - start <= self.longest);
            key.extend_from_slice(&pre_token[start..boundaries[first + ends]]);
            let mut found = None;
            for last in (first + 1..=first + ends).rev() {
                key.truncate(prefix + boundaries[last] - start);
                if let Some((id, _)) = self.tokens.get(&key) {
                    found = Some((id, last));
                    break;
                }
            }
            match found {
                Some((id, last)) => {
                    out.push(id);
                    first = last;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

impl CharLongestMatch {
    /// `strings` are the (text, id) pairs of the vocabulary, continuation forms included (e.g.
    /// "##ing" with `continuation` "##"); a pre-token of more than `max_chars` characters is `unk`.
    pub fn new(
        strings: Vec<(Vec<u8>, u32)>,
        continuation: Vec<u8>,
        max_chars: usize,
        unk: u32,
    ) -> Self {
        let entries: Vec<(Vec<u8>, u32, f64)> =
            strings.into_iter().map(|(t, id)| (t, id, 0.0)).collect();
        CharLongestMatch {
            tokens: self::strings(&entries),
            longest: entries.iter().map(|(text, _, _)| text.len()).max().unwrap_or(0),
            continuation,
            max_chars,
            unk,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_match_gives_one_unknown_for_an_uncuttable_pre_token() {
        let strings = ["un", "##able", "##a", "x"]
            .iter()
            .enumerate()
            .map(|(id, text)| (text.as_bytes().to_vec(), id as u32))
            .collect();
        let segmenter = CharLongestMatch::new(strings, b"##".to_vec(), 100, 99);
        let mut out = Vec::new();
        segmenter.segment(b"unable", &mut out);
        segmenter.segment(b"unabz", &mut out);
        assert_eq!(out, vec![0, 1, 99]);
    }
}
