//! Per-thread buffers that segmenters reuse from one piece to the next.
//!
//! A long piece needs arrays of a few words per byte. Allocated afresh, arrays past glibc's
//! mmap threshold (at most 32 MB) get new pages from the kernel on every call, and faulting them
//! in made time grow faster than the input (4 MB of one character took more than 4.5 times as
//! long as 1 MB). Each buffer is kept for the next piece on the same thread instead, up to
//! KEPT_BYTES, so memory stays bounded.
use std::cell::Cell;
use std::thread::LocalKey;

/// The most bytes one buffer keeps between pieces, per thread (enough for 4 MB pieces).
pub const KEPT_BYTES: usize = 96 << 20;

/// Runs `work` on the buffer of `slot`, empty but with the capacity of earlier pieces, and puts
/// it back afterwards if it holds at most KEPT_BYTES. A nested call on the same slot gets a new
/// buffer (correct, only slower).
pub fn with_buffer<T, R>(
    slot: &'static LocalKey<Cell<Vec<T>>>,
    work: impl FnOnce(&mut Vec<T>) -> R,
) -> R {
    let mut buffer = slot.take();
    buffer.clear();
    let result = work(&mut buffer);
    if buffer.capacity() * std::mem::size_of::<T>() <= KEPT_BYTES {
        buffer.clear();
        slot.set(buffer);
    }
    result
}
