//! How big a tokenisation graph will be, counted before it is built: its edges, its colours
//! (distinct substrings), how many colours have a single edge, and how many edges the dual
//! solver gives prices of their own at each budget, in a fraction of the graph's memory (one
//! 64-bit key, pre-token and length per edge, sorted in place; no hash map of substrings).
//!
//! A key is a polynomial hash of the substring modulo the Mersenne prime 2^61 - 1, mixed and
//! combined with its length; two distinct substrings share a key with probability about 2^-61 per pair, so
//! the counts are exact for every practical purpose. They feed a memory estimate, never a bound.
use rayon::prelude::*;

/// Edge, colour and single-edge colour counts of a graph (see the module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Census {
    pub edges: usize,
    pub colours: usize,
    /// Colours with exactly one edge.
    pub single_edge_colours: usize,
    /// Per budget asked for, the edges the dual solver prices on their own: those of colours
    /// with more than one edge whose F_t (len - 1) reaches `tie_fraction` x the price scale
    /// (`polytok.lp.dual.own_price_colours`).
    pub free_edges: Vec<usize>,
}

/// One edge for the census: its substring's key, the pre-token it is in, and its length.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    key: u64,
    pre_token: u32,
    len: u32,
}

const MERSENNE: u64 = (1 << 61) - 1;
/// The hash's base: a fixed odd number below the prime, so the census is deterministic.
const BASE: u64 = 0x1f3d_5b79_a2c4_e681 % MERSENNE;

/// (a x b) mod 2^61 - 1.
#[inline]
fn mul_mod(a: u64, b: u64) -> u64 {
    let product = (a as u128) * (b as u128);
    let folded = (product as u64 & MERSENNE) + (product >> 61) as u64;
    if folded >= MERSENNE {
        folded - MERSENNE
    } else {
        folded
    }
}

/// A 64-bit mix (splitmix64's finaliser), so that keys of different lengths spread apart.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The census of the graph of the pre-tokens data[offsets[w]..offsets[w + 1]] (counted
/// `counts[w]` times), with token edges of 2 to `max_len` bytes, and its free edges at each of
/// `budgets` (see `Census::free_edges`).
pub fn census(
    data: &[u8],
    offsets: &[usize],
    counts: &[u64],
    max_len: usize,
    budgets: &[usize],
    tie_fraction: f64,
) -> Census {
    let n = offsets.len().saturating_sub(1);
    let per_pre_token = |w: usize| {
        let len = offsets[w + 1] - offsets[w];
        (0..len)
            .map(|i| (len.min(i.saturating_add(max_len)) + 1).saturating_sub(i + 2))
            .sum::<usize>()
    };
    let pre_token_edges: Vec<usize> = (0..n).into_par_iter().map(per_pre_token).collect();
    let edges: usize = pre_token_edges.iter().sum();
    let empty = Entry {
        key: 0,
        pre_token: 0,
        len: 0,
    };
    let mut keys = vec![empty; edges];
    let mut slices: Vec<&mut [Entry]> = Vec::with_capacity(n);
    let mut rest: &mut [Entry] = &mut keys;
    for &count in &pre_token_edges {
        let (head, tail) = rest.split_at_mut(count);
        slices.push(head);
        rest = tail;
    }
    slices.into_par_iter().enumerate().for_each(|(w, out)| {
        let pre_token = &data[offsets[w]..offsets[w + 1]];
        let mut k = 0;
        for i in 0..pre_token.len() {
            let mut hash = u64::from(pre_token[i]) + 1;
            let last = pre_token.len().min(i.saturating_add(max_len));
            for (j, &byte) in pre_token.iter().enumerate().take(last).skip(i + 1) {
                hash = mul_mod(hash, BASE) + u64::from(byte) + 1;
                if hash >= MERSENNE {
                    hash -= MERSENNE;
                }
                out[k] = Entry {
                    key: mix(hash) ^ ((j + 1 - i) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    pre_token: w as u32,
                    len: (j + 1 - i) as u32,
                };
                k += 1;
            }
        }
    });
    keys.par_sort_unstable_by_key(|entry| entry.key);
    // Per colour: its weighted frequency F_t, the most tokens it could save, and its edges.
    let mut frequency: Vec<u64> = Vec::new();
    let mut saving: Vec<f64> = Vec::new();
    let mut colour_edges: Vec<u32> = Vec::new();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && keys[end].key == keys[start].key {
            end += 1;
        }
        let f: u64 = keys[start..end].iter().map(|e| counts[e.pre_token as usize]).sum();
        frequency.push(f);
        saving.push(f as f64 * (f64::from(keys[start].len) - 1.0));
        colour_edges.push((end - start).min(u32::MAX as usize) as u32);
        start = end;
    }
    drop(keys);
    let colours = frequency.len();
    let single = colour_edges.iter().filter(|&&e| e == 1).count();
    let free_edges = budgets
        .iter()
        .map(|&budget| {
            let scale = price_scale(&mut frequency.clone(), budget);
            let threshold = tie_fraction * scale;
            saving
                .iter()
                .zip(&colour_edges)
                .filter(|&(&s, &e)| e > 1 && (!(tie_fraction > 0.0) || s >= threshold))
                .map(|(_, &e)| e as usize)
                .sum()
        })
        .collect();
    Census {
        edges,
        colours,
        single_edge_colours: single,
        free_edges,
    }
}

/// A quarter of the K-th largest of `frequencies`, at least 1: the dual solver's price scale
/// (`dual_ascent::colour_scales`). Reorders `frequencies`.
pub(crate) fn price_scale(frequencies: &mut [u64], budget: usize) -> f64 {
    if budget == 0 || frequencies.is_empty() {
        return 1.0;
    }
    let split = frequencies.len() - budget.min(frequencies.len());
    (*frequencies.select_nth_unstable(split).1 as f64 / 4.0).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn census_counts_distinct_substrings() {
        let pre_tokens: [&[u8]; 4] = [b"abcab", b"abab", b"x", b"cabca"];
        let data: Vec<u8> = pre_tokens.concat();
        let mut offsets = vec![0];
        for pre_token in pre_tokens {
            offsets.push(offsets.last().unwrap() + pre_token.len());
        }
        for max_len in [2, 3, usize::MAX] {
            let mut seen: HashMap<&[u8], usize> = HashMap::new();
            for pre_token in pre_tokens {
                for i in 0..pre_token.len() {
                    for j in (i + 2)..=pre_token.len().min(i.saturating_add(max_len)) {
                        *seen.entry(&pre_token[i..j]).or_default() += 1;
                    }
                }
            }
            let counts = vec![1u64; pre_tokens.len()];
            let got = census(&data, &offsets, &counts, max_len, &[0], 0.0);
            assert_eq!(got.edges, seen.values().sum::<usize>());
            assert_eq!(got.colours, seen.len());
            assert_eq!(
                got.single_edge_colours,
                seen.values().filter(|&&c| c == 1).count()
            );
            assert_eq!(
                got.free_edges,
                vec![seen.values().filter(|&&c| c > 1).sum::<usize>()]
            );
        }
    }
}
