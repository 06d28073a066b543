//! Counting pre-tokens: the unique pre-tokens of a corpus with their 64-bit counts.
//!
//! A batch of documents is counted in parallel with rayon: each worker fills a hash map whose
//! keys borrow the documents' bytes (no allocation per occurrence), the maps are merged pairwise,
//! and only words never seen before are copied into the counter's own map. Counts are exact sums,
//! so the sorted result does not depend on the number of threads or on how work was split.
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::pretokenize::{PreTokenizer, Segment};

/// Pre-token counts whose keys borrow the documents of one batch.
type BorrowedCounts<'a> = FxHashMap<&'a [u8], u64>;

/// Adds the pre-tokens of `document` to `counts`; special tokens are split out and not counted.
fn count_document<'a>(
    pretokenizer: &PreTokenizer,
    document: &'a [u8],
    counts: &mut BorrowedCounts<'a>,
) {
    pretokenizer.for_each_segment(document, |segment| {
        if let Segment::Text(text) = segment {
            pretokenizer.for_each_piece(text, |piece| *counts.entry(piece).or_insert(0) += 1);
        }
    });
}

/// Merges two count maps, walking the smaller one.
fn merge_borrowed<'a>(left: BorrowedCounts<'a>, right: BorrowedCounts<'a>) -> BorrowedCounts<'a> {
    let (mut larger, smaller) = if left.len() >= right.len() {
        (left, right)
    } else {
        (right, left)
    };
    for (word, count) in smaller {
        *larger.entry(word).or_insert(0) += count;
    }
    larger
}

/// The pre-token counts of a batch of documents, counted in parallel on the current rayon pool.
fn count_batch<'a, D: AsRef<[u8]> + Sync>(
    pretokenizer: &PreTokenizer,
    documents: &'a [D],
) -> BorrowedCounts<'a> {
    documents
        .par_iter()
        .fold(BorrowedCounts::default, |mut counts, document| {
            count_document(pretokenizer, document.as_ref(), &mut counts);
            counts
        })
        .reduce(BorrowedCounts::default, merge_borrowed)
}

/// Words sorted bytewise, flattened: `data` holds them back to back, `offsets` their bounds.
pub struct FlatCounts {
    pub data: Vec<u8>,
    pub offsets: Vec<i64>,
    pub counts: Vec<u64>,
}

impl FlatCounts {
    fn with_capacity(words: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(words + 1);
        offsets.push(0);
        FlatCounts {
            data: Vec::with_capacity(bytes),
            offsets,
            counts: Vec::with_capacity(words),
        }
    }

    fn push(&mut self, word: &[u8], count: u64) {
        self.data.extend_from_slice(word);
        self.offsets.push(self.data.len() as i64);
        self.counts.push(count);
    }
}

/// Accumulates pre-token counts over any number of batches.
pub struct Counter {
    pretokenizer: PreTokenizer,
    words: FxHashMap<Box<[u8]>, u64>,
}

impl Counter {
    pub fn new(pretokenizer: PreTokenizer) -> Self {
        Counter {
            pretokenizer,
            words: FxHashMap::default(),
        }
    }

    /// The number of distinct pre-tokens counted so far.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Counts a batch of documents (in parallel on the current rayon pool).
    pub fn add<D: AsRef<[u8]> + Sync>(&mut self, documents: &[D]) {
        let batch = count_batch(&self.pretokenizer, documents);
        for (word, count) in batch {
            match self.words.get_mut(word) {
                Some(total) => *total += count,
                None => {
                    self.words.insert(word.into(), count);
                }
            }
        }
    }

    /// The counts so far, sorted bytewise.
    pub fn sorted(&self) -> FlatCounts {
        let mut entries: Vec<(&[u8], u64)> = self
            .words
            .iter()
            .map(|(word, &count)| (&**word, count))
            .collect();
        // Keys are unique, so an unstable sort is still deterministic.
        entries.par_sort_unstable_by(|left, right| left.0.cmp(right.0));
        let bytes = entries.iter().map(|(word, _)| word.len()).sum();
        let mut flat = FlatCounts::with_capacity(entries.len(), bytes);
        for (word, count) in entries {
            flat.push(word, count);
        }
        flat
    }
}

/// Why flat count buffers are not well formed: the facts, for the caller to word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountsError {
    /// There must be one more offset than counts.
    OffsetsLength { offsets: usize, counts: usize },
    /// The offsets must run from 0 to the data length.
    OffsetsEnds { first: i64, last: i64, data: usize },
    /// `offsets[index] > offsets[index + 1]`.
    OffsetsDecrease { index: usize },
    /// Pre-token `index` is empty (sorted counts hold none).
    EmptyPreToken { index: usize },
    /// Pre-tokens `index - 1` and `index` are not in strictly increasing byte order.
    Unsorted { index: usize },
}

/// Counted pre-tokens as flat buffers: pre-token i is `data[offsets[i]..offsets[i + 1]]`,
/// seen `counts[i]` times. Checked once, in `new`, so every algorithm can index it freely.
#[derive(Clone, Copy)]
pub struct PreTokenCounts<'a> {
    data: &'a [u8],
    offsets: &'a [i64],
    counts: &'a [u64],
}

impl<'a> PreTokenCounts<'a> {
    /// Checks that there is one more offset than counts and that the offsets rise (never fall)
    /// from 0 to the data length.
    pub fn new(data: &'a [u8], offsets: &'a [i64], counts: &'a [u64]) -> Result<Self, CountsError> {
        if offsets.len() != counts.len() + 1 {
            return Err(CountsError::OffsetsLength {
                offsets: offsets.len(),
                counts: counts.len(),
            });
        }
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        if first != 0 || last != data.len() as i64 {
            return Err(CountsError::OffsetsEnds {
                first,
                last,
                data: data.len(),
            });
        }
        if let Some(index) = offsets.windows(2).position(|pair| pair[0] > pair[1]) {
            return Err(CountsError::OffsetsDecrease { index });
        }
        Ok(PreTokenCounts {
            data,
            offsets,
            counts,
        })
    }

    /// Checks what a merge of sorted counts relies on: pre-tokens non-empty and in strictly
    /// increasing byte order (what `Counter::sorted` produces).
    pub fn check_sorted(&self) -> Result<(), CountsError> {
        if let Some(index) = (0..self.len()).find(|&i| self.offsets[i] == self.offsets[i + 1]) {
            return Err(CountsError::EmptyPreToken { index });
        }
        if let Some(index) = (1..self.len()).find(|&i| self.word(i - 1) >= self.word(i)) {
            return Err(CountsError::Unsorted { index });
        }
        Ok(())
    }

    /// The number of pre-tokens.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Pre-token `i`.
    pub fn word(&self, i: usize) -> &'a [u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// All pre-tokens in order, as slices of the data.
    pub fn words(&self) -> Vec<&'a [u8]> {
        (0..self.len()).map(|i| self.word(i)).collect()
    }

    pub fn offsets(&self) -> &'a [i64] {
        self.offsets
    }

    pub fn counts(&self) -> &'a [u64] {
        self.counts
    }
}

/// The sum of two sorted count lists, by a linear merge.
pub fn merge_sorted(left: &PreTokenCounts, right: &PreTokenCounts) -> FlatCounts {
    let mut merged =
        FlatCounts::with_capacity(left.len() + right.len(), left.data.len() + right.data.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        let (a, b) = (left.word(i), right.word(j));
        match a.cmp(b) {
            std::cmp::Ordering::Less => {
                merged.push(a, left.counts[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                merged.push(b, right.counts[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                merged.push(a, left.counts[i] + right.counts[j]);
                i += 1;
                j += 1;
            }
        }
    }
    for k in i..left.len() {
        merged.push(left.word(k), left.counts[k]);
    }
    for k in j..right.len() {
        merged.push(right.word(k), right.counts[k]);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_buffers_name_the_fact() {
        let data = b"abcd";
        let check =
            |offsets: &[i64], counts: &[u64]| PreTokenCounts::new(data, offsets, counts).err();
        assert_eq!(
            check(&[0, 4], &[1, 1]),
            Some(CountsError::OffsetsLength {
                offsets: 2,
                counts: 2
            })
        );
        assert_eq!(
            check(&[0, 2, 5], &[1, 1]),
            Some(CountsError::OffsetsEnds {
                first: 0,
                last: 5,
                data: 4
            })
        );
        assert_eq!(
            check(&[0, 3, 2, 4], &[1, 1, 1]),
            Some(CountsError::OffsetsDecrease { index: 1 })
        );
        assert_eq!(check(&[0, 2, 2, 4], &[1, 1, 1]), None);
        let empty = PreTokenCounts::new(data, &[0, 2, 2, 4], &[1, 1, 1]).unwrap();
        assert_eq!(
            empty.check_sorted(),
            Err(CountsError::EmptyPreToken { index: 1 })
        );
        let unsorted = PreTokenCounts::new(b"ba", &[0, 1, 2], &[1, 1]).unwrap();
        assert_eq!(
            unsorted.check_sorted(),
            Err(CountsError::Unsorted { index: 1 })
        );
    }

    #[test]
    fn merging_sums_the_counts_of_equal_pre_tokens() {
        let left = PreTokenCounts::new(b"ab", &[0, 1, 2], &[1, 2]).unwrap();
        let right = PreTokenCounts::new(b"bc", &[0, 1, 2], &[3, 4]).unwrap();
        let merged = merge_sorted(&left, &right);
        assert_eq!(
            (merged.data, merged.offsets, merged.counts),
            (b"abc".to_vec(), vec![0, 1, 2, 3], vec![1, 5, 4])
        );
    }
}
