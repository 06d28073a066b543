//! Counting pre-tokens: the unique pre-tokens of a corpus with their 64-bit counts.
//!
//! A batch of documents is counted in parallel with rayon: each worker fills a hash map whose
//! keys borrow the documents' bytes (no allocation per occurrence), the maps are merged pairwise,
//! and only words never seen before are copied into the counter's own map. Counts are exact sums,
//! so the sorted result does not depend on the number of threads or on how work was split.
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyByteArray, PyBytes, PyString};
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

/// Borrowed view of flattened counts, checked to be well formed.
pub struct WordsView<'a> {
    data: &'a [u8],
    offsets: &'a [i64],
    counts: &'a [u64],
}

impl<'a> WordsView<'a> {
    /// Checks the offsets bound `data` and that words are non-empty and strictly increasing.
    pub fn new(data: &'a [u8], offsets: &'a [i64], counts: &'a [u64]) -> Result<Self, String> {
        if offsets.len() != counts.len() + 1 {
            return Err(format!(
                "{} offsets for {} counts; expected one more offset than counts",
                offsets.len(),
                counts.len()
            ));
        }
        if offsets[0] != 0 || offsets[offsets.len() - 1] != data.len() as i64 {
            return Err(format!(
                "offsets run from {} to {}; expected 0 to {} (the data length)",
                offsets[0],
                offsets[offsets.len() - 1],
                data.len()
            ));
        }
        if let Some(i) = offsets.windows(2).position(|pair| pair[1] <= pair[0]) {
            return Err(format!("word {i} is empty or its offsets decrease"));
        }
        let view = WordsView {
            data,
            offsets,
            counts,
        };
        if let Some(i) = (1..view.len()).find(|&i| view.word(i - 1) >= view.word(i)) {
            return Err(format!(
                "words {} and {i} are not in strictly increasing byte order",
                i - 1
            ));
        }
        Ok(view)
    }

    fn len(&self) -> usize {
        self.counts.len()
    }

    fn word(&self, i: usize) -> &'a [u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// The sum of two sorted count lists, by a linear merge.
pub fn merge_sorted(left: &WordsView, right: &WordsView) -> FlatCounts {
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

/// A document handed over from Python, kept alive without copying while the GIL is released.
enum Document {
    Text(PyBackedStr),
    Bytes(PyBackedBytes),
}

impl AsRef<[u8]> for Document {
    fn as_ref(&self) -> &[u8] {
        match self {
            Document::Text(text) => text.as_bytes(),
            Document::Bytes(bytes) => bytes,
        }
    }
}

impl Document {
    fn extract(item: &Bound<'_, PyAny>, index: usize) -> PyResult<Self> {
        if let Ok(text) = item.cast::<PyString>() {
            return match text.extract::<PyBackedStr>() {
                Ok(text) => Ok(Document::Text(text)),
                // Lone surrogates have no UTF-8 form; keep them as bytes, as the pre-tokeniser does.
                Err(_) => Ok(Document::Bytes(
                    text.call_method1("encode", ("utf-8", "surrogatepass"))?
                        .extract::<PyBackedBytes>()?,
                )),
            };
        }
        if item.is_instance_of::<PyBytes>() || item.is_instance_of::<PyByteArray>() {
            return Ok(Document::Bytes(item.extract::<PyBackedBytes>()?));
        }
        Err(PyTypeError::new_err(format!(
            "document {index} is {}; expected str or bytes",
            item.get_type().name()?
        )))
    }
}

/// Flattened counts as Python receives them: (data, offsets int64, counts uint64).
type PyFlatCountsOut<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u64>>,
);

fn flat_to_python<'py>(py: Python<'py>, flat: FlatCounts) -> PyResult<PyFlatCountsOut<'py>> {
    let data = PyBytes::new(py, &flat.data);
    Ok((
        data,
        flat.offsets.into_pyarray(py),
        flat.counts.into_pyarray(py),
    ))
}

/// Counts the pre-tokens of batches of documents on a thread pool of its own.
#[pyclass(name = "WordCounter", module = "polytok._core")]
pub struct PyWordCounter {
    counter: Counter,
    pool: rayon::ThreadPool,
}

#[pymethods]
impl PyWordCounter {
    /// `num_threads=None` uses every core.
    #[new]
    #[pyo3(signature = (pattern, special_tokens=Vec::new(), num_threads=None))]
    fn new(
        pattern: Option<&str>,
        special_tokens: Vec<Vec<u8>>,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        if special_tokens.iter().any(|token| token.is_empty()) {
            return Err(PyValueError::new_err("a special token is empty"));
        }
        let pretokenizer =
            PreTokenizer::new(pattern, special_tokens).map_err(PyValueError::new_err)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads.unwrap_or(0))
            .build()
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        Ok(PyWordCounter {
            counter: Counter::new(pretokenizer),
            pool,
        })
    }

    /// Counts a batch of documents (str or bytes) with the GIL released; returns their size in bytes.
    fn add(&mut self, py: Python<'_>, documents: &Bound<'_, PyAny>) -> PyResult<u64> {
        let documents = documents
            .try_iter()?
            .enumerate()
            .map(|(index, item)| Document::extract(&item?, index))
            .collect::<PyResult<Vec<Document>>>()?;
        let size = documents
            .iter()
            .map(|document| document.as_ref().len() as u64)
            .sum();
        let (counter, pool) = (&mut self.counter, &self.pool);
        py.detach(|| pool.install(|| counter.add(&documents)));
        Ok(size)
    }

    /// The number of distinct pre-tokens counted so far.
    fn __len__(&self) -> usize {
        self.counter.words.len()
    }

    /// (data, offsets int64, counts uint64) of the pre-tokens so far, sorted bytewise.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<PyFlatCountsOut<'py>> {
        let (counter, pool) = (&self.counter, &self.pool);
        let flat = py.detach(|| pool.install(|| counter.sorted()));
        flat_to_python(py, flat)
    }
}

/// Flattened counts as Python hands them to `merge_word_counts`.
type PyFlatCountsIn<'py> = (
    PyBackedBytes,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, u64>,
);

fn checked_view<'a>(
    py: Python<'_>,
    side: &str,
    flat: &'a PyFlatCountsIn<'_>,
) -> PyResult<WordsView<'a>> {
    let (data, offsets, counts): (&[u8], &[i64], &[u64]) =
        (&flat.0, flat.1.as_slice()?, flat.2.as_slice()?);
    py.detach(|| WordsView::new(data, offsets, counts))
        .map_err(|error| PyValueError::new_err(format!("{side} operand: {error}")))
}

/// The sum of two flattened, sorted count lists, as (data, offsets, counts).
#[pyfunction]
fn merge_word_counts<'py>(
    py: Python<'py>,
    left: PyFlatCountsIn<'py>,
    right: PyFlatCountsIn<'py>,
) -> PyResult<PyFlatCountsOut<'py>> {
    let (left, right) = (
        checked_view(py, "left", &left)?,
        checked_view(py, "right", &right)?,
    );
    let merged = py.detach(|| merge_sorted(&left, &right));
    flat_to_python(py, merged)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyWordCounter>()?;
    m.add_function(wrap_pyfunction!(merge_word_counts, m)?)?;
    Ok(())
}
