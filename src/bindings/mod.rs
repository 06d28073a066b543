//! Every PyO3 wrapper of the core, by area: what Python hands over is converted here (numpy
//! arrays, bytes, str), long calls release the GIL here, and the core's typed errors become the
//! Python exceptions the package expects (`errors.rs`, the one place that words them). The
//! algorithm modules know nothing of Python.
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use rustc_hash::FxHashMap;

mod compat;
mod counts;
mod encoders;
mod errors;
mod heal;
mod lp;
mod metrics;
mod streaming;
mod trainers;

/// Adds every class, function, exception and constant of `polytok._core` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    counts::register(m)?;
    encoders::register(m)?;
    compat::register(m)?;
    heal::register(m)?;
    streaming::register(m)?;
    trainers::register(m)?;
    lp::register(m)?;
    metrics::register(m)?;
    Ok(())
}

/// The rayon pool a call with `num_threads` runs on: None for rayon's global pool (every
/// core), else a pool of that many threads, built on first use and kept. Building one per call
/// would cost thread start-up each time and throw away the threads' merged-piece caches. This
/// is the only place that builds pools.
fn thread_pool(num_threads: Option<usize>) -> PyResult<Option<Arc<rayon::ThreadPool>>> {
    let Some(threads) = num_threads else {
        return Ok(None);
    };
    static POOLS: OnceLock<Mutex<FxHashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.get(&threads) {
        return Ok(Some(pool.clone()));
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|error| errors::thread_pool_error(threads, error))?,
    );
    pools.insert(threads, pool.clone());
    Ok(Some(pool))
}

/// Runs `work` (which may use rayon) on the pool `thread_pool` gives for `num_threads`.
fn with_threads<T: Send>(
    num_threads: Option<usize>,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    Ok(run_on(thread_pool(num_threads)?.as_deref(), work))
}

/// Runs `work` on `pool`, or on rayon's global pool when None.
fn run_on<T: Send>(pool: Option<&rayon::ThreadPool>, work: impl FnOnce() -> T + Send) -> T {
    match pool {
        None => work(),
        Some(pool) => pool.install(work),
    }
}
