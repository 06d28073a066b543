//! The `Encoder`: pre-tokeniser + segmenter + special tokens + the id -> bytes table. The Python
//! `Tokenizer` wraps one; every segmenter file adds its own constructor through a separate
//! `#[pymethods] impl Encoder` block that calls `Encoder::from_parts`.
//!
//! Special tokens follow tiktoken: a *policy* names which special tokens become their ids
//! (allowed) and which raise if their text occurs anywhere in the input (disallowed); any other
//! special-token text is ordinary text. Policies are built once and reused across calls.
use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use aho_corasick::{AhoCorasick, MatchKind};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::rng::SplitMix64;
use super::{merges, RandomSegmenter, RankedSegmenter, Segmenter};
use crate::pretokenize::PreTokenizer;

pyo3::create_exception!(
    polytok._core,
    SpecialTokenFound,
    PyException,
    "A disallowed special token occurs in the input: args = (token bytes, document index)."
);
pyo3::create_exception!(
    polytok._core,
    InvalidTokenId,
    PyException,
    "An id that is no token: args = (id, position in the input)."
);
pyo3::create_exception!(
    polytok._core,
    InvalidPattern,
    PyException,
    "The pre-tokenisation regex does not compile: args = (message,)."
);

/// Why an `Encoder` could not be built.
pub enum BuildError {
    Pattern(String),
    Vocabulary(String),
}

impl From<BuildError> for PyErr {
    fn from(error: BuildError) -> PyErr {
        match error {
            BuildError::Pattern(message) => InvalidPattern::new_err(message),
            BuildError::Vocabulary(message) => PyValueError::new_err(message),
        }
    }
}

#[pyclass(module = "polytok._core", frozen)]
pub struct Encoder {
    pretokenizer: PreTokenizer,
    segmenter: Box<dyn Segmenter>,
    /// The bytes of every id back to back: id i is `token_data[token_offsets[i]..token_offsets[i+1]]`.
    token_data: Vec<u8>,
    token_offsets: Vec<usize>,
    /// Whether each id below `token_offsets.len() - 1` is a token (special ids may leave gaps).
    token_known: Vec<bool>,
    special_tokens: Vec<(Vec<u8>, u32)>,
}

/// Which special tokens are ids (allowed) and which raise (disallowed); built by `special_policy`.
#[pyclass(module = "polytok._core", frozen)]
pub struct SpecialPolicy {
    /// Leftmost-longest matcher of the allowed tokens, with the id of each pattern.
    allowed: Option<(AhoCorasick, Vec<u32>)>,
    /// Matcher of the disallowed texts, with each pattern's bytes for the error.
    disallowed: Option<(AhoCorasick, Vec<Vec<u8>>)>,
}

impl Encoder {
    /// This encoder with a pre-tokeniser that drops unmatched text (loaded HF pipelines).
    pub fn dropping_unmatched(mut self) -> Self {
        self.pretokenizer.drop_unmatched();
        self
    }

    /// An encoder from its parts. `tokens[i]` are the bytes of ordinary id i; special tokens map
    /// their bytes to ids that must not collide with ordinary ids. Special tokens are never split
    /// by the pattern: the encoder cuts them out before the pre-tokeniser runs.
    pub fn from_parts(
        pattern: Option<&str>,
        segmenter: Box<dyn Segmenter>,
        tokens: Vec<Vec<u8>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> Result<Self, BuildError> {
        let pretokenizer = PreTokenizer::new(pattern, Vec::new()).map_err(BuildError::Pattern)?;
        let size = special_tokens
            .iter()
            .map(|&(_, id)| id as usize + 1)
            .chain([tokens.len()])
            .max()
            .unwrap_or(0);
        let mut by_id: Vec<Option<&[u8]>> = tokens.iter().map(|t| Some(&t[..])).collect();
        by_id.resize(size, None);
        for (bytes, id) in &special_tokens {
            if bytes.is_empty() {
                return Err(BuildError::Vocabulary(format!(
                    "special token {id} is empty"
                )));
            }
            if by_id[*id as usize].is_some() {
                return Err(BuildError::Vocabulary(format!(
                    "special token id {id} is already a token"
                )));
            }
            by_id[*id as usize] = Some(bytes);
        }
        let mut token_data = Vec::new();
        let mut token_offsets = vec![0];
        for token in &by_id {
            token_data.extend_from_slice(token.unwrap_or(b""));
            token_offsets.push(token_data.len());
        }
        let token_known = by_id.iter().map(Option::is_some).collect();
        Ok(Encoder {
            pretokenizer,
            segmenter,
            token_data,
            token_offsets,
            token_known,
            special_tokens,
        })
    }

    /// Text that is already one pre-token -> ids, appended to `out`, skipping the pre-tokeniser
    /// (whose UTF-8 check over the whole text costs ~6% where the caller guarantees valid UTF-8).
    pub(crate) fn segment_word_into(&self, word: &[u8], out: &mut Vec<u32>) {
        self.segmenter.segment(word, out);
    }

    /// Ordinary text (no special tokens) -> ids, appended to `out`.
    pub fn encode_ordinary_into(&self, text: &[u8], out: &mut Vec<u32>) {
        self.pretokenizer
            .for_each_piece(text, |piece| self.segmenter.segment(piece, out));
    }

    /// Text -> ids under a special-token policy (None: all special-token text is ordinary).
    /// Err holds the bytes of a disallowed special token found in the text.
    pub fn encode_into(
        &self,
        text: &[u8],
        policy: Option<&SpecialPolicy>,
        out: &mut Vec<u32>,
    ) -> Result<(), Vec<u8>> {
        for_each_part(text, policy, |part| match part {
            Part::Text(text) => self.encode_ordinary_into(text, out),
            Part::Special(id) => out.push(id),
        })
    }

    /// Like `encode_into`, with each pre-token cut at random by `random` (subword regularisation).
    pub fn encode_random_into(
        &self,
        text: &[u8],
        policy: Option<&SpecialPolicy>,
        random: &dyn RandomSegmenter,
        strength: f64,
        rng: &mut SplitMix64,
        out: &mut Vec<u32>,
    ) -> Result<(), Vec<u8>> {
        for_each_part(text, policy, |part| match part {
            Part::Text(text) => self.pretokenizer.for_each_piece(text, |piece| {
                random.segment_random(piece, strength, rng, out)
            }),
            Part::Special(id) => out.push(id),
        })
    }

    /// The `n` best distinct cuts of the whole text under `policy`, best first, with their scores
    /// (sums over the pre-tokens; a special token adds 0). Pre-tokens are cut independently, so
    /// the n best of the text are among the combinations of each pre-token's n best.
    pub fn encode_nbest(
        &self,
        text: &[u8],
        policy: Option<&SpecialPolicy>,
        ranked: &dyn RankedSegmenter,
        n: usize,
    ) -> Result<Vec<(Vec<u32>, f64)>, Vec<u8>> {
        let mut combined = NBest::new(n);
        for_each_part(text, policy, |part| match part {
            Part::Text(text) => self
                .pretokenizer
                .for_each_piece(text, |piece| combined.append(ranked.nbest(piece, n))),
            Part::Special(id) => combined.append(vec![(vec![id], 0.0)]),
        })?;
        Ok(combined.finish())
    }

    /// The bytes of `ids`; Err holds (id, position) of the first id that is no token.
    pub fn decode_into(
        &self,
        ids: impl Iterator<Item = i64>,
        out: &mut Vec<u8>,
    ) -> Result<(), (i64, usize)> {
        for (position, id) in ids.enumerate() {
            if id < 0 || id as usize >= self.token_known.len() || !self.token_known[id as usize] {
                return Err((id, position));
            }
            let id = id as usize;
            out.extend_from_slice(
                &self.token_data[self.token_offsets[id]..self.token_offsets[id + 1]],
            );
        }
        Ok(())
    }

    fn encode_one(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<&SpecialPolicy>,
    ) -> PyResult<Vec<u32>> {
        let text = text_bytes(text)?;
        let mut ids = Vec::new();
        py.detach(|| self.encode_into(&text, policy, &mut ids))
            .map_err(|token| special_found(py, &token, 0))?;
        Ok(ids)
    }

    /// The segmenter's random cut of kind `kind` ("sample" or "dropout"), or why there is none.
    fn random_segmenter(&self, kind: &str) -> PyResult<&dyn RandomSegmenter> {
        match self.segmenter.random() {
            Some(random) if random.kind().name() == kind => Ok(random),
            _ => Err(PyValueError::new_err(format!(
                "this segmenter offers no {kind:?} randomisation"
            ))),
        }
    }

    /// Runs `work(document index, text)` on every text in parallel (order kept), on
    /// `num_threads` threads or rayon's default pool. Err: (document index, token) of the first
    /// document with a disallowed token.
    pub(crate) fn run_batch<T: Send>(
        &self,
        py: Python<'_>,
        texts: &[Bound<'_, PyAny>],
        num_threads: Option<usize>,
        work: impl Fn(usize, &[u8]) -> Result<T, Vec<u8>> + Sync + Send,
    ) -> PyResult<Vec<T>> {
        let texts: Vec<Cow<[u8]>> = texts.iter().map(text_bytes).collect::<PyResult<_>>()?;
        let results: Vec<Result<T, Vec<u8>>> = py.detach(|| {
            with_threads(num_threads, || {
                texts
                    .par_iter()
                    .enumerate()
                    .map(|(index, text)| work(index, text))
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

/// A stretch of input once the special-token policy has been applied.
enum Part<'a> {
    Text(&'a [u8]),
    Special(u32),
}

/// Calls `visit` on each stretch of ordinary text and each allowed special token of `text`, in
/// order (policy None: all of it is ordinary text). Err holds the bytes of a disallowed special
/// token found in the text; then nothing is visited.
fn for_each_part<'a>(
    text: &'a [u8],
    policy: Option<&SpecialPolicy>,
    mut visit: impl FnMut(Part<'a>),
) -> Result<(), Vec<u8>> {
    let Some(policy) = policy else {
        visit(Part::Text(text));
        return Ok(());
    };
    if let Some((matcher, texts)) = &policy.disallowed {
        if let Some(found) = matcher.find(text) {
            return Err(texts[found.pattern().as_usize()].clone());
        }
    }
    match &policy.allowed {
        None => visit(Part::Text(text)),
        Some((matcher, ids)) => {
            let mut start = 0;
            for found in matcher.find_iter(text) {
                if found.start() > start {
                    visit(Part::Text(&text[start..found.start()]));
                }
                visit(Part::Special(ids[found.pattern().as_usize()]));
                start = found.end();
            }
            if start < text.len() {
                visit(Part::Text(&text[start..]));
            }
        }
    }
    Ok(())
}

/// The `n` best cuts of a sequence of independently cut parts, built part by part. Each step
/// keeps only back-pointers (which cut of the prefix, which option of the part), so a cut is
/// spelled out once, at the end, instead of being copied at every step.
struct NBest {
    n: usize,
    /// The options of each part: (ids, score), best first.
    options: Vec<Vec<(Vec<u32>, f64)>>,
    /// After each part, the n best cuts so far as (score, rank of the prefix's cut, option).
    steps: Vec<Vec<(f64, usize, usize)>>,
}

impl NBest {
    fn new(n: usize) -> Self {
        NBest {
            n,
            options: Vec::new(),
            steps: Vec::new(),
        }
    }

    fn append(&mut self, options: Vec<(Vec<u32>, f64)>) {
        let start = [(0.0, 0, 0)];
        let previous = self.steps.last().map_or(&start[..], |step| &step[..]);
        let mut candidates: Vec<(f64, usize, usize)> =
            Vec::with_capacity(previous.len() * options.len());
        for (rank, &(prefix_score, _, _)) in previous.iter().enumerate() {
            // Both lists are best first, so (rank, option) comes after the (rank + 1)·(option + 1)
            // pairs at or before both indices: only pairs with that product at most n can be kept.
            for (option, &(_, score)) in options.iter().enumerate().take(self.n / (rank + 1)) {
                candidates.push((prefix_score + score, rank, option));
            }
        }
        // Ties keep the order of the prefix's cut, then of the part's option: deterministic.
        candidates.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
        candidates.truncate(self.n);
        self.steps.push(candidates);
        self.options.push(options);
    }

    fn finish(self) -> Vec<(Vec<u32>, f64)> {
        if self.n == 0 {
            return Vec::new();
        }
        let Some(last) = self.steps.last() else {
            return vec![(Vec::new(), 0.0)]; // empty text: its one cut is empty
        };
        last.iter()
            .enumerate()
            .map(|(mut rank, &(score, _, _))| {
                let mut chosen = Vec::with_capacity(self.steps.len());
                for step in self.steps.iter().rev() {
                    let (_, previous, option) = step[rank];
                    chosen.push(option);
                    rank = previous;
                }
                let ids = chosen
                    .iter()
                    .rev()
                    .zip(&self.options)
                    .flat_map(|(&option, options)| options[option].0.iter().copied())
                    .collect();
                (ids, score)
            })
            .collect()
    }
}

/// Runs `work` (which may use rayon) on rayon's default pool, or with `Some(threads)` on a
/// kept pool of that many threads: how every batch call honours its `num_threads`.
pub(crate) fn with_threads<T: Send>(
    num_threads: Option<usize>,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    Ok(match num_threads {
        None => work(),
        Some(threads) => thread_pool(threads)
            .map_err(PyValueError::new_err)?
            .install(work),
    })
}

/// A rayon pool of `threads` threads, built on first use and kept: building one per call would
/// cost thread start-up each time and throw away the threads' merged-piece caches.
fn thread_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    static POOLS: OnceLock<Mutex<FxHashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.get(&threads) {
        return Ok(pool.clone());
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())?,
    );
    pools.insert(threads, pool.clone());
    Ok(pool)
}

fn special_found(py: Python<'_>, token: &[u8], document: usize) -> PyErr {
    SpecialTokenFound::new_err((PyBytes::new(py, token).unbind(), document))
}

/// The bytes of a str (UTF-8; lone surrogates kept as their 3-byte "surrogatepass" form, which
/// the pre-tokeniser treats as invalid bytes, so nothing is lost), bytes or bytearray.
fn text_bytes<'a>(text: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(string) = text.cast::<PyString>() {
        return match string.to_str() {
            Ok(s) => Ok(Cow::Borrowed(s.as_bytes())),
            Err(_) => {
                let encoded = string.call_method1("encode", ("utf-8", "surrogatepass"))?;
                Ok(Cow::Owned(encoded.cast::<PyBytes>()?.as_bytes().to_vec()))
            }
        };
    }
    if let Ok(bytes) = text.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(bytes) = text.cast::<PyByteArray>() {
        return Ok(Cow::Owned(bytes.to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "expected str, bytes or bytearray to encode, got {}",
        text.get_type().name()?
    )))
}

#[pymethods]
impl Encoder {
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
            None => Box::new(merges::from_ranks(&tokens).map_err(PyValueError::new_err)?),
            Some(merges) => {
                Box::new(merges::from_merges(&tokens, &merges).map_err(PyValueError::new_err)?)
            }
        };
        Ok(Encoder::from_parts(
            pattern,
            segmenter,
            tokens,
            special_tokens,
        )?)
    }

    /// A policy: `allowed` special tokens (their bytes) become ids, `disallowed` texts raise.
    fn special_policy(
        &self,
        allowed: Vec<Vec<u8>>,
        disallowed: Vec<Vec<u8>>,
    ) -> PyResult<SpecialPolicy> {
        let build = |texts: &[Vec<u8>], kind: MatchKind| {
            AhoCorasick::builder()
                .match_kind(kind)
                .build(texts)
                .map_err(|e| PyValueError::new_err(e.to_string()))
        };
        let allowed = if allowed.is_empty() {
            None
        } else {
            let ids = allowed
                .iter()
                .map(|text| {
                    self.special_tokens
                        .iter()
                        .find(|(t, _)| t == text)
                        .map(|&(_, id)| id)
                        .ok_or_else(|| {
                            PyValueError::new_err(format!(
                                "{:?} is not a special token",
                                String::from_utf8_lossy(text)
                            ))
                        })
                })
                .collect::<PyResult<Vec<u32>>>()?;
            Some((build(&allowed, MatchKind::LeftmostLongest)?, ids))
        };
        let disallowed: Vec<Vec<u8>> = disallowed.into_iter().filter(|t| !t.is_empty()).collect();
        let disallowed = if disallowed.is_empty() {
            None
        } else {
            Some((build(&disallowed, MatchKind::LeftmostFirst)?, disallowed))
        };
        Ok(SpecialPolicy {
            allowed,
            disallowed,
        })
    }

    /// Ids of one text (str or bytes) under `policy` (None: special-token text is ordinary).
    #[pyo3(signature = (text, policy=None))]
    fn encode(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<PyRef<'_, SpecialPolicy>>,
    ) -> PyResult<Vec<u32>> {
        self.encode_one(py, text, policy.as_deref())
    }

    /// Ids of one text as a uint32 numpy array (no Python list in between).
    #[pyo3(signature = (text, policy=None))]
    fn encode_to_numpy<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        policy: Option<PyRef<'py, SpecialPolicy>>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        Ok(PyArray1::from_vec(
            py,
            self.encode_one(py, text, policy.as_deref())?,
        ))
    }

    /// Ids of many texts, in parallel with the GIL released; the order of the input is kept.
    #[pyo3(signature = (texts, policy=None, num_threads=None))]
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: Vec<Bound<'_, PyAny>>,
        policy: Option<PyRef<'_, SpecialPolicy>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let policy = policy.as_deref();
        self.run_batch(py, &texts, num_threads, |_, text| {
            let mut ids = Vec::new();
            self.encode_into(text, policy, &mut ids).map(|()| ids)
        })
    }

    /// The number of tokens of each text (uint64 array), in parallel, without keeping the ids.
    #[pyo3(signature = (texts, policy=None, num_threads=None))]
    fn count_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        policy: Option<PyRef<'py, SpecialPolicy>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let policy = policy.as_deref();
        let counts = self.run_batch(py, &texts, num_threads, |_, text| {
            let mut ids = Vec::new();
            self.encode_into(text, policy, &mut ids)
                .map(|()| ids.len() as u64)
        })?;
        Ok(PyArray1::from_vec(py, counts))
    }

    /// How often each id occurs in the ordinary encoding of `texts` (uint64, one entry per id),
    /// in parallel without building the id lists: what corpus metrics need from an encoding.
    #[pyo3(signature = (texts, num_threads=None))]
    fn token_histogram<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let texts: Vec<Cow<[u8]>> = texts.iter().map(text_bytes).collect::<PyResult<_>>()?;
        let size = self.token_offsets.len() - 1;
        let histogram = py.detach(|| {
            // Integer sums: the result is the same whatever the split across threads.
            with_threads(num_threads, || {
                texts
                    .par_iter()
                    .fold(
                        || (vec![0u64; size], Vec::new()),
                        |(mut histogram, mut ids), text| {
                            ids.clear();
                            // No policy: special-token text is ordinary, so this cannot fail.
                            let _ = self.encode_into(text, None, &mut ids);
                            for &id in &ids {
                                histogram[id as usize] += 1;
                            }
                            (histogram, ids)
                        },
                    )
                    .map(|(histogram, _)| histogram)
                    .reduce(
                        || vec![0u64; size],
                        |mut total, part| {
                            total.iter_mut().zip(part).for_each(|(sum, count)| *sum += count);
                            total
                        },
                    )
            })
        })?;
        Ok(PyArray1::from_vec(py, histogram))
    }

    /// Whether this encoder's segmenter offers `ability`: "sample" (Unigram subword sampling),
    /// "dropout" (BPE-dropout) or "nbest" (ranked cuts).
    fn offers(&self, ability: &str) -> PyResult<bool> {
        Ok(match ability {
            "nbest" => self.segmenter.ranked().is_some(),
            _ => self.random_segmenter(ability).is_ok(),
        })
    }

    /// Ids of one text with each pre-token cut at random: `kind` "sample" draws a cut with
    /// probability ∝ P^strength, "dropout" skips each merge with probability strength. The draws
    /// come from `seed` as for document 0 of a batch.
    #[pyo3(signature = (text, policy, kind, strength, seed))]
    fn encode_sampled(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<PyRef<'_, SpecialPolicy>>,
        kind: &str,
        strength: f64,
        seed: u64,
    ) -> PyResult<Vec<u32>> {
        let random = self.random_segmenter(kind)?;
        let (text, policy) = (text_bytes(text)?, policy.as_deref());
        let mut ids = Vec::new();
        py.detach(|| {
            let mut rng = SplitMix64::for_document(seed, 0);
            self.encode_random_into(&text, policy, random, strength, &mut rng, &mut ids)
        })
        .map_err(|token| special_found(py, &token, 0))?;
        Ok(ids)
    }

    /// `encode_sampled` of many texts in parallel; document i draws from (seed, i), so the ids
    /// do not depend on the thread count.
    #[pyo3(signature = (texts, policy, kind, strength, seed, num_threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn encode_batch_sampled(
        &self,
        py: Python<'_>,
        texts: Vec<Bound<'_, PyAny>>,
        policy: Option<PyRef<'_, SpecialPolicy>>,
        kind: &str,
        strength: f64,
        seed: u64,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let random = self.random_segmenter(kind)?;
        let policy = policy.as_deref();
        self.run_batch(py, &texts, num_threads, |index, text| {
            let mut rng = SplitMix64::for_document(seed, index as u64);
            let mut ids = Vec::new();
            self.encode_random_into(text, policy, random, strength, &mut rng, &mut ids)
                .map(|()| ids)
        })
    }

    /// The `n` best distinct cuts of one text as (ids, score), best first.
    #[pyo3(name = "encode_nbest", signature = (text, policy, n))]
    fn py_encode_nbest(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        policy: Option<PyRef<'_, SpecialPolicy>>,
        n: usize,
    ) -> PyResult<Vec<(Vec<u32>, f64)>> {
        let ranked = self.segmenter.ranked().ok_or_else(|| {
            PyValueError::new_err("this segmenter does not rank its cuts: no n-best lists")
        })?;
        let (text, policy) = (text_bytes(text)?, policy.as_deref());
        py.detach(|| self.encode_nbest(&text, policy, ranked, n))
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
            self.decode_into(array.as_array().iter().copied(), &mut out)
        } else {
            let ids: Vec<i64> = ids.extract()?;
            self.decode_into(ids.into_iter(), &mut out)
        };
        result.map_err(|(id, position)| InvalidTokenId::new_err((id, position)))?;
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Encoder>()?;
    m.add_class::<SpecialPolicy>()?;
    m.add("SpecialTokenFound", m.py().get_type::<SpecialTokenFound>())?;
    m.add("InvalidTokenId", m.py().get_type::<InvalidTokenId>())?;
    m.add("InvalidPattern", m.py().get_type::<InvalidPattern>())?;
    Ok(())
}
