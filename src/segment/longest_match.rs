//! The `longest_match` segmenter (WordPiece): at each position take the longest vocabulary token
//! that fits, then carry on where it ends. With a continuation marker ("##"), the first token of
//! a pre-token comes from the word-initial tokens and every later one from the continuation
//! tokens. Also home of `ByteTrie`, the prefix tree the Viterbi segmenter and trainers share.
use rustc_hash::FxHashMap;

use super::{ByteRole, Segmenter, VocabularyError};

const NO_VALUE: u32 = u32::MAX;

/// A byte-level prefix tree with several roots, mapping byte strings to ids. A root's children
/// sit in a dense table (every walk starts there); deeper children live in one hash map keyed
/// by (node, byte), so walking a text costs one lookup per byte matched.
#[derive(Clone, Default)]
pub struct ByteTrie {
    root_children: Vec<[u32; 256]>,
    children: FxHashMap<u64, u32>,
    values: Vec<u32>,
}

impl ByteTrie {
    pub fn new() -> Self {
        ByteTrie {
            root_children: Vec::new(),
            children: FxHashMap::default(),
            values: Vec::new(),
        }
    }

    /// Makes room for `nodes` nodes in total, so that building a large trie does not rehash.
    pub fn reserve(&mut self, nodes: usize) {
        self.values.reserve(nodes.saturating_sub(self.values.len()));
        self.children
            .reserve(nodes.saturating_sub(self.children.len()));
    }

    /// Adds an empty root and returns it; keys inserted under different roots never mix. All
    /// roots must be added before the first insertion.
    pub fn add_root(&mut self) -> u32 {
        assert_eq!(
            self.values.len(),
            self.root_children.len(),
            "roots come before keys"
        );
        self.values.push(NO_VALUE);
        self.root_children.push([NO_VALUE; 256]);
        (self.values.len() - 1) as u32
    }

    #[inline]
    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        if let Some(table) = self.root_children.get(node as usize) {
            let next = table[byte as usize];
            return (next != NO_VALUE).then_some(next);
        }
        self.children
            .get(&(((node as u64) << 8) | byte as u64))
            .copied()
    }

    /// Stores `value` under `key` (non-empty) unless the key already has one; returns whether
    /// it was stored, so the first id of a duplicated token wins.
    pub fn insert(&mut self, root: u32, key: &[u8], value: u32) -> bool {
        let mut node = root;
        for &byte in key {
            node = match self.child(node, byte) {
                Some(next) => next,
                None => {
                    self.values.push(NO_VALUE);
                    let next = (self.values.len() - 1) as u32;
                    match self.root_children.get_mut(node as usize) {
                        Some(table) => table[byte as usize] = next,
                        None => {
                            self.children
                                .insert(((node as u64) << 8) | byte as u64, next);
                        }
                    }
                    next
                }
            };
        }
        if self.values[node as usize] != NO_VALUE {
            return false;
        }
        self.values[node as usize] = value;
        true
    }

    /// The id stored under exactly `key`, if any.
    pub fn get(&self, root: u32, key: &[u8]) -> Option<u32> {
        let mut node = root;
        for &byte in key {
            node = self.child(node, byte)?;
        }
        let value = self.values[node as usize];
        (value != NO_VALUE).then_some(value)
    }

    /// Calls `f(length, id)` for every stored key that is a prefix of `text`, shortest first.
    #[inline]
    pub fn for_each_prefix(&self, root: u32, text: &[u8], mut f: impl FnMut(usize, u32)) {
        let mut node = root;
        for (i, &byte) in text.iter().enumerate() {
            match self.child(node, byte) {
                Some(next) => node = next,
                None => return,
            }
            let value = self.values[node as usize];
            if value != NO_VALUE {
                f(i + 1, value);
            }
        }
    }

    /// The longest stored prefix of `text` as (length, id).
    #[inline]
    pub fn longest_prefix(&self, root: u32, text: &[u8]) -> Option<(usize, u32)> {
        let mut best = None;
        self.for_each_prefix(root, text, |length, id| best = Some((length, id)));
        best
    }
}

/// Greedy longest-prefix segmentation over a vocabulary whose continuation tokens are spelled
/// with a marker prefix (BERT's convention: "##ing"). The marker is not part of the text: a
/// continuation token decodes to its bytes without it.
pub struct LongestMatch {
    trie: ByteTrie,
    initial_root: u32,
    continuation_root: u32,
    /// What each id stands for in the text (the marker stripped from continuation tokens).
    decoded: Vec<Vec<u8>>,
}

impl LongestMatch {
    /// `vocab[i]` is the spelling of id i. With a marker, a token that starts with it and is
    /// longer than it is a continuation token; every other token is word-initial. Without a
    /// marker every token may appear anywhere. All 256 single bytes must exist in both roles,
    /// so that no input is ever unknown.
    pub fn new(vocab: &[Vec<u8>], marker: Option<&[u8]>) -> Result<Self, VocabularyError> {
        let mut trie = ByteTrie::new();
        let initial_root = trie.add_root();
        let continuation_root = match marker {
            Some(_) => trie.add_root(),
            None => initial_root,
        };
        let mut decoded = Vec::with_capacity(vocab.len());
        for (id, token) in vocab.iter().enumerate() {
            if token.is_empty() {
                return Err(VocabularyError::EmptyToken { id });
            }
            let (root, text) = match marker {
                Some(m) if token.len() > m.len() && token.starts_with(m) => {
                    (continuation_root, &token[m.len()..])
                }
                _ => (initial_root, &token[..]),
            };
            trie.insert(root, text, id as u32);
            decoded.push(text.to_vec());
        }
        for byte in 0..=255u8 {
            if trie.get(initial_root, &[byte]).is_none() {
                let role = if marker.is_some() {
                    ByteRole::WordInitial
                } else {
                    ByteRole::Any
                };
                return Err(VocabularyError::MissingByte { byte, role });
            }
            if trie.get(continuation_root, &[byte]).is_none() {
                let role = ByteRole::Continuation;
                return Err(VocabularyError::MissingByte { byte, role });
            }
        }
        Ok(LongestMatch {
            trie,
            initial_root,
            continuation_root,
            decoded,
        })
    }

    /// The bytes each id decodes to, markers stripped; index = id.
    pub fn decode_table(&self) -> &[Vec<u8>] {
        &self.decoded
    }
}

impl Segmenter for LongestMatch {
    fn segment(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut position = 0;
        let mut root = self.initial_root;
        while position < piece.len() {
            // Every single byte is in both roots, so a match always exists.
            let (length, id) = self.trie.longest_prefix(root, &piece[position..]).unwrap();
            out.push(id);
            position += length;
            root = self.continuation_root;
        }
    }
}
