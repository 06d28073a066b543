//! The double-array trie of a loaded vocabulary's lattice strings, walked byte by byte by the
//! character-level Viterbi segmenter.
use super::{Score, NONE};

/// A byte trie of the lattice strings: walking a pre-token from a start position visits every token
/// that starts there, shortest first, and stops as soon as no token continues. It is a double
/// array: the child of slot `s` by byte `b` is slot `base(s) + b` if that slot's parent is `s`.
/// A slot also holds the token that ends there, so a step of the walk loads one slot.
pub(crate) struct Trie<S> {
    pub(crate) slots: Vec<TrieSlot<S>>,
}

#[derive(Clone, Copy)]
pub(crate) struct TrieSlot<S> {
    /// The slot this one is a child of (NONE: free; the root is its own parent).
    pub(crate) parent: u32,
    /// Where this slot's children start (child by byte b: base + b). A slot without children
    /// points past the last base, where no slot has a parent, so a walk needs no other check.
    pub(crate) base: u32,
    /// The id of the token that ends here, or NONE (with score -inf, so it never wins).
    pub(crate) id: u32,
    pub(crate) score: S,
}

impl<S: Score> Trie<S> {
    const FREE: TrieSlot<S> = TrieSlot {
        parent: NONE,
        base: 0,
        id: NONE,
        score: S::NEG_INFINITY,
    };

    pub(crate) fn new(entries: &[(Vec<u8>, u32, f64)]) -> Self {
        // First a plain trie (node -> sorted children), then each node's children are placed in
        // the double array at the lowest base where all their slots are free.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut token_of: Vec<(u32, S)> = vec![(NONE, S::NEG_INFINITY)];
        for (text, id, score) in entries {
            let mut node = 0usize;
            for &byte in text {
                node = match children[node].iter().find(|&&(b, _)| b == byte) {
                    Some(&(_, child)) => child as usize,
                    None => {
                        let child = children.len();
                        children[node].push((byte, child as u32));
                        children.push(Vec::new());
                        token_of.push((NONE, S::NEG_INFINITY));
                        child
                    }
                };
            }
            // The first of two equal strings keeps its id, as a string -> id table would.
            if token_of[node].0 == NONE {
                token_of[node] = (*id, S::from_f64(*score));
            }
        }
        let slot_of_node = |node: usize, parent: u32| TrieSlot {
            parent,
            base: 0,
            id: token_of[node].0,
            score: token_of[node].1,
        };
        let mut slots = vec![slot_of_node(0, 0)];
        let mut slot_of = vec![0u32; children.len()];
        // The free slots, to place children without stepping through runs of taken ones.
        let mut free = FreeSlots::default();
        free.take(0);
        let mut queue = std::collections::VecDeque::from([0usize]);
        while let Some(node) = queue.pop_front() {
            let kids = &children[node];
            if kids.is_empty() {
                continue;
            }
            // The lowest base (at least 1) that puts every child in a free slot: the lowest
            // child goes to each free slot in turn until the others fit too.
            let lowest = kids.iter().map(|&(b, _)| b as usize).min().unwrap();
            let mut candidate = lowest + 1;
            let base = loop {
                let base = free.first_from(candidate) - lowest;
                if kids.iter().all(|&(b, _)| {
                    slots
                        .get(base + b as usize)
                        .is_none_or(|slot| slot.parent == NONE)
                }) {
                    break base;
                }
                candidate = base + lowest + 1;
            };
            let parent = slot_of[node];
            slots[parent as usize].base = base as u32;
            for &(byte, child) in kids {
                let slot = base + byte as usize;
                if slot >= slots.len() {
                    slots.resize(slot + 1, Self::FREE);
                }
                slots[slot] = slot_of_node(child as usize, parent);
                free.take(slot);
                slot_of[child as usize] = slot as u32;
                queue.push_back(child as usize);
            }
        }
        // Room for any byte after the last base, so a lookup never runs off the end; slots
        // without children point there, where no slot has a parent.
        let dead = slots.len() as u32;
        slots.resize(slots.len() + 256, Self::FREE);
        for slot in &mut slots {
            if slot.base == 0 {
                slot.base = dead;
            }
        }
        Trie { slots }
    }
}

/// Which slots of a growing double array are taken: each taken slot points further on, towards
/// a free one (a union-find with path compression), so finding the first free slot from any
/// position skips taken runs in near-constant time. Positions past the end are free.
#[derive(Default)]
struct FreeSlots {
    /// next[i] == i: slot i is free; otherwise a later slot to look from.
    next: Vec<usize>,
}

impl FreeSlots {
    fn first_from(&mut self, from: usize) -> usize {
        let mut root = from;
        while root < self.next.len() && self.next[root] != root {
            root = self.next[root];
        }
        let mut at = from;
        while at < root {
            let up = self.next[at];
            self.next[at] = root;
            at = up;
        }
        root
    }

    fn take(&mut self, slot: usize) {
        if slot >= self.next.len() {
            let len = self.next.len();
            self.next.extend(len..=slot);
        }
        self.next[slot] = slot + 1;
    }
}

/// Single steps, for checking the trie (the Viterbi walk inlines them).
#[cfg(test)]
impl<S: Score> Trie<S> {
    fn child(&self, slot: u32, byte: u8) -> Option<u32> {
        let next = self.slots[slot as usize].base + byte as u32;
        (self.slots[next as usize].parent == slot).then_some(next)
    }

    /// The (id, score) of the token ending at `slot`, if one does.
    fn token(&self, slot: u32) -> Option<(u32, S)> {
        let slot = &self.slots[slot as usize];
        (slot.id != NONE).then_some((slot.id, slot.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::rng::SplitMix64;
    use rustc_hash::FxHashMap;

    /// The double-array trie finds exactly the vocabulary strings that prefix each suffix.
    #[test]
    fn trie_walks_find_every_prefix_token() {
        let words = [
            "a",
            "ab",
            "abc",
            "b",
            "bca",
            "\u{2581}the",
            "\u{2581}",
            "é",
            "éa",
            "zz",
            "\u{4e2d}\u{6587}",
        ];
        let entries: Vec<(Vec<u8>, u32, f64)> = words
            .iter()
            .enumerate()
            .map(|(id, w)| (w.as_bytes().to_vec(), id as u32, -(id as f64)))
            .collect();
        let trie = Trie::<f64>::new(&entries);
        let text = "abcabé\u{2581}theéazz\u{4e2d}\u{6587}bca".as_bytes();
        for start in 0..text.len() {
            let mut found = Vec::new();
            let mut slot = 0u32;
            for end in start..text.len() {
                let Some(next) = trie.child(slot, text[end]) else {
                    break;
                };
                slot = next;
                if let Some((id, _)) = trie.token(slot) {
                    found.push(id);
                }
            }
            let expected: Vec<u32> = (start + 1..=text.len())
                .filter_map(|end| {
                    words
                        .iter()
                        .position(|w| w.as_bytes() == &text[start..end])
                        .map(|id| id as u32)
                })
                .collect();
            assert_eq!(found, expected, "start {start}");
        }
    }

    /// Many strings with shared prefixes fill the double array densely, which is where the
    /// free-slot search must not place two children in one slot.
    #[test]
    fn trie_of_many_strings_finds_every_prefix_token() {
        let mut rng = SplitMix64::new(11);
        let pieces = [
            "a",
            "b",
            "e",
            "t",
            "\u{2581}",
            "é",
            "中",
            "\u{1F642}",
            "\x00",
            "\x7f",
        ];
        let mut words: Vec<String> = Vec::new();
        for _ in 0..3000 {
            let length = rng.next_u64() % 6 + 1;
            words.push(
                (0..length)
                    .map(|_| pieces[(rng.next_u64() % pieces.len() as u64) as usize])
                    .collect(),
            );
        }
        let entries: Vec<(Vec<u8>, u32, f64)> = words
            .iter()
            .enumerate()
            .map(|(id, w)| (w.as_bytes().to_vec(), id as u32, 0.0))
            .collect();
        let trie = Trie::<f32>::new(&entries);
        let first_id: FxHashMap<&[u8], u32> = words
            .iter()
            .enumerate()
            .rev()
            .map(|(id, w)| (w.as_bytes(), id as u32))
            .collect();
        for _ in 0..300 {
            let text: String = (0..8)
                .map(|_| pieces[(rng.next_u64() % pieces.len() as u64) as usize])
                .collect();
            let text = text.as_bytes();
            let mut found = Vec::new();
            let mut slot = 0u32;
            for &byte in text {
                let Some(next) = trie.child(slot, byte) else {
                    break;
                };
                slot = next;
                if let Some((id, _)) = trie.token(slot) {
                    found.push(id);
                }
            }
            let expected: Vec<u32> = (1..=text.len())
                .filter_map(|end| first_id.get(&text[..end]).copied())
                .collect();
            assert_eq!(found, expected);
        }
    }
}
