//! `CharViterbi`: Unigram's best segmentation on characters, as HF tokenizers and
//! SentencePiece compute it (SentencePiece sums scores in f32, HF in f64).
use super::trie::Trie;
use super::{char_len, CompatError, Score, Unknowns, NONE};
use crate::segment::Segmenter;

/// Unigram's best segmentation over the lattice of vocabulary strings, summing scores in `S`.
pub struct CharViterbi<S> {
    lattice: Trie<S>,
    unknowns: Unknowns,
    unk_score: S,
    /// Every score is at most `SMALL` in size, so no path's sum overflows to -inf (nor is NaN).
    small_scores: bool,
}

/// Scores up to this size keep any sum of 2^32 of them far from overflowing, in f32 too.
const SMALL: f64 = 1e20;

#[derive(Clone, Copy)]
struct Best<S> {
    score: S,
    /// Where the best path's last token starts; NONE: no path reaches here yet.
    start: u32,
    id: u32,
}

impl<S: Score> CharViterbi<S> {
    /// `lattice` holds the (text, id, score) entries a pre-token can be cut into; `unk_score`
    /// (finite) is the score of an unknown character.
    pub fn new(
        lattice: &[(Vec<u8>, u32, f64)],
        unknowns: Unknowns,
        unk_score: f64,
    ) -> Result<Self, CompatError> {
        if !unk_score.is_finite() {
            return Err(CompatError::UnknownScore(unk_score));
        }
        Ok(CharViterbi {
            lattice: Trie::new(lattice),
            unknowns,
            unk_score: S::from_f64(unk_score),
            small_scores: lattice
                .iter()
                .map(|&(_, _, score)| score)
                .chain([unk_score])
                .all(|score| score.abs() <= SMALL),
        })
    }

    /// Forward pass: `best[end]` becomes the best path to each character boundary (unreached
    /// positions start at score -inf). A candidate wins if it scores more, or if it is a token
    /// and nothing reached its end yet; with `SMALL_SCORES` every token's candidate is finite,
    /// so "more than -inf" says both. A match that ends inside a character is written to a
    /// position no path starts from or goes back through (both only visit boundaries), so it
    /// never counts and needs no check.
    #[inline(always)]
    fn forward<const SMALL_SCORES: bool>(&self, pre_token: &[u8], best: &mut [Best<S>]) {
        let n = pre_token.len();
        let slots = &self.lattice.slots;
        let root_base = slots[0].base;
        let mut start = 0;
        while start < n {
            let so_far = best[start].score;
            let first_len = char_len(pre_token, start);
            let mut has_single_character = false;
            // Candidates in order of length, as the trie's prefix search yields them.
            let mut node = 0u32;
            let mut base = root_base;
            let mut end = start;
            while end < n {
                let next = base + pre_token[end] as u32;
                let slot = &slots[next as usize];
                if slot.parent != node {
                    break;
                }
                node = next;
                base = slot.base;
                end += 1;
                let candidate = so_far + slot.score;
                let target = &mut best[end];
                let wins = candidate > target.score
                    || (!SMALL_SCORES && slot.id != NONE && target.start == NONE);
                if wins {
                    *target = Best {
                        score: candidate,
                        start: start as u32,
                        id: slot.id,
                    };
                }
                has_single_character |= (slot.id != NONE) & (end - start == first_len);
            }
            if !has_single_character {
                let candidate = so_far + self.unk_score;
                let target = &mut best[start + first_len];
                if target.start == NONE || candidate > target.score {
                    *target = Best {
                        score: candidate,
                        start: start as u32,
                        id: NONE,
                    };
                }
            }
            start += first_len;
        }
    }
}

impl<S: Score> Segmenter for CharViterbi<S> {
    fn segment(&self, pre_token: &[u8], out: &mut Vec<u32>) {
        let n = pre_token.len();
        if n >= NONE as usize {
            // Positions are u32: a pre-token of 4 GiB or more (whose lattice alone would take 50 GB)
            // is cut in two at a character boundary.
            let half = (n / 2..n)
                .find(|&at| pre_token[at] & 0xc0 != 0x80)
                .unwrap_or(n / 2);
            self.segment(&pre_token[..half], out);
            self.segment(&pre_token[half..], out);
            return;
        }
        let mut best = vec![
            Best {
                score: S::NEG_INFINITY,
                start: NONE,
                id: NONE
            };
            n + 1
        ];
        best[0] = Best {
            score: S::ZERO,
            start: 0,
            id: NONE,
        };
        if self.small_scores {
            self.forward::<true>(pre_token, &mut best);
        } else {
            self.forward::<false>(pre_token, &mut best);
        }
        // Back from the end; NONE marks an unknown span.
        let mut path: Vec<(usize, usize, u32)> = Vec::new();
        let mut end = n;
        while end > 0 {
            let node = best[end];
            path.push((node.start as usize, end, node.id));
            end = node.start as usize;
        }
        path.reverse();
        let mut i = 0;
        while i < path.len() {
            let (start, mut end, id) = path[i];
            i += 1;
            if id != NONE {
                out.push(id);
                continue;
            }
            if self.unknowns.fuse_unk {
                while i < path.len() && path[i].2 == NONE {
                    end = path[i].1;
                    i += 1;
                }
            }
            match self.unknowns.bytes_of(&pre_token[start..end]) {
                Some(bytes) => out.extend(bytes),
                None => out.push(self.unknowns.unk.unwrap_or(NONE)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lattice string that is half a character matches inside that character, and the
    /// match must not count; the same bytes as two invalid one-byte characters are its match.
    #[test]
    fn viterbi_matches_only_whole_characters() {
        // The half of 中 scores best; then an unknown byte (-0.5) would beat 中 (-1.375).
        let lattice: Vec<(Vec<u8>, u32, f64)> = vec![
            ("a".into(), 0, -1.0),
            ("中".into(), 1, -1.375),
            ("中".as_bytes()[..2].to_vec(), 2, -0.001),
        ];
        let segmenter =
            CharViterbi::<f32>::new(&lattice, Unknowns::new(&[], false, Some(99), true), -0.5)
                .unwrap();
        let mut out = Vec::new();
        segmenter.segment(
            &["中a".as_bytes(), b"\xe4\xb8", "中".as_bytes()].concat(),
            &mut out,
        );
        assert_eq!(out, vec![1, 0, 2, 1]);
    }

    /// A token whose score is -inf (or so large that sums overflow) is still taken when it
    /// is the only way through, as SentencePiece takes it: such lattices use the checked walk.
    #[test]
    fn viterbi_takes_the_only_path_whatever_its_score() {
        let lattice: Vec<(Vec<u8>, u32, f64)> = vec![
            ("a".into(), 0, f64::NEG_INFINITY),
            ("b".into(), 1, -1e38),
            ("ab".into(), 2, -3e38),
        ];
        let segmenter =
            CharViterbi::<f32>::new(&lattice, Unknowns::new(&[], false, Some(99), true), -1.0)
                .unwrap();
        assert!(!segmenter.small_scores);
        let mut out = Vec::new();
        segmenter.segment(b"aabbab", &mut out);
        // Every path scores -inf; at each end the first candidate to arrive stays.
        assert_eq!(out, vec![0, 2, 1, 2]);
        let small: Vec<(Vec<u8>, u32, f64)> =
            vec![("a".into(), 0, -1e20), ("ab".into(), 1, -0.5e20)];
        assert!(
            CharViterbi::<f32>::new(&small, Unknowns::new(&[], false, Some(99), true), -1.0)
                .unwrap()
                .small_scores
        );
    }
}
