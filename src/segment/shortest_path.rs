//! The `shortest_path` segmenter (ConvexTok, PathPiece): cut a pre-token into the fewest tokens.
//!
//! Tie-break, deterministic and independent of token ids: among all fewest-token segmentations,
//! take at each position, from the left, the longest token that still leads to a fewest-token
//! segmentation (the lexicographically greatest sequence of token lengths).
//!
//! Cost: a trie walk from every start position, O(n x longest token) for a piece of n bytes.
use numpy::PyReadonlyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::Segmenter;

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
    pub fn new(vocab: &[Vec<u8>]) -> Result<Self, String> {
        let mut children: FxHashMap<u64, u32> = FxHashMap::default();
        let mut token_at = vec![NONE];
        for (id, token) in vocab.iter().enumerate() {
            if token.is_empty() {
                return Err(format!("token {id} is empty"));
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
                _ => return Err(format!("the vocabulary lacks the single byte {byte:#04x}")),
            }
        }
        Ok(ShortestPath { children, token_at })
    }

    /// For each start position, the fewest tokens covering piece[i..] (`best`) and the token
    /// (id, length) that starts the tie-broken segmentation there (`choice`).
    fn solve(&self, piece: &[u8], best: &mut Vec<u32>, choice: &mut Vec<(u32, u32)>) {
        let n = piece.len();
        best.clear();
        best.resize(n + 1, u32::MAX);
        choice.clear();
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

impl Segmenter for ShortestPath {
    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        let (mut best, mut choice) = (Vec::new(), Vec::new());
        self.solve(piece, &mut best, &mut choice);
        let mut i = 0;
        while i < piece.len() {
            let (id, len) = choice[i];
            out.push(id);
            i += len as usize;
        }
    }
}

/// Standalone Python access to the segmenter (certification and tests).
#[pyclass(name = "ShortestPathSegmenter", module = "polytok._core", frozen)]
pub struct PyShortestPath {
    inner: ShortestPath,
}

#[pymethods]
impl PyShortestPath {
    #[new]
    fn new(vocab: Vec<Vec<u8>>) -> PyResult<Self> {
        Ok(PyShortestPath { inner: ShortestPath::new(&vocab).map_err(PyValueError::new_err)? })
    }

    /// Token ids of the tie-broken fewest-token segmentation of one pre-token.
    fn segment(&self, piece: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.inner.segment(piece, &mut out);
        out
    }

    /// Sum over counted pre-tokens (WordCounts arrays) of count x fewest tokens.
    fn count_words(
        &self,
        py: Python<'_>,
        data: &[u8],
        offsets: PyReadonlyArray1<'_, i64>,
        counts: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<u64> {
        let offsets = offsets.as_slice()?;
        let counts = counts.as_slice()?;
        if offsets.len() != counts.len() + 1 {
            return Err(PyValueError::new_err("offsets must have one entry more than counts"));
        }
        if offsets.windows(2).any(|p| p[0] > p[1]) || offsets.iter().any(|&o| o < 0 || o as usize > data.len()) {
            return Err(PyValueError::new_err("offsets must rise from 0 to len(data)"));
        }
        let inner = &self.inner;
        Ok(py.detach(|| {
            (0..counts.len())
                .into_par_iter()
                .map_init(
                    || (Vec::new(), Vec::new()),
                    |(best, choice), w| {
                        let piece = &data[offsets[w] as usize..offsets[w + 1] as usize];
                        inner.solve(piece, best, choice);
                        best[0] as u64 * counts[w]
                    },
                )
                .sum()
        }))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyShortestPath>()?;
    Ok(())
}

#[pymethods]
impl crate::segment::encoder::Encoder {
    /// A shortest-path encoder (ConvexTok): fewest tokens per pre-token, deterministic ties.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocab, special_tokens))]
    fn shortest_path(
        pattern: Option<&str>,
        vocab: Vec<Vec<u8>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> PyResult<Self> {
        let segmenter = ShortestPath::new(&vocab).map_err(PyValueError::new_err)?;
        Ok(Self::from_parts(pattern, Box::new(segmenter), vocab, special_tokens)?)
    }
}
