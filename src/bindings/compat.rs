//! The readers of other libraries' files (`polytok.formats`): the character-level encoder
//! constructors, SentencePiece's normaliser, and the calls that run a loaded pipeline's Rust
//! stages over whole documents.
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

use super::encoders::PyEncoder;
use super::with_threads;
use super::encoders::text_bytes;
use crate::compat::added_tokens::AddedTokens;
use crate::compat::char_longest_match::CharLongestMatch;
use crate::compat::char_merges::CharMerges;
use crate::compat::char_viterbi::CharViterbi;
use crate::compat::pipeline::PreTokens;
use crate::compat::sentencepiece::SentencePieceNormalizer;
use crate::compat::{check_ids, Unknowns};
use crate::segment::encoder::Encoder;
use crate::segment::Segmenter;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySentencePieceNormalizer>()?;
    m.add_class::<PyAddedTokens>()?;
    Ok(())
}

/// SentencePiece's normaliser of a loaded `.model` file.
#[pyclass(name = "SentencePieceNormalizer", module = "polytok._core", frozen)]
pub struct PySentencePieceNormalizer {
    inner: SentencePieceNormalizer,
}

#[pymethods]
impl PySentencePieceNormalizer {
    /// `charsmap` is the model's precompiled_charsmap (empty: no rules); `user_defined` are the
    /// (UTF-8 text, id) of the pieces kept whole.
    #[new]
    #[pyo3(signature = (charsmap, user_defined, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces))]
    fn new(
        charsmap: &[u8],
        user_defined: Vec<(Vec<u8>, u32)>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
    ) -> PyResult<Self> {
        let inner = SentencePieceNormalizer::new(
            charsmap,
            user_defined,
            add_dummy_prefix,
            remove_extra_whitespaces,
            escape_whitespaces,
        )?;
        Ok(PySentencePieceNormalizer { inner })
    }

    /// Each text (str or bytes, UTF-8) as the model's normaliser rewrites it, in parallel on
    /// `num_threads` threads: what SentencePiece's trainer segments.
    #[pyo3(signature = (texts, num_threads=None))]
    fn normalize<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let texts = texts.iter().map(text_bytes).collect::<PyResult<Vec<_>>>()?;
        let normalized: Vec<Vec<u8>> = py.detach(|| {
            with_threads(num_threads, || {
                texts.par_iter().map(|text| self.inner.normalize_bytes(text)).collect()
            })
        })?;
        Ok(normalized.iter().map(|text| PyBytes::new(py, text)).collect())
    }
}

/// HF's added tokens of a loaded file, found in texts as `tokenizers` finds them.
#[pyclass(name = "AddedTokens", module = "polytok._core", frozen)]
pub struct PyAddedTokens {
    inner: AddedTokens,
}

#[pymethods]
impl PyAddedTokens {
    /// `contents` are the tokens' distinct, non-empty UTF-8 texts; `lstrip[i]` and `rstrip[i]`
    /// say whether token i takes the whitespace before and after it.
    #[new]
    fn new(contents: Vec<Vec<u8>>, lstrip: Vec<bool>, rstrip: Vec<bool>) -> PyResult<Self> {
        Ok(PyAddedTokens { inner: AddedTokens::new(&contents, lstrip, rstrip)? })
    }

    /// `text` cut into (start, end, index) for each token's content and (start, end, None) for
    /// the text between tokens, in character offsets; stripped whitespace is in no span.
    fn spans(&self, py: Python<'_>, text: &str) -> Vec<(usize, usize, Option<usize>)> {
        let spans = py.detach(|| self.inner.spans(text));
        if text.is_ascii() {
            return spans;
        }
        // byte offsets to character offsets, in one pass (the offsets only grow)
        let bytes = text.as_bytes();
        let (mut byte, mut char) = (0, 0);
        let mut to_char = |offset: usize| {
            char += bytes[byte..offset].iter().filter(|&&b| (b as i8) >= -0x40).count();
            byte = offset;
            char
        };
        spans.into_iter().map(|(start, end, index)| (to_char(start), to_char(end), index)).collect()
    }

    /// The index of the leftmost-longest token in `text` (str, bytes or bytearray), if any.
    fn find(&self, text: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        Ok(self.inner.find(&text_bytes(text)?))
    }
}

/// A pre-tokenised document as Python passes it: (data, lengths, added).
type PreTokensFromPython<'py> = (Bound<'py, PyBytes>, Vec<usize>, Vec<(usize, u32)>);

/// An encoder for a loaded pipeline: its pre-tokeniser drops the text a regex does not match.
fn loaded_encoder(
    pattern: Option<&str>,
    segmenter: Box<dyn Segmenter>,
    tokens: Vec<Vec<u8>>,
) -> PyResult<PyEncoder> {
    let inner = Encoder::from_parts(pattern, segmenter, tokens, Vec::new())?.dropping_unmatched();
    Ok(PyEncoder::new(inner))
}

#[pymethods]
impl PyEncoder {
    /// Character-level BPE. `tokens[i]` are the bytes id i decodes to; `strings` are the
    /// (text, id) pairs a character or merge result is looked up by; `merges[k] = (left, right,
    /// merged)` has rank k; `byte_tokens` are (byte, id) of the `<0xXX>` tokens. With
    /// `byte_symbols` a pre-token starts as single bytes; `pattern` pre-tokenises in the core.
    /// `merge_ranks[k]`, when given, is merge k's rank instead of k (equal ranks: leftmost first).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pattern, tokens, strings, merges, byte_tokens, byte_fallback, unk, fuse_unk, byte_symbols, ignore_merges, merge_ranks))]
    fn char_merges(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        strings: Vec<(Vec<u8>, u32)>,
        merges: Vec<(u32, u32, u32)>,
        byte_tokens: Vec<(u8, u32)>,
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
        byte_symbols: bool,
        ignore_merges: bool,
        merge_ranks: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let count = tokens.len();
        check_ids("the strings", strings.iter().map(|&(_, id)| id), count)?;
        check_ids("the merges", merges.iter().flat_map(|&(l, r, m)| [l, r, m]), count)?;
        check_ids("the byte and unknown tokens", byte_tokens.iter().map(|&(_, id)| id).chain(unk), count)?;
        let unknowns = Unknowns::new(&byte_tokens, byte_fallback, unk, fuse_unk);
        let segmenter = CharMerges::new(
            strings,
            &merges,
            merge_ranks.as_deref(),
            unknowns,
            byte_symbols,
            ignore_merges,
        )?;
        loaded_encoder(pattern, Box::new(segmenter), tokens)
    }

    /// Unigram (`pattern`: the pre-tokeniser regex run in the core, if any): `lattice` holds
    /// the (text, id, score) entries a pre-token can be cut into; `unk_score` is the score of an
    /// unknown character; `single_precision` sums scores in f32.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (pattern, tokens, lattice, byte_tokens, byte_fallback, unk, fuse_unk, unk_score, single_precision))]
    fn char_viterbi(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        lattice: Vec<(Vec<u8>, u32, f64)>,
        byte_tokens: Vec<(u8, u32)>,
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
        unk_score: f64,
        single_precision: bool,
    ) -> PyResult<Self> {
        let count = tokens.len();
        check_ids("the lattice entries", lattice.iter().map(|&(_, id, _)| id), count)?;
        check_ids("the byte and unknown tokens", byte_tokens.iter().map(|&(_, id)| id).chain(unk), count)?;
        let unknowns = Unknowns::new(&byte_tokens, byte_fallback, unk, fuse_unk);
        let segmenter: Box<dyn Segmenter> = if single_precision {
            Box::new(CharViterbi::<f32>::new(&lattice, unknowns, unk_score)?)
        } else {
            Box::new(CharViterbi::<f64>::new(&lattice, unknowns, unk_score)?)
        };
        loaded_encoder(pattern, segmenter, tokens)
    }

    /// WordPiece (`pattern` as for Unigram): (text, id) `strings` include the continuation
    /// forms (e.g. "##ing").
    #[staticmethod]
    #[pyo3(signature = (pattern, tokens, strings, continuation, max_chars, unk))]
    fn char_longest_match(
        pattern: Option<&str>,
        tokens: Vec<Vec<u8>>,
        strings: Vec<(Vec<u8>, u32)>,
        continuation: Vec<u8>,
        max_chars: usize,
        unk: u32,
    ) -> PyResult<Self> {
        check_ids("the strings and the unknown token", strings.iter().map(|&(_, id)| id).chain([unk]), tokens.len())?;
        let segmenter = CharLongestMatch::new(strings, continuation, max_chars, unk);
        loaded_encoder(pattern, Box::new(segmenter), tokens)
    }

    /// The ids SentencePiece gives `text` (UTF-8 bytes).
    fn encode_sentencepiece(
        &self,
        py: Python<'_>,
        normalizer: &Bound<'_, PySentencePieceNormalizer>,
        text: &[u8],
    ) -> Vec<u32> {
        let normalizer = &normalizer.get().inner;
        py.detach(|| self.inner.sentencepiece_ids(normalizer, text))
    }

    /// `encode_sentencepiece` of many texts (str, or bytes the caller checked are UTF-8), in
    /// parallel with the GIL released, on `num_threads` threads or rayon's global pool; each
    /// text's ids do not depend on the others, so neither do they on the thread count.
    #[pyo3(signature = (normalizer, texts, num_threads))]
    fn encode_sentencepiece_batch(
        &self,
        py: Python<'_>,
        normalizer: &Bound<'_, PySentencePieceNormalizer>,
        texts: Vec<Bound<'_, PyAny>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let normalizer = &normalizer.get().inner;
        self.run_batch(py, &texts, num_threads, |_, text| {
            Ok(self.inner.sentencepiece_ids(normalizer, text.bytes()))
        })
    }

    /// The ids of one document pre-tokenised by a loaded pipeline: its pre-tokens back to back in
    /// `data`, cut at `lengths`, the `added` tokens as (index of the pre-token they precede, id).
    fn encode_pre_tokens(
        &self,
        py: Python<'_>,
        data: &[u8],
        lengths: Vec<usize>,
        added: Vec<(usize, u32)>,
    ) -> PyResult<Vec<u32>> {
        let document = PreTokens::new(data, &lengths, &added)?;
        Ok(py.detach(|| self.inner.encode_pre_tokens(&document)))
    }

    /// `encode_pre_tokens` of many (data, lengths, added) documents, in parallel with the GIL
    /// released, on `num_threads` threads or rayon's global pool; ids in input order.
    #[pyo3(signature = (documents, num_threads))]
    fn encode_pre_tokens_batch(
        &self,
        py: Python<'_>,
        documents: Vec<PreTokensFromPython<'_>>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Vec<u32>>> {
        let documents = documents
            .iter()
            .map(|(data, lengths, added)| PreTokens::new(data.as_bytes(), lengths, added))
            .collect::<Result<Vec<PreTokens>, _>>()?;
        let inner = &self.inner;
        py.detach(|| {
            with_threads(num_threads, || {
                documents
                    .par_iter()
                    .map(|document| inner.encode_pre_tokens(document))
                    .collect()
            })
        })
    }
}
