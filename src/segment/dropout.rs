//! BPE-dropout (Provilkov et al., 2020) for the `merges` segmenter: while replaying the merges,
//! every applicable merge is skipped with probability p at every step, so one pre-token gets
//! different (always valid) segmentations from one call to the next. p = 0 is ordinary BPE,
//! p = 1 leaves the single bytes. Seeded, so a given seed always gives the same cut.
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

use super::rng::SplitMix64;

/// Segments `piece` by BPE with dropout. `merge_of(piece, start, end, left, right)` gives the
/// (rank, merged id) of joining tokens `left` and `right`, which cover piece[start..end]
/// together, or None when they do not join; lower ranks apply first. (Both a merge list and
/// tiktoken's rank-by-bytes rule fit this shape.) Starts from single bytes (ids 0..255). At each
/// step the lowest-rank adjacent pair that survives its coin flip is merged at its leftmost
/// surviving position; the cut is final when every candidate drops.
pub fn segment_with_dropout(
    piece: &[u8],
    merge_of: impl Fn(&[u8], usize, usize, u32, u32) -> Option<(u32, u32)>,
    dropout: f64,
    rng: &mut SplitMix64,
    out: &mut Vec<u32>,
) {
    let mut symbols: Vec<u32> = piece.iter().map(|&b| b as u32).collect();
    let mut starts: Vec<usize> = (0..piece.len()).collect();
    loop {
        let mut best: Option<(u32, usize, u32)> = None; // (rank, position, merged id)
        for position in 0..symbols.len().saturating_sub(1) {
            let end = starts.get(position + 2).copied().unwrap_or(piece.len());
            let joined = merge_of(piece, starts[position], end, symbols[position], symbols[position + 1]);
            if let Some((rank, merged)) = joined {
                // One flip per applicable pair occurrence per step.
                if dropout > 0.0 && rng.next_f64() < dropout {
                    continue;
                }
                if best.map_or(true, |(best_rank, _, _)| rank < best_rank) {
                    best = Some((rank, position, merged));
                }
            }
        }
        match best {
            Some((_, position, merged)) => {
                symbols[position] = merged;
                symbols.remove(position + 1);
                starts.remove(position + 1);
            }
            None => break,
        }
    }
    out.extend_from_slice(&symbols);
}

/// How a `DropoutMerges` joins two tokens.
enum Rule {
    /// A merge list: (left, right) -> (rank, merged id).
    Pairs(FxHashMap<(u32, u32), (u32, u32)>),
    /// tiktoken's rule: a pair joins if its bytes are a token; rank and merged id are that id.
    Bytes(FxHashMap<Vec<u8>, u32>),
}

/// BPE with dropout over a merge list or tiktoken-style ranks, callable from Python until the
/// tokenizer's `Encoder` exposes dropout itself.
#[pyclass(name = "DropoutMerges", module = "polytok._core", frozen)]
pub struct PyDropoutMerges {
    rule: Rule,
}

#[pymethods]
impl PyDropoutMerges {
    /// From a merge list: ids 0..255 are bytes, merge i creates id 256 + i.
    #[new]
    fn new(merges: Vec<(u32, u32)>) -> Self {
        let mut table = FxHashMap::default();
        for (rank, pair) in merges.into_iter().enumerate() {
            table.entry(pair).or_insert((rank as u32, 256 + rank as u32));
        }
        PyDropoutMerges { rule: Rule::Pairs(table) }
    }

    /// From tiktoken-style ranks: `tokens[id]` are the bytes of id, and the id is the rank.
    #[staticmethod]
    fn from_ranks(tokens: Vec<Vec<u8>>) -> Self {
        let mut table = FxHashMap::default();
        for (id, token) in tokens.into_iter().enumerate() {
            table.entry(token).or_insert(id as u32);
        }
        PyDropoutMerges { rule: Rule::Bytes(table) }
    }

    /// Each pre-token in `pieces` segmented with dropout `p`, drawing from one generator seeded
    /// with `seed`; the ids of all pieces, concatenated.
    fn segment(&self, py: Python<'_>, pieces: Vec<Vec<u8>>, p: f64, seed: u64) -> Vec<u32> {
        py.detach(|| {
            let mut rng = SplitMix64::new(seed);
            let mut out = Vec::new();
            for piece in &pieces {
                match &self.rule {
                    Rule::Pairs(table) => segment_with_dropout(
                        piece, |_, _, _, a, b| table.get(&(a, b)).copied(), p, &mut rng, &mut out,
                    ),
                    Rule::Bytes(table) => segment_with_dropout(
                        piece, |text, start, end, _, _| table.get(&text[start..end]).map(|&id| (id, id)), p, &mut rng, &mut out,
                    ),
                }
            }
            out
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDropoutMerges>()?;
    Ok(())
}
