//! The ConvexTok LP on counted pre-tokens: the tokenisation graph with its reduced LP and
//! Lagrangian bound (`graph.rs`), the entropy-smoothed shortest paths (`soft_paths.rs`) and the
//! dual solver that maximises the smoothed bound (`dual_ascent.rs`), and the census that sizes a
//! graph before it is built (`census.rs`).
pub mod census;
pub mod dual_ascent;
pub mod graph;
pub mod soft_paths;
