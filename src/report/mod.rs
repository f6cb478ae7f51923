//! Text views of memory reports. Reads report values only, never allocator internals.

mod summary;

pub use summary::{MemorySummary, pool_line};
