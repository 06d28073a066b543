pub mod dual_ascent;
pub mod graph;
pub mod soft_paths;
