//! The `Encoder` (`polytok.tokenizer.Tokenizer` drives one), its special-token policies and
//! the standalone shortest-path segmenter. One constructor per segmenter kind; the readers of
//! other libraries' files add theirs in `compat.rs`.
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::OnceLock;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString};
use rayon::prelude::*;

use super::counts::counts_view;
use super::errors::{InvalidTokenId, SpecialTokenFound};
use super::with_threads;
use crate::pretokenize::Input;
use crate::segment::encoder::{Encoder, SpecialPolicy};
use crate::segment::longest_match::LongestMatch;
use crate::segment::rng::SplitMix64;
use crate::segment::shortest_path::ShortestPath;
use crate::segment::viterbi::Viterbi;
use crate::segment::{merges, RandomKind, RandomSegmenter, Segmenter, MAX_UNUSED_IDS};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEncoder>()?;
    m.add_class::<PySpecialPolicy>()?;
    m.add_class::<PyShortestPath>()?;
    m.add("MAX_UNUSED_IDS", MAX_UNUSED_IDS)?;
    Ok(())
}

#[pyclass(name = "Encoder", module = "polytok._core", frozen)]
pub struct PyEncoder {
    pub inner: Encoder,
    /// The Python int of every id, made on first use: a list of ids is then built from
    /// references instead of one new int object per id (most of the cost of a Python list).
    ints: OnceLock<Vec<Py<PyAny>>>,
}

impl PyEncoder {
    pub fn new(inner: Encoder) -> Self {
        PyEncoder {
            inner,
            ints: OnceLock::new(),
        }
    }

    /// `ids` as a Python list.
    fn id_list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.ints.get_or_init(|| {
            (0..self.inner.id_count() as u32)
                .map(|id| id.into_pyobject(py).unwrap().into_any().unbind())
                .collect()
        });
        // SAFETY: PyList_New makes a list of ids.len() empty slots, each filled exactly once
        // below with a new reference (the GIL is held), as PyList_SET_ITEM requires; the list
        // is owned by the Bound before anything can fail.
        unsafe {
            let list = pyo3::ffi::PyList_New(ids.len() as pyo3::ffi::Py_ssize_t);
            let list = Bound::from_owned_ptr_or_err(py, list)?;
            for (index, &id) in ids.iter().enumerate() {
                let int = match ints.get(id as usize) {
                    Some(int) => int.clone_ref(py).into_ptr(),
                    None => id.into_pyobject(py)?.into_ptr(),
                };
                pyo3::ffi::PyList_SET_ITEM(list.as_ptr(), index as pyo3::ffi::Py_ssize_t, int);
            }
            Ok(list.cast_into_unchecked())
        }
    }

    /// Lists of ids as a Python list of lists.
    fn id_lists<'py>(&self, py: Python<'py>, lists: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
        let outer = lists
            .iter()
            .map(|ids| self.id_list(py, ids))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, outer)
    }
}

/// Which special tokens are ids (allowed) and which raise (disallowed); built by
/// `Encoder.special_policy` and reused across calls.
#[pyclass(name = "SpecialPolicy", module = "polytok._core", frozen)]
pub struct PySpecialPolicy {
    inner: SpecialPolicy,
}

/// The core policy of an optional Python one.
fn core_policy<'a>(policy: &'a Option<PyRef<'_, PySpecialPolicy>>) -> Option<&'a SpecialPolicy> {
    policy.as_deref().map(|policy| &policy.inner)
}

/// The random cut named `kind` in Python ("sample" or "dropout").
fn random_kind(kind: &str) -> Option<RandomKind> {
    match kind {
        "sample" => Some(RandomKind::Sample),
        "dropout" => Some(RandomKind::Dropout),
        _ => None,
    }
}

/// The text a group of `encode_batch_to_numpy` holds: enough that a group's buffer and its
/// bookkeeping cost little against its encoding, few enough that the groups spread over the
/// threads.
const GROUP_BYTES: usize = 64 << 10;

/// `texts` cut into ranges of neighbours of about GROUP_BYTES each (a longer text alone).
fn groups_of(texts: &[Text]) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, text) in texts.iter().enumerate() {
        bytes += text.input().bytes().len();
        if bytes >= GROUP_BYTES {
            groups.push(start..index + 1);
            (start, bytes) = (index + 1, 0);
        }
    }
    if start < texts.len() {
        groups.push(start..texts.len());
    }
    groups
}

/// The groups' ids back to back and every text's offset into them; the ids are copied in
/// parallel, each group into its own part of the array.
fn flatten(buffers: &[(Vec<u32>, Vec<usize>)]) -> (Vec<u32>, Vec<i64>) {
    let total: usize = buffers.iter().map(|(ids, _)| ids.len()).sum();
    let mut offsets = Vec::with_capacity(buffers.iter().map(|(_, ends)| ends.len()).sum::<usize>() + 1);
    offsets.push(0i64);
    let mut flat: Vec<u32> = Vec::with_capacity(total);
    let mut parts = Vec::with_capacity(buffers.len());
    let mut rest = &mut flat.spare_capacity_mut()[..total];
    for (ids, ends) in buffers {
        let base = *offsets.last().unwrap();
        offsets.extend(ends.iter().map(|&end| base + end as i64));
        let (part, after) = rest.split_at_mut(ids.len());
        parts.push((part, ids));
        rest = after;
    }
    parts.into_par_iter().for_each(|(part, ids)| {
        for (slot, &id) in part.iter_mut().zip(ids) {
            slot.write(id);
        }
    });
    // SAFETY: the parts cover flat[..total] and every id of them was written above.
    unsafe { flat.set_len(total) };
    (flat, offsets)
}

pub fn special_found(py: Python<'_>, token: &[u8], document: usize) -> PyErr {
    SpecialTokenFound::new_err((PyBytes::new(py, token).unbind(), document))
}

/// A text argument: a str's UTF-8 (borrowed, known valid), or bytes that may be invalid UTF-8
/// (a str with lone surrogates becomes its 3-byte "surrogatepass" form, which the
/// pre-tokeniser treats as invalid bytes, so nothing is lost).
pub enum Text<'a> {
    Str(&'a str),
    Bytes(Cow<'a, [u8]>),
}

impl Text<'_> {
    /// The text as the core's input (a str's UTF-8 is not checked again).
    pub fn input(&self) -> Input<'_> {
        match self {
            Text::Str(text) => Input::Str(text),
            Text::Bytes(bytes) => Input::Bytes(bytes),
        }
    }
}

/// The text of a str, bytes or bytearray argument.
pub fn text_of<'a>(text: &'a Bound<'_, PyAny>) -> PyResult<Text<'a>> {
    if let Ok(string) = text.cast::<PyString>() {
        return match string.to_str() {
            Ok(s) => Ok(Text::Str(s)),
            Err(_) => {
                let encoded = string.call_method1("encode", ("utf-8", "surrogatepass"))?;
                Ok(Text::Bytes(Cow::Owned(encoded.cast::<PyBytes>()?.as_bytes().to_vec())))
            }
        };
    }
    if let Ok(bytes) = text.cast::<PyBytes>() {
        return Ok(Text::Bytes(Cow::Borrowed(bytes.as_bytes())));
    }
    if let Ok(bytes) = text.cast::<PyByteArray>() {
        return Ok(Text::Bytes(Cow::Owned(bytes.to_vec())));
    }
    Err(PyTypeError::new_err(format!(
        "expected str, bytes or bytearray to encode, got {}",
        text.get_type().name()?
    )))
}

/// The bytes of a str (UTF-8, see `Text`), bytes or bytearray.
pub fn text_bytes<'a>(text: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    Ok(match text_of(text)? {
        Text::Str(text) => Cow::Borrowed(text.as_bytes()),
        Text::Bytes(bytes) => bytes,
    })
}

thread_local! {
    /// The buffer one-text calls encode into before the ids are copied out, kept between calls
    /// so that a call allocates nothing but its result (at most SCRATCH_KEPT ids are kept).
    static SCRATCH: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
}

/// The most ids of capacity the scratch buffer keeps between calls (16 MB).
const SCRATCH_KEPT: usize = 1 << 22;

impl PyEncoder {
    /// `output(ids)` on the ids of one text, encoded into this thread's scratch buffer.
    fn encode_one<'py, T>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: Option<&SpecialPolicy>,
        output: impl FnOnce(&[u32]) -> PyResult<T>,
    ) -> PyResult<T> {
        let text = text_of(text)?;
        let mut ids = SCRATCH.take();
        ids.clear();
        let encoded = py.detach(|| self.inner.encode_input_into(text.input(), policy, &mut ids));
        let result = match encoded {
            Ok(()) => output(&ids),
            Err(token) => Err(special_found(py, &token, 0)),
        };
        if ids.capacity() <= SCRATCH_KEPT {
            SCRATCH.set(ids);
        }
        result
    }

    /// The segmenter's random cut of kind `kind` ("sample" or "dropout"), or why there is none.
    fn random_segmenter(&self, kind: &str) -> PyResult<&dyn RandomSegmenter> {
        random_kind(kind)
            .and_then(|kind| self.inner.random_segmenter(kind))
            .ok_or_else(|| {
                PyValueError::new_err(format!("this segmenter offers no {kind:?} randomisation"))
            })
    }

    /// Runs `work(document index, text)` on every text in parallel (order kept), with the GIL
    /// released, on `num_threads` threads or rayon's global pool. Err: (document index, token)
    /// of the first document with a disallowed token.
    pub fn run_batch<T: Send>(
        &self,
        py: Python<'_>,
        texts: &[Bound<'_, PyAny>],
        num_threads: Option<usize>,
        work: impl Fn(usize, Input<'_>) -> Result<T, Vec<u8>> + Sync + Send,
    ) -> PyResult<Vec<T>> {
        let texts: Vec<Text> = texts.iter().map(text_of).collect::<PyResult<_>>()?;
        let results: Vec<Result<T, Vec<u8>>> = py.detach(|| {
            with_threads(num_threads, || {
                texts
                    .par_iter()
                    .enumerate()
                    .map(|(index, text)| work(index, text.input()))
                    .collect()
            })
        })?;
        results
            .into_iter()
            .enumerate()
            .map(|(index, result)| result.map_err(|token| special_found(py, &token, index)))
            .collect()
    }
}

#[pymethods]
impl PyEncoder {
    /// A BPE encoder: `merges[k] = (left, right, merged)` replayed in order, or without a merge
    /// list tiktoken's rule with rank = id. `special_tokens` are (bytes, id) pairs.
    #[staticmethod]
    #[pyo3(signature = (pattern, tokens, merges, special_tokens))]
    fn merges(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        merges: Option<Vec<(u32, u32, u32)>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> PyResult<Self> {
        let segmenter: Box<dyn Segmenter> = match merges {
            None => Box::new(merges::from_ranks(&tokens)?),
            Some(merges) => Box::new(merges::from_merges(&tokens, &merges)?),
        };
        let inner = Encoder::from_parts(pattern, segmenter, tokens, special_tokens)?;
        Ok(PyEncoder::new(inner))
    }

    /// A WordPiece encoder: greedy longest match; `vocab` holds spellings, continuation tokens
    /// with the marker in front. Decoding uses the bytes with the marker stripped.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocab, continuation_marker, special_tokens))]
    fn longest_match(
        pattern: Option<&str>,
        vocab: Vec<Vec<u8>>,
        continuation_marker: Option<Vec<u8>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> PyResult<Self> {
        let marker = continuation_marker.filter(|marker| !marker.is_empty());
        let segmenter = LongestMatch::new(&vocab, marker.as_deref())?;
        let decoded = segmenter.decode_table().to_vec();
        let inner = Encoder::from_parts(pattern, Box::new(segmenter), decoded, special_tokens)?;
        Ok(PyEncoder::new(inner))
    }

    /// A Unigram encoder: the Viterbi path, maximising the sum of the tokens' log-probabilities.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocab, scores, special_tokens))]
    fn viterbi(
        pattern: Option<&str>,
        vocab: Vec<Vec<u8>>,
        scores: Vec<f64>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> PyResult<Self> {
        let segmenter = Viterbi::new(&vocab, &scores)?;
        let inner = Encoder::from_parts(pattern, Box::new(segmenter), vocab, special_tokens)?;
        Ok(PyEncoder::new(inner))
    }

    /// A shortest-path encoder (ConvexTok): fewest tokens per pre-token, deterministic ties.
    #[staticmethod]
    #[pyo3(signature = (pattern, vocab, special_tokens))]
    fn shortest_path(
        pattern: Option<&str>,
        vocab: Vec<Vec<u8>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> PyResult<Self> {
        let segmenter = ShortestPath::new(&vocab)?;
        let inner = Encoder::from_parts(pattern, Box::new(segmenter), vocab, special_tokens)?;
        Ok(PyEncoder::new(inner))
    }

    /// A policy: `allowed` special tokens (their bytes) become ids, `disallowed` texts raise.
    fn special_policy(
        &self,
        allowed: Vec<Vec<u8>>,
        disallowed: Vec<Vec<u8>>,
    ) -> PyResult<PySpecialPolicy> {
        let inner = self.inner.special_policy(allowed, disallowed)?;
        Ok(PySpecialPolicy { inner })
    }

    /// Ids of one text (str or bytes) under `policy` (None: special-token text is ordinary).
    #[pyo3(signature = (text, policy))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: Option<PyRef<'py, PySpecialPolicy>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.encode_one(py, text, core_policy(&policy), |ids| self.id_list(py, ids))
    }

    /// The most pieces each thread caches for this encoder (0: no cache).
    fn cache_size(&self) -> usize {
        self.inner.cache_size()
    }

    /// Sets the most pieces each thread caches for this encoder (0: no cache).
    fn set_cache_size(&self, pieces: usize) {
        self.inner.set_cache_size(pieces)
    }

    /// Ids of one text as a uint32 numpy array (no Python list in between).
    #[pyo3(signature = (text, policy))]
    fn encode_to_numpy<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: Option<PyRef<'py, PySpecialPolicy>>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        self.encode_one(py, text, core_policy(&policy), |ids| {
            Ok(PyArray1::from_slice(py, ids))
        })
    }

    /// Ids of many texts, in parallel with the GIL released; the order of the input is kept.
    #[pyo3(signature = (texts, policy, num_threads))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        policy: Option<PyRef<'py, PySpecialPolicy>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let policy = core_policy(&policy);
        let lists = self.run_batch(py, &texts, num_threads, |_, text| {
            let mut ids = Vec::new();
            self.inner.encode_input_into(text, policy, &mut ids).map(|()| ids)
        })?;
        self.id_lists(py, &lists)
    }

    /// Ids of many texts as one flat uint32 array and int64 offsets (text i is
    /// ids[offsets[i]:offsets[i + 1]]), in parallel with the GIL released. Texts are encoded in
    /// groups of neighbours (about GROUP_BYTES of text each), a buffer a group, and the buffers
    /// are copied into the array in parallel: no buffer per text, no copy on one thread.
    #[pyo3(signature = (texts, policy, num_threads))]
    #[allow(clippy::type_complexity)]
    fn encode_batch_to_numpy<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        policy: Option<PyRef<'py, PySpecialPolicy>>,
        num_threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
        let policy = core_policy(&policy);
        let texts: Vec<Text> = texts.iter().map(text_of).collect::<PyResult<_>>()?;
        let groups = groups_of(&texts);
        let encoded = py.detach(|| {
            with_threads(num_threads, || {
                let buffers: Vec<Result<(Vec<u32>, Vec<usize>), (usize, Vec<u8>)>> = groups
                    .par_iter()
                    .map(|range| {
                        let bytes: usize = texts[range.clone()].iter().map(|text| text.input().bytes().len()).sum();
                        let (mut ids, mut ends) = (Vec::with_capacity(bytes / 3 + 16), Vec::with_capacity(range.len()));
                        for index in range.clone() {
                            self.inner.encode_input_into(texts[index].input(), policy, &mut ids).map_err(|token| (index, token))?;
                            ends.push(ids.len());
                        }
                        Ok((ids, ends))
                    })
                    .collect();
                let buffers: Vec<(Vec<u32>, Vec<usize>)> = buffers.into_iter().collect::<Result<_, _>>()?;
                Ok(flatten(&buffers))
            })
        })?;
        let (flat, offsets) = encoded.map_err(|(index, token)| special_found(py, &token, index))?;
        Ok((PyArray1::from_vec(py, flat), PyArray1::from_vec(py, offsets)))
    }

    /// The number of tokens of each text (uint64 array), in parallel, without keeping the ids.
    #[pyo3(signature = (texts, policy, num_threads))]
    fn count_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        policy: Option<PyRef<'py, PySpecialPolicy>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let policy = core_policy(&policy);
        let counts = self.run_batch(py, &texts, num_threads, |_, text| {
            let mut ids = Vec::new();
            self.inner
                .encode_input_into(text, policy, &mut ids)
                .map(|()| ids.len() as u64)
        })?;
        Ok(PyArray1::from_vec(py, counts))
    }

    /// How often each id occurs in the ordinary encoding of `texts` (uint64, one entry per id),
    /// in parallel without building the id lists: what corpus metrics need from an encoding.
    #[pyo3(signature = (texts, num_threads))]
    fn token_histogram<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let texts: Vec<Cow<[u8]>> = texts.iter().map(text_bytes).collect::<PyResult<_>>()?;
        let inner = &self.inner;
        let histogram =
            py.detach(|| with_threads(num_threads, || inner.token_histogram(&texts)))?;
        Ok(PyArray1::from_vec(py, histogram))
    }

    /// Whether this encoder's segmenter offers `ability`: "sample" (Unigram subword sampling),
    /// "dropout" (BPE-dropout) or "nbest" (ranked cuts).
    fn offers(&self, ability: &str) -> bool {
        match ability {
            "nbest" => self.inner.ranked_segmenter().is_some(),
            _ => self.random_segmenter(ability).is_ok(),
        }
    }

    /// Ids of one text with each pre-token cut at random: `kind` "sample" draws a cut with
    /// probability ∝ P^strength, "dropout" skips each merge with probability strength. The draws
    /// come from `seed` as for document 0 of a batch.
    #[pyo3(signature = (text, policy, kind, strength, seed))]
    fn encode_sampled(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<PyRef<'_, PySpecialPolicy>>,
        kind: &str,
        strength: f64,
        seed: u64,
    ) -> PyResult<Vec<u32>> {
        let random = self.random_segmenter(kind)?;
        let (text, policy) = (text_bytes(text)?, core_policy(&policy));
        let mut ids = Vec::new();
        py.detach(|| {
            let mut rng = SplitMix64::for_document(seed, 0);
            self.inner
                .encode_random_into(&text, policy, random, strength, &mut rng, &mut ids)
        })
        .map_err(|token| special_found(py, &token, 0))?;
        Ok(ids)
    }

    /// `encode_sampled` of many texts in parallel; document i draws from (seed, i), so the ids
    /// do not depend on the thread count.
    #[pyo3(signature = (texts, policy, kind, strength, seed, num_threads))]
    #[allow(clippy::too_many_arguments)]
    fn encode_batch_sampled(
        &self,
        py: Python<'_>,
        texts: Vec<Bound<'_, PyAny>>,
        policy: Option<PyRef<'_, PySpecialPolicy>>,
        kind: &str,
        strength: f64,
        seed: u64,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let random = self.random_segmenter(kind)?;
        let policy = core_policy(&policy);
        self.run_batch(py, &texts, num_threads, |index, text| {
            let mut rng = SplitMix64::for_document(seed, index as u64);
            let mut ids = Vec::new();
            self.inner
                .encode_random_into(text.bytes(), policy, random, strength, &mut rng, &mut ids)
                .map(|()| ids)
        })
    }

    /// The `n` best distinct cuts of one text as (ids, score), best first.
    #[pyo3(signature = (text, policy, n))]
    fn encode_nbest(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<PyRef<'_, PySpecialPolicy>>,
        n: usize,
    ) -> PyResult<Vec<(Vec<u32>, f64)>> {
        let ranked = self.inner.ranked_segmenter().ok_or_else(|| {
            PyValueError::new_err("this segmenter does not rank its cuts: no n-best lists")
        })?;
        let (text, policy) = (text_bytes(text)?, core_policy(&policy));
        py.detach(|| self.inner.encode_nbest(&text, policy, ranked, n))
            .map_err(|token| special_found(py, &token, 0))
    }

    /// The bytes of a sequence of ids (a list, or an int64 numpy array).
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        let result = if let Ok(array) = ids.extract::<PyReadonlyArray1<i64>>() {
            self.inner
                .decode_into(array.as_array().iter().copied(), &mut out)
        } else {
            let ids: Vec<i64> = ids.extract()?;
            self.inner.decode_into(ids.into_iter(), &mut out)
        };
        result.map_err(|(id, position)| InvalidTokenId::new_err((id, position)))?;
        Ok(PyBytes::new(py, &out))
    }
}

/// Standalone Python access to the shortest-path segmenter (certification and tests).
#[pyclass(name = "ShortestPathSegmenter", module = "polytok._core", frozen)]
pub struct PyShortestPath {
    inner: ShortestPath,
}

#[pymethods]
impl PyShortestPath {
    #[new]
    fn new(vocab: Vec<Vec<u8>>) -> PyResult<Self> {
        Ok(PyShortestPath {
            inner: ShortestPath::new(&vocab)?,
        })
    }

    /// Token ids of the tie-broken fewest-token segmentation of one pre-token.
    fn segment(&self, piece: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.inner.segment(piece, &mut out);
        out
    }

    /// Sum over counted pre-tokens (the counts triple) of count x fewest tokens.
    fn count_pre_tokens(
        &self,
        py: Python<'_>,
        data: &[u8],
        offsets: PyReadonlyArray1<'_, i64>,
        counts: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<u64> {
        let counts = counts_view(data, &offsets, &counts)?;
        let inner = &self.inner;
        Ok(py.detach(|| inner.count_tokens(&counts)))
    }
}
