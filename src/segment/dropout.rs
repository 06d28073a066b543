//! BPE-dropout (Provilkov et al., 2020) for the `merges` segmenter: while replaying the merges,
//! every applicable merge is skipped with probability p at every step, so one pre-token gets
//! different (always valid) segmentations from one call to the next. p = 0 is ordinary BPE,
//! p = 1 leaves the single bytes. Seeded, so a given seed always gives the same cut.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::rng::SplitMix64;

/// Segments `piece` by BPE with dropout. `merge_of(piece, start, end, left, right)` gives the
/// (rank, merged id) of joining tokens `left` and `right`, which cover piece[start..end]
/// together, or None when they do not join; lower ranks apply first. (Both a merge list and
/// tiktoken's rank-by-bytes rule fit this shape.) Starts from single bytes, `byte_ids[b]` being
/// the id of byte b. At each step the lowest-rank adjacent pair that survives its coin flip is
/// merged at its leftmost surviving position; the cut is final when every candidate drops.
///
/// Flipping every candidate and taking the best survivor is the same draw as trying candidates
/// in (rank, position) order until one survives, which a heap does in O(n log n) per piece
/// instead of a rescan of the whole piece per merge (quadratic on long pieces). Candidates that
/// dropped go back on the heap after the next merge: each step flips them anew.
pub fn segment_with_dropout(
    piece: &[u8],
    byte_ids: &[u32; 256],
    merge_of: impl Fn(&[u8], usize, usize, u32, u32) -> Option<(u32, u32)>,
    dropout: f64,
    rng: &mut SplitMix64,
    out: &mut Vec<u32>,
) {
    let n = piece.len();
    // Tokens form a linked list indexed by their start byte.
    let mut ids: Vec<u32> = piece.iter().map(|&b| byte_ids[b as usize]).collect();
    let mut next: Vec<usize> = (1..=n).collect();
    let mut previous: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    let join_at = |i: usize, next: &[usize], ids: &[u32]| -> Option<(u32, u32)> {
        let right = next[i];
        if right >= n {
            return None;
        }
        merge_of(piece, i, next[right], ids[i], ids[right])
    };
    // joins[i]: how the token at i joins its right neighbour now; a heap entry (rank, i) whose
    // rank no longer matches is stale (a merge changed that pair) and is skipped when popped.
    let mut joins: Vec<Option<(u32, u32)>> = (0..n).map(|i| join_at(i, &next, &ids)).collect();
    let mut heap: BinaryHeap<Reverse<(u32, usize)>> = joins
        .iter()
        .enumerate()
        .filter_map(|(i, join)| join.map(|(rank, _)| Reverse((rank, i))))
        .collect();
    let mut dropped = Vec::new();
    while let Some(Reverse((rank, i))) = heap.pop() {
        let Some((current_rank, merged)) = joins[i].filter(|_| alive[i]) else {
            continue;
        };
        if current_rank != rank {
            continue;
        }
        if dropout > 0.0 && rng.next_f64() < dropout {
            dropped.push(Reverse((rank, i)));
            continue;
        }
        let right = next[i];
        ids[i] = merged;
        alive[right] = false;
        next[i] = next[right];
        if next[i] < n {
            previous[next[i]] = i;
        }
        joins[i] = join_at(i, &next, &ids);
        if let Some((rank, _)) = joins[i] {
            heap.push(Reverse((rank, i)));
        }
        if i > 0 {
            let left = previous[i];
            joins[left] = join_at(left, &next, &ids);
            if let Some((rank, _)) = joins[left] {
                heap.push(Reverse((rank, left)));
            }
        }
        heap.extend(dropped.drain(..));
    }
    let mut i = 0;
    while i < n {
        out.push(ids[i]);
        i = next[i];
    }
}
