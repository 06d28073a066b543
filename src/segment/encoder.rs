//! The `Encoder`: pre-tokeniser + segmenter + special tokens + the id -> bytes table, built by
//! `Encoder::from_parts` from any segmenter. The Python `Tokenizer` drives one through
//! `src/bindings/encoders.rs`.
//!
//! Special tokens follow tiktoken: a *policy* names which special tokens become their ids
//! (allowed) and which raise if their text occurs anywhere in the input (disallowed); any other
//! special-token text is ordinary text. Policies are built once and reused across calls.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, MatchKind};
use rayon::prelude::*;

use super::cache::{self, MAX_CACHED_PIECE};
use super::rng::SplitMix64;
use super::{
    RandomKind, RandomSegmenter, RankedSegmenter, Segmenter, VocabularyError, MAX_UNUSED_IDS,
};
use crate::literals;
use crate::pretokenize::{Input, PreTokenizeError, PreTokenizer, Sink};

/// Why an `Encoder` could not be built.
#[derive(Debug)]
pub enum BuildError {
    Pattern(PreTokenizeError),
    Vocabulary(VocabularyError),
}

impl From<VocabularyError> for BuildError {
    fn from(error: VocabularyError) -> Self {
        BuildError::Vocabulary(error)
    }
}

/// Why a special-token policy could not be built.
#[derive(Debug)]
pub enum PolicyError {
    /// An allowed text that is not one of the encoder's special tokens.
    NotSpecial(Vec<u8>),
    /// A matcher could not be built.
    Matcher(aho_corasick::BuildError),
}

pub struct Encoder {
    pretokenizer: PreTokenizer,
    segmenter: Box<dyn Segmenter>,
    /// The bytes of every id back to back: id i is `token_data[token_offsets[i]..token_offsets[i+1]]`.
    token_data: Vec<u8>,
    token_offsets: Vec<usize>,
    /// Whether each id below `token_offsets.len() - 1` is a token (special ids may leave gaps).
    token_known: Vec<bool>,
    special_tokens: Vec<(Vec<u8>, u32)>,
    /// This encoder's number, which keys its pre-token cache tables (see `cache.rs`).
    serial: u64,
    /// The most pieces each thread's cache table holds for this encoder; 0: no cache.
    cache_size: AtomicUsize,
}

/// Serial numbers of encoders (unlike addresses, never reused), for the pre-token cache.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

/// Which special tokens are ids (allowed) and which raise (disallowed); built by `special_policy`.
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

    /// An encoder from its parts. `tokens[i]` are the bytes of ordinary id i, empty for an id no
    /// ordinary token has (a special token may take it); special tokens map their bytes to ids
    /// that must not collide with ordinary ids. Special tokens are never split by the pattern:
    /// the encoder cuts them out before the pre-tokeniser runs.
    pub fn from_parts(
        pattern: Option<&str>,
        segmenter: Box<dyn Segmenter>,
        tokens: Vec<Vec<u8>>,
        special_tokens: Vec<(Vec<u8>, u32)>,
    ) -> Result<Self, BuildError> {
        let pretokenizer = PreTokenizer::new(pattern, Vec::new()).map_err(BuildError::Pattern)?;
        if u32::try_from(tokens.len()).is_err() {
            return Err(VocabularyError::TooManyTokens { tokens: tokens.len() }.into());
        }
        // The id table below has one entry per id: checked first, so that no id from a file
        // sizes it beyond the tokens given plus MAX_UNUSED_IDS.
        let ordinary = tokens.iter().filter(|token| !token.is_empty()).count();
        if tokens.len() - ordinary > MAX_UNUSED_IDS {
            return Err(VocabularyError::TooManyUnusedIds {
                unused: tokens.len() - ordinary,
            }
            .into());
        }
        let limit = ordinary + special_tokens.len() + MAX_UNUSED_IDS;
        if let Some(&(_, id)) = special_tokens.iter().find(|&&(_, id)| id as usize >= limit) {
            return Err(VocabularyError::SpecialIdOutOfRange { id, limit }.into());
        }
        let size = special_tokens
            .iter()
            .map(|&(_, id)| id as usize + 1)
            .chain([tokens.len()])
            .max()
            .unwrap_or(0);
        let mut by_id: Vec<Option<&[u8]>> =
            tokens.iter().map(|t| (!t.is_empty()).then_some(&t[..])).collect();
        by_id.resize(size, None);
        for (bytes, id) in &special_tokens {
            if bytes.is_empty() {
                return Err(VocabularyError::EmptySpecialToken { id: *id }.into());
            }
            if by_id[*id as usize].is_some() {
                return Err(VocabularyError::SpecialIdTaken { id: *id }.into());
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
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            cache_size: AtomicUsize::new(0),
        })
    }

    /// Sets the most pieces each thread caches for this encoder (0: no cache). Ids never depend
    /// on it: only the time to compute them does.
    pub fn set_cache_size(&self, pieces: usize) {
        self.cache_size.store(pieces, Ordering::Relaxed);
    }

    pub fn cache_size(&self) -> usize {
        self.cache_size.load(Ordering::Relaxed)
    }

    /// Text that is already one pre-token -> ids, appended to `out`, skipping the pre-tokeniser
    /// (whose UTF-8 check over the whole text costs ~6% where the caller guarantees valid UTF-8).
    pub fn segment_pre_token_into(&self, pre_token: &[u8], out: &mut Vec<u32>) {
        self.segmenter.segment(pre_token, out);
    }

    /// Ordinary text (no special tokens) -> ids, appended to `out`. Pieces the segmenter cannot
    /// answer directly go through this thread's pre-token cache, when there is one.
    pub fn encode_ordinary_into(&self, text: &[u8], out: &mut Vec<u32>) {
        self.encode_ordinary_input_into(Input::Bytes(text), out)
    }

    /// `encode_ordinary_into` of bytes or of a `str` (whose UTF-8 is not checked again).
    pub fn encode_ordinary_input_into(&self, text: Input<'_>, out: &mut Vec<u32>) {
        let capacity = self.cache_size();
        if capacity == 0 {
            self.pretokenizer
                .for_each_piece_of(text, |piece| self.segmenter.segment(piece, out));
            return;
        }
        let bytes = text.bytes();
        // A miss: a long piece cut afresh, or the table's answer beyond the piece's home line,
        // else a cut stored for next time.
        let miss = |table: &mut cache::PieceCache, piece: &[u8], key: u128, out: &mut Vec<u32>| {
            if piece.len() > MAX_CACHED_PIECE {
                self.segmenter.segment(piece, out);
            } else if !table.extend(piece, key, out) {
                let start = out.len();
                self.segmenter.segment(piece, out);
                table.insert(piece, &out[start..]);
            }
        };
        cache::with_table(self.serial, capacity, |table| {
            let mut sink = CachedPieces { table, chunk: cache::Chunk::new(), out, miss, text: bytes };
            self.pretokenizer.pieces_into(text, &mut sink);
            sink.table.emit(&mut sink.chunk, sink.out, miss);
        })
    }

    /// Text -> ids under a special-token policy (None: all special-token text is ordinary).
    /// Err holds the bytes of a disallowed special token found in the text.
    pub fn encode_into(
        &self,
        text: &[u8],
        policy: Option<&SpecialPolicy>,
        out: &mut Vec<u32>,
    ) -> Result<(), Vec<u8>> {
        self.encode_input_into(Input::Bytes(text), policy, out)
    }

    /// `encode_into` of bytes or of a `str` (whose UTF-8 is not checked again).
    pub fn encode_input_into(
        &self,
        text: Input<'_>,
        policy: Option<&SpecialPolicy>,
        out: &mut Vec<u32>,
    ) -> Result<(), Vec<u8>> {
        for_each_part(text, policy, |part| match part {
            Part::Text(text) => self.encode_ordinary_input_into(text, out),
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
        for_each_part(Input::Bytes(text), policy, |part| match part {
            Part::Text(text) => self.pretokenizer.for_each_piece_of(text, |piece| {
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
        for_each_part(Input::Bytes(text), policy, |part| match part {
            Part::Text(text) => self
                .pretokenizer
                .for_each_piece_of(text, |piece| combined.append(ranked.nbest(piece, n))),
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

    /// The number of ids: one past the largest ordinary or special id.
    pub fn id_count(&self) -> usize {
        self.token_offsets.len() - 1
    }

    /// The segmenter's random cut of `kind`, if it has one.
    pub fn random_segmenter(&self, kind: RandomKind) -> Option<&dyn RandomSegmenter> {
        self.segmenter
            .random()
            .filter(|random| random.kind() == kind)
    }

    /// The segmenter's ranking of cuts, if it has one.
    pub fn ranked_segmenter(&self) -> Option<&dyn RankedSegmenter> {
        self.segmenter.ranked()
    }

    /// A policy: `allowed` special tokens (their bytes) become ids, `disallowed` texts raise
    /// (empty ones are ignored).
    pub fn special_policy(
        &self,
        allowed: Vec<Vec<u8>>,
        disallowed: Vec<Vec<u8>>,
    ) -> Result<SpecialPolicy, PolicyError> {
        let build = |texts: &[Vec<u8>], kind: MatchKind| {
            literals::builder(texts, kind)
                .build(texts)
                .map_err(PolicyError::Matcher)
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
                        .ok_or_else(|| PolicyError::NotSpecial(text.clone()))
                })
                .collect::<Result<Vec<u32>, PolicyError>>()?;
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

    /// How often each id occurs in the ordinary encoding of `texts` (one entry per id), in
    /// parallel on the current rayon pool without building the id lists. Integer sums: the
    /// result is the same whatever the split across threads.
    pub fn token_histogram<T: AsRef<[u8]> + Sync>(&self, texts: &[T]) -> Vec<u64> {
        let size = self.id_count();
        texts
            .par_iter()
            .fold(
                || (vec![0u64; size], Vec::new()),
                |(mut histogram, mut ids), text| {
                    ids.clear();
                    // No policy: special-token text is ordinary, so this cannot fail.
                    let _ = self.encode_into(text.as_ref(), None, &mut ids);
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
                    total
                        .iter_mut()
                        .zip(part)
                        .for_each(|(sum, count)| *sum += count);
                    total
                },
            )
    }
}

/// A stretch of input once the special-token policy has been applied.
enum Part<'a> {
    Text(Input<'a>),
    Special(u32),
}

/// The pre-token cache as a pre-tokeniser's sink: pieces wait in a chunk (their lines asked
/// for) and are looked up a chunk at a time; `miss` answers those the lines do not. The whole
/// sink is inlined into the pre-tokeniser's loop: a call per piece costs more than the push.
struct CachedPieces<'t, 'a, M> {
    table: &'t mut cache::PieceCache,
    chunk: cache::Chunk<'a>,
    out: &'t mut Vec<u32>,
    miss: M,
    /// The whole text: every piece lies inside it (see `cache::key_in`).
    text: &'a [u8],
}

impl<'a, M> Sink<'a> for CachedPieces<'_, 'a, M>
where
    M: FnMut(&mut cache::PieceCache, &'a [u8], u128, &mut Vec<u32>) + Copy,
{
    #[inline(always)]
    fn piece(&mut self, piece: &'a [u8]) {
        if piece.len() > cache::MAX_PENDING {
            self.table.emit(&mut self.chunk, self.out, self.miss);
            (self.miss)(self.table, piece, 0, self.out);
        } else if self.chunk.push(self.table, piece, cache::key_in(self.text, piece)) {
            self.table.emit(&mut self.chunk, self.out, self.miss);
        }
    }

    /// The block path's pieces (shorter than a block, so never over MAX_PENDING), with the
    /// chunk's count in a local for the whole block.
    #[inline(always)]
    fn pieces(&mut self, text: &'a [u8], mut from: usize, base: usize, mut ends: u64) -> usize {
        let mut waiting = self.chunk.len();
        while ends != 0 {
            let at = base + ends.trailing_zeros() as usize;
            let piece = &text[from..at];
            self.chunk.put(waiting, self.table, piece, cache::key_in(self.text, piece));
            waiting += 1;
            if waiting == cache::CHUNK {
                self.chunk.set_len(waiting);
                self.table.emit(&mut self.chunk, self.out, self.miss);
                waiting = 0;
            }
            from = at;
            ends &= ends - 1;
        }
        self.chunk.set_len(waiting);
        from
    }
}

/// Calls `visit` on each stretch of ordinary text and each allowed special token of `text`, in
/// order (policy None: all of it is ordinary text). Err holds the bytes of a disallowed special
/// token found in the text; then nothing is visited.
fn for_each_part<'a>(
    text: Input<'a>,
    policy: Option<&SpecialPolicy>,
    mut visit: impl FnMut(Part<'a>),
) -> Result<(), Vec<u8>> {
    let Some(policy) = policy else {
        visit(Part::Text(text));
        return Ok(());
    };
    if let Some((matcher, texts)) = &policy.disallowed {
        if let Some(found) = matcher.find(text.bytes()) {
            return Err(texts[found.pattern().as_usize()].clone());
        }
    }
    match &policy.allowed {
        None => visit(Part::Text(text)),
        Some((matcher, ids)) => {
            let mut start = 0;
            for found in matcher.find_iter(text.bytes()) {
                if found.start() > start {
                    visit(Part::Text(text.slice(start, found.start())));
                }
                visit(Part::Special(ids[found.pattern().as_usize()]));
                start = found.end();
            }
            let length = text.bytes().len();
            if start < length {
                visit(Part::Text(text.slice(start, length)));
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
