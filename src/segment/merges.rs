//! The `merges` segmenter (BPE): start from single bytes and repeatedly join the adjacent pair
//! with the lowest rank until no adjacent pair has one.
//!
//! Two rules say what a pair's rank is:
//! - `ByteRanks` (tiktoken's rule): the rank of the concatenated bytes, if they are a token; the
//!   merged id is that rank. Used for vocabularies that come without a merge list (tiktoken files).
//! - `PairMerges` (the merge list replayed): the pair of ids (left, right) has rank k if it is the
//!   k-th merge, and joins into that merge's id. This is BPE's own definition. Merge k's result
//!   only takes part in merges after k, so "always join the lowest-ranked pair, leftmost first"
//!   performs merge k at every place, left to right, before any later merge: exactly a replay of
//!   the list in order. For merge lists that BPE training produces the two rules gave the same
//!   ids on every test text and generated input (tests/peers); a hand-made list can make them
//!   differ, e.g. when two merges produce the same bytes, which only `PairMerges` can express.
//!
//! Short pieces use a flat array scanned for the minimum (O(n^2), fastest for the few bytes of a
//! typical pre-token); long ones a linked list swept rank by rank (linear but for sorting), so
//! encoding time grows linearly even for megabytes of one character.
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use rustc_hash::FxHashMap;

use super::cache::{narrow_key, packed};
use super::dropout::segment_with_dropout;
use super::rng::SplitMix64;
use super::scratch::{reserve_huge, with_buffer, KEPT_BYTES};
use super::{ByteRole, RandomKind, RandomSegmenter, Segmenter, VocabularyError};

/// No merge: the rank of a pair that is not a token (also marks "no right neighbour").
const NONE: u32 = u32::MAX;

/// Pieces longer than this use the long-piece version, whose set-up (a node array, buckets) the
/// few bytes of a typical pre-token do not repay; past it the flat scan's quadratic cost grows.
const FLAT_SCAN_MAX_LEN: usize = 96;

/// How adjacent tokens join: the rank and merged id of the pair made of `left` and `right`,
/// whose bytes together are `piece[start..end]`, or `(NONE, NONE)`. `tokens` maps every token
/// that the segmenter answers whole to its id.
pub trait MergeRule: Send + Sync {
    fn join(
        &self,
        tokens: &TokenMap,
        piece: &[u8],
        start: usize,
        end: usize,
        left: u32,
        right: u32,
    ) -> (u32, u32);
}

/// Byte strings -> ids. Strings of up to 7 bytes (most pre-tokens and tokens) are packed into a
/// u64 key and those of up to 15 into a u128, so a lookup hashes and compares integers instead of
/// slices. Lookups are about a third of encoding time once the pre-tokeniser is fast, and they are
/// bound by memory latency: an open-addressing table tried in place of hashbrown measured the same.
#[derive(Default)]
pub struct TokenMap {
    small: FxHashMap<u64, u32>,
    medium: FxHashMap<u128, u32>,
    long: FxHashMap<Box<[u8]>, u32>,
}

#[inline(always)]
fn small_key(bytes: &[u8]) -> u64 {
    narrow_key(bytes)
}

#[inline(always)]
fn medium_key(bytes: &[u8]) -> u128 {
    packed(bytes)
}

impl TokenMap {
    /// Inserts `bytes -> id`; returns false (and keeps the old id) if `bytes` is already there.
    fn insert(&mut self, bytes: &[u8], id: u32) -> bool {
        if self.get(bytes).is_some() {
            return false;
        }
        match bytes.len() {
            0..=7 => self.small.insert(small_key(bytes), id),
            8..=15 => self.medium.insert(medium_key(bytes), id),
            _ => self.long.insert(bytes.into(), id),
        };
        true
    }

    #[inline]
    fn get(&self, bytes: &[u8]) -> Option<u32> {
        match bytes.len() {
            0..=7 => self.small.get(&small_key(bytes)).copied(),
            8..=15 => self.medium.get(&medium_key(bytes)).copied(),
            _ => self.long.get(bytes).copied(),
        }
    }
}

/// tiktoken's rule: a pair joins if its bytes are a token; rank and merged id are that token's id.
/// The ranks are the segmenter's whole-token map (rank = id), so it is not stored twice.
pub struct ByteRanks;

impl MergeRule for ByteRanks {
    #[inline]
    fn join(
        &self,
        tokens: &TokenMap,
        piece: &[u8],
        start: usize,
        end: usize,
        _left: u32,
        _right: u32,
    ) -> (u32, u32) {
        match tokens.get(&piece[start..end]) {
            Some(rank) => (rank, rank),
            None => (NONE, NONE),
        }
    }
}

/// The merge list's rule: pair (left, right) joins if it is a merge, with that merge's rank.
pub struct PairMerges {
    /// (left << 32 | right) -> (rank, merged id)
    pairs: FxHashMap<u64, (u32, u32)>,
}

impl MergeRule for PairMerges {
    #[inline]
    fn join(
        &self,
        _tokens: &TokenMap,
        _piece: &[u8],
        _start: usize,
        _end: usize,
        left: u32,
        right: u32,
    ) -> (u32, u32) {
        match self.pairs.get(&(((left as u64) << 32) | right as u64)) {
            Some(&joined) => joined,
            None => (NONE, NONE),
        }
    }
}

/// One token of a piece being merged: where it starts, its id, and how it joins its right neighbour.
#[derive(Clone, Copy, Default)]
struct Part {
    start: u32,
    id: u32,
    rank: u32,
    merged: u32,
}

thread_local! {
    /// Scratch space reused across pieces, so merging a piece allocates nothing.
    static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
}

pub struct MergesSegmenter<R: MergeRule> {
    rule: R,
    byte_ids: [u32; 256],
    /// Pieces that are one whole token (and that merging would reach anyway): answered directly.
    whole: TokenMap,
}

/// Builds the segmenter for a vocabulary without a merge list: tiktoken's rule with rank = id.
/// `tokens[id]` are the bytes of id (empty: an id no token has); every single byte must be a
/// token.
pub fn from_ranks(tokens: &[Vec<u8>]) -> Result<MergesSegmenter<ByteRanks>, VocabularyError> {
    let mut ranks = TokenMap::default();
    for (id, token) in tokens.iter().enumerate() {
        if !token.is_empty() && !ranks.insert(token, id as u32) {
            return Err(VocabularyError::RepeatedToken { id });
        }
    }
    let byte_ids = byte_ids(tokens)?;
    // tiktoken answers any piece that is itself a token with that token, so `whole` is all of them.
    Ok(MergesSegmenter {
        rule: ByteRanks,
        byte_ids,
        whole: ranks,
    })
}

/// Builds the segmenter for a merge list: `merges[k] = (left, right, merged)` is the k-th merge;
/// an empty token is an id no token has, which no merge may name.
pub fn from_merges(
    tokens: &[Vec<u8>],
    merges: &[(u32, u32, u32)],
) -> Result<MergesSegmenter<PairMerges>, VocabularyError> {
    let mut pairs = FxHashMap::default();
    for (rank, &(left, right, merged)) in merges.iter().enumerate() {
        let no_token = |id: u32| tokens.get(id as usize).is_none_or(|token| token.is_empty());
        if let Some(&id) = [left, right, merged].iter().find(|&&id| no_token(id)) {
            return Err(VocabularyError::MergeId { rank, id, tokens: tokens.len() });
        }
        let key = ((left as u64) << 32) | right as u64;
        if pairs.insert(key, (rank as u32, merged)).is_some() {
            return Err(VocabularyError::RepeatedMerge { rank, left, right });
        }
    }
    let byte_ids = byte_ids(tokens)?;
    let mut segmenter = MergesSegmenter {
        rule: PairMerges { pairs },
        byte_ids,
        whole: TokenMap::default(),
    };
    // A token answers a whole piece only if replaying the merges on its bytes reaches it (true for
    // every token BPE trained, but a hand-made list may hold tokens no merge sequence reaches).
    let mut whole = TokenMap::default();
    let mut ids = Vec::new();
    for (id, token) in tokens.iter().enumerate().filter(|(_, token)| !token.is_empty()) {
        ids.clear();
        segmenter.segment(token, &mut ids);
        if ids.len() == 1 && ids[0] == id as u32 {
            whole.insert(token, id as u32);
        }
    }
    segmenter.whole = whole;
    Ok(segmenter)
}

fn byte_ids(tokens: &[Vec<u8>]) -> Result<[u32; 256], VocabularyError> {
    let mut byte_ids = [NONE; 256];
    // The lowest id wins if a byte appears twice, as `token_id` does.
    for (id, token) in tokens.iter().enumerate().rev() {
        if let [byte] = token[..] {
            byte_ids[byte as usize] = id as u32;
        }
    }
    match byte_ids.iter().position(|&id| id == NONE) {
        Some(byte) => Err(VocabularyError::MissingByte {
            byte: byte as u8,
            role: ByteRole::Any,
        }),
        None => Ok(byte_ids),
    }
}

impl<R: MergeRule> RandomSegmenter for MergesSegmenter<R> {
    fn kind(&self) -> RandomKind {
        RandomKind::Dropout
    }

    /// BPE-dropout with probability `dropout`. At 0 this is exactly `segment` (which also answers
    /// a piece that is a whole token directly, as tiktoken does, even where merging would not
    /// reach it).
    fn segment_random(&self, piece: &[u8], dropout: f64, rng: &mut SplitMix64, out: &mut Vec<u32>) {
        if dropout <= 0.0 {
            return self.segment(piece, out);
        }
        let merge_of = |piece: &[u8], start, end, left, right| {
            let (rank, merged) = self.rule.join(&self.whole, piece, start, end, left, right);
            (rank != NONE).then_some((rank, merged))
        };
        segment_with_dropout(piece, &self.byte_ids, merge_of, dropout, rng, out);
    }
}

impl<R: MergeRule> Segmenter for MergesSegmenter<R> {
    fn random(&self) -> Option<&dyn RandomSegmenter> {
        Some(self)
    }

    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let &[byte] = piece {
            out.push(self.byte_ids[byte as usize]);
        } else if let Some(id) = self.whole.get(piece) {
            out.push(id);
        } else if piece.len() <= FLAT_SCAN_MAX_LEN {
            PARTS.with(|parts| self.merge_flat(piece, &mut parts.borrow_mut(), out));
        } else {
            self.merge_buckets(piece, out);
        }
    }
}

impl<R: MergeRule> MergesSegmenter<R> {
    /// The flat version: `parts` holds the current tokens plus a sentinel at the end of the piece.
    fn merge_flat(&self, piece: &[u8], parts: &mut Vec<Part>, out: &mut Vec<u32>) {
        parts.clear();
        for (i, &byte) in piece.iter().enumerate() {
            parts.push(Part {
                start: i as u32,
                id: self.byte_ids[byte as usize],
                rank: NONE,
                merged: NONE,
            });
        }
        parts.push(Part {
            start: piece.len() as u32,
            id: NONE,
            rank: NONE,
            merged: NONE,
        });
        for i in 0..piece.len() - 1 {
            (parts[i].rank, parts[i].merged) =
                self.rule
                    .join(&self.whole, piece, i, i + 2, parts[i].id, parts[i + 1].id);
        }
        loop {
            // The leftmost pair of lowest rank; the sentinel and the last token have rank NONE.
            let mut best = NONE;
            let mut at = 0;
            for (i, part) in parts[..parts.len() - 2].iter().enumerate() {
                if part.rank < best {
                    best = part.rank;
                    at = i;
                }
            }
            if best == NONE {
                break;
            }
            parts[at].id = parts[at].merged;
            parts.remove(at + 1);
            self.rejoin(piece, parts, at);
            if at > 0 {
                self.rejoin(piece, parts, at - 1);
            }
        }
        out.extend(parts[..parts.len() - 1].iter().map(|part| part.id));
    }

    /// Recomputes how `parts[i]` joins its right neighbour (none if that is the sentinel).
    #[inline]
    fn rejoin(&self, piece: &[u8], parts: &mut [Part], i: usize) {
        (parts[i].rank, parts[i].merged) = if i + 2 < parts.len() {
            let end = parts[i + 2].start as usize;
            self.rule.join(
                &self.whole,
                piece,
                parts[i].start as usize,
                end,
                parts[i].id,
                parts[i + 1].id,
            )
        } else {
            (NONE, NONE)
        };
    }
}

/// One token of a long piece being merged, indexed by its start byte: the token's end (= its
/// right neighbour's start), its left neighbour's start, its id (NONE once merged into its left
/// neighbour) and how it joins its right neighbour. One record per byte keeps the fields a merge
/// reads on one cache line.
#[derive(Clone, Copy)]
struct Node {
    next: u32,
    prev: u32,
    id: u32,
    rank: u32,
    merged: u32,
}

impl<R: MergeRule> MergesSegmenter<R> {
    /// The long-piece version, in time linear in the piece but for sorting. Tokens form a linked
    /// list of `Node`s. Candidate pairs wait in buckets by rank (a BTreeMap: only a few ranks
    /// are pending at once); when a rank comes up, its bucket is sorted once and swept left to
    /// right, so memory is read in order instead of through a heap of every pair. Pairs of the
    /// same rank that a merge creates join the sweep through a small heap; a pair of lower rank
    /// (possible only with ranks that do not grow with merging) interrupts it. Entries made
    /// stale by a merge are skipped. The order is that of a heap of all pairs: lowest rank, then
    /// leftmost, as in `merge_flat`.
    fn merge_buckets(&self, piece: &[u8], out: &mut Vec<u32>) {
        thread_local! {
            static NODES: Cell<Vec<Node>> = const { Cell::new(Vec::new()) };
            /// Emptied buckets kept from earlier pieces.
            static SPARE: Cell<Vec<Vec<u32>>> = const { Cell::new(Vec::new()) };
        }
        let mut spare = SPARE.take();
        with_buffer(&NODES, |nodes| self.merge_nodes(piece, nodes, &mut spare, out));
        // Keep the largest buckets, up to the bound of one reused buffer.
        spare.sort_unstable_by_key(|bucket| Reverse(bucket.capacity()));
        let mut kept_bytes = 0;
        spare.retain(|bucket| {
            kept_bytes += bucket.capacity() * std::mem::size_of::<u32>();
            kept_bytes <= KEPT_BYTES
        });
        SPARE.set(spare);
    }

    /// `merge_buckets` with `nodes`, an empty buffer to hold the piece's nodes, and `spare`,
    /// empty buckets to reuse (the piece's buckets are added to it, emptied, at the end).
    fn merge_nodes(
        &self,
        piece: &[u8],
        nodes: &mut Vec<Node>,
        spare: &mut Vec<Vec<u32>>,
        out: &mut Vec<u32>,
    ) {
        let n = piece.len();
        reserve_huge(nodes, n);
        nodes.extend((0..n).map(|i| Node {
            next: i as u32 + 1,
            prev: (i as u32).wrapping_sub(1),
            id: self.byte_ids[piece[i] as usize],
            rank: NONE,
            merged: NONE,
        }));
        // A pair's join depends only on its two ids (their bytes are fixed), and a long piece
        // meets the same pairs again and again: remembering them saves hashing long byte strings.
        let mut joins: FxHashMap<u64, (u32, u32)> = FxHashMap::default();
        let mut join_at = |nodes: &[Node], i: usize| -> (u32, u32) {
            let right = nodes[i].next as usize;
            if right >= n {
                return (NONE, NONE);
            }
            let (left_id, right_id) = (nodes[i].id, nodes[right].id);
            *joins
                .entry(((left_id as u64) << 32) | right_id as u64)
                .or_insert_with(|| {
                    let end = nodes[right].next as usize;
                    self.rule
                        .join(&self.whole, piece, i, end, left_id, right_id)
                })
        };
        let mut pending: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for i in 0..n - 1 {
            let (rank, merged) = join_at(nodes, i);
            (nodes[i].rank, nodes[i].merged) = (rank, merged);
            if rank != NONE {
                pending
                    .entry(rank)
                    .or_insert_with(|| spare.pop().unwrap_or_default())
                    .push(i as u32);
            }
        }
        let mut same_rank: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        // Swept buckets, emptied, go to `spare` for later ranks to reuse: less fresh memory.
        while let Some((rank, mut positions)) = pending.pop_first() {
            positions.sort_unstable();
            same_rank.clear();
            let mut k = 0;
            loop {
                let i = match (positions.get(k), same_rank.peek()) {
                    (Some(&p), Some(&Reverse(q))) if q < p => same_rank.pop().unwrap().0,
                    (Some(&p), _) => {
                        k += 1;
                        p
                    }
                    (None, Some(_)) => same_rank.pop().unwrap().0,
                    (None, None) => break,
                } as usize;
                if nodes[i].id == NONE || nodes[i].rank != rank {
                    continue;
                }
                let right = nodes[i].next as usize;
                nodes[i].id = nodes[i].merged;
                nodes[right].id = NONE;
                let after = nodes[right].next;
                nodes[i].next = after;
                if (after as usize) < n {
                    nodes[after as usize].prev = i as u32;
                }
                let mut lower = false;
                let mut wait = |position: usize, new_rank: u32| match new_rank {
                    NONE => {}
                    _ if new_rank == rank => same_rank.push(Reverse(position as u32)),
                    _ => {
                        lower |= new_rank < rank;
                        pending
                            .entry(new_rank)
                            .or_insert_with(|| spare.pop().unwrap_or_default())
                            .push(position as u32);
                    }
                };
                let (new_rank, merged) = join_at(nodes, i);
                (nodes[i].rank, nodes[i].merged) = (new_rank, merged);
                wait(i, new_rank);
                if i > 0 {
                    let left = nodes[i].prev as usize;
                    let (new_rank, merged) = join_at(nodes, left);
                    (nodes[left].rank, nodes[left].merged) = (new_rank, merged);
                    wait(left, new_rank);
                }
                if lower {
                    // A lower rank goes first: put the rest of this rank back and start over.
                    let rest = pending.entry(rank).or_default();
                    rest.extend_from_slice(&positions[k..]);
                    rest.extend(same_rank.drain().map(|Reverse(position)| position));
                    break;
                }
            }
            positions.clear();
            spare.push(positions);
        }
        let mut i = 0;
        while i < n {
            out.push(nodes[i].id);
            i = nodes[i].next as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;


    /// The merge loop by hand: from the bytes' ids, join the adjacent pair of lowest rank
    /// (the leftmost among equals) until no adjacent pair has one. A token is (id, bytes);
    /// `join` gives a pair's (rank, merged id).
    fn brute_force(
        piece: &[u8],
        byte_id: impl Fn(u8) -> u32,
        join: impl Fn(&(u32, Vec<u8>), &(u32, Vec<u8>)) -> Option<(u32, u32)>,
    ) -> Vec<u32> {
        let mut tokens: Vec<(u32, Vec<u8>)> =
            piece.iter().map(|&b| (byte_id(b), vec![b])).collect();
        loop {
            let mut best: Option<(u32, u32, usize)> = None;
            for i in 0..tokens.len().saturating_sub(1) {
                if let Some((rank, merged)) = join(&tokens[i], &tokens[i + 1]) {
                    if best.is_none_or(|(lowest, _, _)| rank < lowest) {
                        best = Some((rank, merged, i));
                    }
                }
            }
            let Some((_, merged, i)) = best else {
                return tokens.into_iter().map(|(id, _)| id).collect();
            };
            let right = tokens.remove(i + 1);
            tokens[i].0 = merged;
            tokens[i].1.extend(right.1);
        }
    }

    /// Short pieces (the flat scan) and long ones (the buckets) over `alphabet`.
    fn random_piece(rng: &mut SplitMix64, alphabet: &[u8]) -> Vec<u8> {
        let length = if rng.below(8) == 0 {
            FLAT_SCAN_MAX_LEN + 1 + rng.below(64)
        } else {
            1 + rng.below(14)
        };
        (0..length).map(|_| alphabet[rng.below(alphabet.len())]).collect()
    }

    #[test]
    fn merge_lists_replay_like_the_merge_loop() {
        let mut rng = SplitMix64::new(17);
        for _ in 0..300 {
            let alphabet = &b"abcd"[..1 + rng.below(4)];
            let count = 1 + rng.below(14);
            // Merges may use tokens that later merges make, and may make an id that already
            // exists (one of their own two, say), so a merge can bring a pair of lower rank than
            // its own, or of the same rank to the left of the ones waiting.
            let mut playing: Vec<u32> = alphabet.iter().map(|&b| u32::from(b)).collect();
            playing.extend((0..count as u32).map(|k| 256 + k));
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            let mut merges: Vec<(u32, u32, u32)> = Vec::new();
            for k in 0..count {
                let made = playing.len() - count + k;
                let (left, right) = loop {
                    let pick = |rng: &mut SplitMix64| {
                        let choices = if rng.below(4) == 0 { playing.len() } else { made };
                        playing[rng.below(choices)]
                    };
                    let pair = (pick(&mut rng), pick(&mut rng));
                    if !merges.iter().any(|&(l, r, _)| (l, r) == pair) {
                        break pair;
                    }
                };
                let merged = match rng.below(8) {
                    0 => playing[rng.below(playing.len())],
                    1 => [left, right][rng.below(2)],
                    _ => 256 + k as u32,
                };
                let bytes = match (tokens.get(left as usize), tokens.get(right as usize)) {
                    (Some(l), Some(r)) => [&l[..], r].concat(),
                    _ => vec![alphabet[0]; 2 + k % 3],
                };
                tokens.push(bytes);
                merges.push((left, right, merged));
            }
            let segmenter = from_merges(&tokens, &merges).unwrap();
            let ranks: HashMap<(u32, u32), (u32, u32)> = merges
                .iter()
                .enumerate()
                .map(|(rank, &(l, r, merged))| ((l, r), (rank as u32, merged)))
                .collect();
            let join = |l: &(u32, Vec<u8>), r: &(u32, Vec<u8>)| ranks.get(&(l.0, r.0)).copied();
            for _ in 0..12 {
                let piece = random_piece(&mut rng, alphabet);
                let mut got = Vec::new();
                segmenter.segment(&piece, &mut got);
                let want = brute_force(&piece, u32::from, join);
                assert_eq!(got, want, "{merges:?} on {:?}", String::from_utf8_lossy(&piece));
            }
        }
    }

    #[test]
    fn byte_ranks_merge_like_the_merge_loop() {
        let mut rng = SplitMix64::new(19);
        for _ in 0..300 {
            let alphabet = &b"abcd"[..1 + rng.below(4)];
            let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            for _ in 0..rng.below(20) {
                let token: Vec<u8> = (0..2 + rng.below(4))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                if !vocab.contains(&token) {
                    vocab.push(token);
                }
            }
            // Ranks in random order, bytes among them.
            for i in (1..vocab.len()).rev() {
                vocab.swap(i, rng.below(i + 1));
            }
            let segmenter = from_ranks(&vocab).unwrap();
            let ranks: HashMap<&[u8], u32> =
                vocab.iter().enumerate().map(|(r, t)| (&t[..], r as u32)).collect();
            let rank = |bytes: &[u8]| ranks.get(bytes).copied();
            let join = |l: &(u32, Vec<u8>), r: &(u32, Vec<u8>)| {
                rank(&[&l.1[..], &r.1].concat()).map(|r| (r, r))
            };
            for _ in 0..12 {
                // Pieces that are whole tokens are answered directly, as tiktoken does.
                let piece = if rng.below(5) == 0 {
                    vocab[rng.below(vocab.len())].clone()
                } else {
                    random_piece(&mut rng, alphabet)
                };
                let mut got = Vec::new();
                segmenter.segment(&piece, &mut got);
                let want = match rank(&piece) {
                    Some(id) => vec![id],
                    None => brute_force(&piece, |b| rank(&[b]).unwrap(), join),
                };
                assert_eq!(got, want, "on {:?}", String::from_utf8_lossy(&piece));
            }
        }
    }
}
