//! Progress reports from long Rust loops to a Python callback (a tqdm bar on the Python side).
use pyo3::prelude::*;

/// A reporter that calls `callback(done)` with the GIL held. A failing callback only loses the
/// bar: its error is printed and the work goes on.
pub fn reporter(callback: &Option<Py<PyAny>>) -> impl FnMut(usize) + Send + '_ {
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
