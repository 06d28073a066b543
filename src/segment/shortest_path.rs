//! The `shortest_path` segmenter (ConvexTok, PathPiece): cut a pre-token into the fewest tokens.
//!
//! Tie-break, deterministic and independent of token ids: among all fewest-token segmentations,
//! take at each position, from the left, the longest token that still leads to a fewest-token
//! segmentation (the lexicographically greatest sequence of token lengths).
//!
//! Cost: a trie walk from every start position, O(n x longest token) for a piece of n bytes.
use std::cell::Cell;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::scratch::{reserve_huge, with_buffer};
use super::{ByteRole, Segmenter, VocabularyError};
use crate::count::PreTokenCounts;

const NONE: u32 = u32::MAX;

pub struct ShortestPath {
    /// Trie transitions: (node << 8 | byte) -> child node. Node 0 is the root.
    children: FxHashMap<u64, u32>,
    /// Token id ending at each trie node, or NONE.
    token_at: Vec<u32>,
}

impl ShortestPath {
    /// Builds from `vocab[id] = bytes`; every single byte must be a token so that any piece can
    /// be segmented. Where a byte string appears twice, the lower id wins.
    pub fn new(vocab: &[Vec<u8>]) -> Result<Self, VocabularyError> {
        let mut children: FxHashMap<u64, u32> = FxHashMap::default();
        let mut token_at = vec![NONE];
        for (id, token) in vocab.iter().enumerate() {
            if token.is_empty() {
                continue; // an id no token has
            }
            let mut node = 0u32;
            for &byte in token {
                let key = (node as u64) << 8 | byte as u64;
                let next = token_at.len() as u32;
                node = *children.entry(key).or_insert(next);
                if node == next {
                    token_at.push(NONE);
                }
            }
            if token_at[node as usize] == NONE {
                token_at[node as usize] = id as u32;
            }
        }
        for byte in 0..=255u8 {
            match children.get(&(byte as u64)) {
                Some(&node) if token_at[node as usize] != NONE => {}
                _ => {
                    return Err(VocabularyError::MissingByte {
                        byte,
                        role: ByteRole::Any,
                    })
                }
            }
        }
        Ok(ShortestPath { children, token_at })
    }

    /// For each start position, the fewest tokens covering piece[i..] (`best`) and the token
    /// (id, length) that starts the tie-broken segmentation there (`choice`).
    fn solve(&self, piece: &[u8], best: &mut Vec<u32>, choice: &mut Vec<(u32, u32)>) {
        let n = piece.len();
        best.clear();
        reserve_huge(best, n + 1);
        best.resize(n + 1, u32::MAX);
        choice.clear();
        reserve_huge(choice, n + 1);
        choice.resize(n + 1, (NONE, 0));
        best[n] = 0;
        for i in (0..n).rev() {
            let mut node = 0u32;
            for (k, &byte) in piece[i..].iter().enumerate() {
                match self.children.get(&((node as u64) << 8 | byte as u64)) {
                    None => break,
                    Some(&child) => node = child,
                }
                let id = self.token_at[node as usize];
                // Longer tokens come later, so `<=` keeps the longest among equal counts.
                if id != NONE && best[i + k + 1].saturating_add(1) <= best[i] {
                    best[i] = best[i + k + 1] + 1;
                    choice[i] = (id, (k + 1) as u32);
                }
            }
        }
    }
}

impl ShortestPath {
    /// Sum over counted pre-tokens of count x fewest tokens, in parallel on the current pool.
    pub fn count_tokens(&self, counts: &PreTokenCounts) -> u64 {
        (0..counts.len())
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(best, choice), w| {
                    self.solve(counts.pre_token(w), best, choice);
                    best[0] as u64 * counts.counts()[w]
                },
            )
            .sum()
    }
}

impl Segmenter for ShortestPath {
    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        thread_local! {
            static BEST: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
            static CHOICE: Cell<Vec<(u32, u32)>> = const { Cell::new(Vec::new()) };
        }
        with_buffer(&BEST, |best| {
            with_buffer(&CHOICE, |choice| {
                self.solve(piece, best, choice);
                let mut i = 0;
                while i < piece.len() {
                    let (id, len) = choice[i];
                    out.push(id);
                    i += len as usize;
                }
            })
        })
    }
}
