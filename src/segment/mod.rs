//! Segmenters: how a pre-token is cut into vocabulary ids. One file per kind; the `Encoder`
//! (pre-tokeniser + segmenter + special tokens) is the Python-facing object that drives them.
use pyo3::prelude::*;

pub mod encoder;
pub mod loaded;
pub mod merges;
pub mod normalize;

/// Cuts one pre-token (never empty, never containing a special token) into token ids.
pub trait Segmenter: Send + Sync {
    fn segment(&self, piece: &[u8], out: &mut Vec<u32>);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    encoder::register(m)?;
    normalize::register(m)?;
    Ok(())
}
