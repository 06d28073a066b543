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

/// Makes room for `count` items in `buffer` and, on Linux, asks for 2 MB pages under the part
/// of its memory that spans whole ones (from 4 MB on): a long piece's arrays are a few words a
/// byte, and with 4 KB pages the walks of the page tables grow with them. A refused hint, or
/// pages already mapped, change nothing.
pub fn reserve_huge<T>(buffer: &mut Vec<T>, count: usize) {
    buffer.reserve(count);
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let start = buffer.as_ptr() as usize;
        let end = start + buffer.capacity() * std::mem::size_of::<T>();
        let (first, last) = (start.next_multiple_of(HUGE_PAGE), end / HUGE_PAGE * HUGE_PAGE);
        if last >= first + HUGE_PAGE {
            // SAFETY: [first, last) lies inside this buffer's allocation; the hint moves no data.
            unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) };
        }
    }
}
