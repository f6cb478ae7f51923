//! The client's allocations: handles and the slices behind them, exports to the
//! application, pins and compaction, and the history and snapshot that show the memory.

pub(super) mod compaction;
pub(super) mod export_life;
pub(super) mod exports;
pub(super) mod handle;
pub(super) mod history;
pub(super) mod pins;
pub(super) mod snapshot;
