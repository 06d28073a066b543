//! The trainers (`polytok.trainers`): BPE (and its continuation from a base), WordPiece and
//! Unigram on the counts triple, with the GIL released while they run and progress reported to
//! a Python callback.
use std::ops::ControlFlow;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::counts::counts_view;
use super::{thread_pool, with_threads};
use super::encoders::PyEncoder;
use crate::train::{bpe, extend, unigram, wordpiece};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(train_bpe, m)?)?;
    m.add_function(wrap_pyfunction!(extend_bpe, m)?)?;
    m.add_function(wrap_pyfunction!(train_wordpiece, m)?)?;
    m.add_function(wrap_pyfunction!(train_unigram, m)?)?;
    m.add_function(wrap_pyfunction!(unigram_em, m)?)?;
    Ok(())
}

/// A reporter that calls `callback(done)` with the GIL held. A failing callback only loses the
/// bar: its error is printed and the work goes on.
fn reporter(callback: &Option<Py<PyAny>>) -> impl FnMut(usize) + Send + '_ {
    move |done: usize| {
        if let Some(callback) = callback {
            Python::attach(|py| {
                if let Err(error) = callback.call1(py, (done,)) {
                    error.print(py);
                }
            });
        }
    }
}

/// Runs `work` with the GIL released, handing it a reporter that calls `progress(done)` with the
/// GIL held. An exception the callback raises, or Ctrl-C, stops the work (the reporter returns
/// `Break`) and is returned instead of its result.
fn cancellable<T: Send>(
    py: Python<'_>,
    progress: &Option<Py<PyAny>>,
    work: impl FnOnce(&mut dyn FnMut(usize) -> ControlFlow<()>) -> T + Send,
) -> PyResult<T> {
    let mut callback_error: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut report = |done: usize| -> ControlFlow<()> {
            Python::attach(|py| {
                let outcome = match progress {
                    Some(callback) => callback.call1(py, (done,)).map(|_| ()),
                    None => Ok(()),
                };
                match outcome.and_then(|()| py.check_signals()) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(error) => {
                        callback_error = Some(error);
                        ControlFlow::Break(())
                    }
                }
            })
        };
        work(&mut report)
    });
    match callback_error {
        Some(error) => Err(error),
        None => Ok(result),
    }
}

/// Merges as an (n, 2) uint32 array, and the count each was chosen with.
fn merge_arrays<'py>(
    py: Python<'py>,
    trained: bpe::Trained,
) -> (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u64>>) {
    let flat: Vec<u32> = trained.merges.iter().flat_map(|&(l, r)| [l, r]).collect();
    let merges =
        Array2::from_shape_vec((trained.merges.len(), 2), flat).expect("two ids per merge");
    (
        merges.into_pyarray(py),
        PyArray1::from_vec(py, trained.counts),
    )
}

/// BPE: see `python/polytok/trainers/bpe.py`. Returns the merges as an (n, 2) uint32 array and
/// the count each merge was chosen with. The GIL is released while training; `progress(done)`
/// is called with it held every `progress_every` merges, and an exception it raises stops
/// training and is re-raised here (Ctrl-C works, as the merge loop runs on the calling thread).
#[pyfunction]
#[pyo3(signature = (data, offsets, counts, num_merges, min_frequency, num_threads, progress, progress_every))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn train_bpe<'py>(
    py: Python<'py>,
    data: &[u8],
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    num_merges: usize,
    min_frequency: u64,
    num_threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    progress_every: usize,
) -> PyResult<(Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u64>>)> {
    let counts = counts_view(data, &offsets, &counts)?;
    let pool = thread_pool(num_threads)?;
    let options = bpe::Options {
        num_merges,
        min_frequency,
        progress_every,
    };
    let trained = cancellable(py, &progress, |report| {
        bpe::train(&counts, &options, pool.as_deref(), report)
    })??;
    Ok(merge_arrays(py, trained))
}

/// BPE continued from a base (`python/polytok/trainers/extend.py`): `encoder` cuts each pre-token
/// as the base does, `vocab[id]` are the base's bytes (empty: an unused id), `by_ranks` says the
/// base joins by tiktoken's rule rather than by a merge list, and new token k gets id
/// `first_id + k`. Returns what `train_bpe` returns; progress and cancelling work the same way.
#[pyfunction]
#[pyo3(signature = (encoder, data, offsets, counts, vocab, by_ranks, num_merges, first_id, *, min_frequency, num_threads, progress, progress_every, kept_apart=Vec::new()))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn extend_bpe<'py>(
    py: Python<'py>,
    encoder: PyRef<'py, PyEncoder>,
    data: &[u8],
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    vocab: Vec<Vec<u8>>,
    by_ranks: bool,
    num_merges: usize,
    first_id: u32,
    min_frequency: u64,
    num_threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    progress_every: usize,
    kept_apart: Vec<u32>,
) -> PyResult<(Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u64>>)> {
    let counts = counts_view(data, &offsets, &counts)?;
    let pool = thread_pool(num_threads)?;
    let options = bpe::Options {
        num_merges,
        min_frequency,
        progress_every,
    };
    let rule = if by_ranks {
        extend::Rule::Ranks
    } else {
        extend::Rule::Merges
    };
    let base = &encoder.inner;
    let segment =
        |pre_token: &[u8], out: &mut Vec<u32>| base.segment_pre_token_into(pre_token, out);
    let from = extend::Base {
        segment: &segment,
        tokens: &vocab,
        rule,
        first_id,
        kept_apart: &kept_apart,
    };
    let trained = cancellable(py, &progress, |report| {
        extend::extend(&counts, &from, &options, pool.as_deref(), report)
    })??;
    Ok(merge_arrays(py, trained))
}

/// WordPiece: see `python/polytok/trainers/wordpiece.py`. Returns the spellings by id
/// (continuation tokens with the marker in front) and the merges (left, right, result).
#[pyfunction]
#[pyo3(signature = (data, offsets, counts, budget, continuation_marker, min_frequency, progress))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn train_wordpiece<'py>(
    py: Python<'py>,
    data: &[u8],
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    budget: usize,
    continuation_marker: Option<Vec<u8>>,
    min_frequency: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<(u32, u32, u32)>)> {
    let counts = counts_view(data, &offsets, &counts)?;
    let mut report = reporter(&progress);
    let marker = continuation_marker.as_deref();
    let training =
        py.detach(|| wordpiece::train(&counts, budget, marker, min_frequency, &mut report));
    let vocab = training.vocab.iter().map(|t| PyBytes::new(py, t)).collect();
    Ok((vocab, training.merges))
}

/// Unigram: see `python/polytok/trainers/unigram.py`. Returns the pieces (bytes first), their
/// scores, and per EM round (pieces alive after it, log-likelihood before it). With `base`
/// (pieces, bytes first, and their scores) it extends that vocabulary (`unigram::extend`).
#[pyfunction]
#[pyo3(signature = (data, offsets, counts, budget, seed_size, max_piece_bytes, shrinking_factor, sub_iterations, num_threads, progress, base=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn train_unigram<'py>(
    py: Python<'py>,
    data: &[u8],
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    budget: usize,
    seed_size: usize,
    max_piece_bytes: usize,
    shrinking_factor: f64,
    sub_iterations: usize,
    num_threads: Option<usize>,
    progress: Option<Py<PyAny>>,
    base: Option<(Vec<Vec<u8>>, Vec<f64>)>,
) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<f64>, Vec<(usize, f64)>)> {
    let counts = counts_view(data, &offsets, &counts)?;
    let options = unigram::UnigramOptions {
        seed_size,
        max_piece_bytes,
        shrinking_factor,
        sub_iterations,
    };
    let mut report = reporter(&progress);
    let training = py.detach(|| {
        with_threads(num_threads, || match base {
            None => unigram::train(&counts, budget, &options, &mut report),
            Some((pieces, scores)) => {
                unigram::extend(&counts, pieces, scores, budget, &options, &mut report)
            }
        })
    })??;
    Ok((
        training.vocab.iter().map(|t| PyBytes::new(py, t)).collect(),
        training.scores,
        training
            .history
            .iter()
            .map(|r| (r.pieces, r.log_likelihood))
            .collect(),
    ))
}

/// Runs `iterations` EM rounds from the given pieces and scores without pruning; returns the new
/// scores and the log-likelihood before each round (see `unigram::em`).
#[pyfunction]
#[pyo3(signature = (data, offsets, counts, pieces, scores, iterations, bayesian))]
#[allow(clippy::too_many_arguments)]
fn unigram_em<'py>(
    py: Python<'py>,
    data: &[u8],
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    pieces: Vec<Vec<u8>>,
    scores: Vec<f64>,
    iterations: usize,
    bayesian: bool,
) -> PyResult<(Vec<f64>, Vec<f64>)> {
    let counts = counts_view(data, &offsets, &counts)?;
    Ok(py.detach(|| unigram::em(&counts, pieces, scores, iterations, bayesian))?)
}
