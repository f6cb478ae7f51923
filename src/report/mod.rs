//! Views of the memory: text summaries of reports, and the data behind the pictures of
//! `examples/memory_viz/`. Reads report and snapshot values only, never allocator
//! internals, and draws nothing itself (no plotting library in the library's build).
//!
//! - [`MemorySummary`], [`pool_line`]: a report as text; [`DeviceMemory`]: what wgpu's
//!   allocator holds on the device, beside our pages.
//! - [`HistoryEvent`], [`HistoryRing`]: a bounded ring of what happened to the memory.
//! - [`LabelStack`]: nested allocation labels, "outer/inner".
//! - [`MemorySnapshot`]: every page and slice, the history and the report, as JSON;
//!   [`check`](MemorySnapshot::check) and [`check_report`](MemorySnapshot::check_report)
//!   verify it.
//! - [`TopLabels`], [`label_group`], [`Timeline`], [`page_runs`], [`PageStats`]: a snapshot
//!   reduced to what a picture draws, with at most one sample or run per column;
//!   [`ReservedBands`] (why reserved exceeds in use), [`peak_holders`] (what held the peak),
//!   [`PoolStats`] (how fragmented a pool is), [`TimeAxis`] (time over a timeline's width, quiet
//!   stretches drawn short), [`MemorySnapshot::at`] (the page map at an
//!   earlier moment), [`backtrace_frames`] (a recorded backtrace as frames).
//! - [`PyTorchSnapshot`]: the snapshot in the shape PyTorch's memory_viz reads, written as a
//!   pickle by [`MemorySnapshot::to_pytorch_pickle`].

mod device;
mod frames;
mod history;
mod label_stack;
mod levels;
mod out_of_memory;
mod page_map;
mod peak;
mod pytorch;
mod reserved_bands;
mod rewind;
mod snapshot;
mod snapshot_error;
mod summary;
mod time_axis;
mod timeline;
#[cfg(test)]
mod timeline_tests;
mod top_labels;

pub use device::DeviceMemory;
pub use frames::{Frame, MAX_FRAMES, backtrace_frames};
pub use history::{EventKind, HistoryEvent, HistoryRing};
pub use label_stack::LabelStack;
pub use levels::{NO_LABEL, label_group, label_peaks};
pub use out_of_memory::{
    BudgetDetail, LiveAllocation, MemoryHeld, OOM_LARGEST, OutOfMemoryDetail, PoolRoom,
};
pub use page_map::{
    BOUNDARY_COLUMNS, PageRun, PageStats, PoolStats, RunFill, free_ranges, page_runs,
};
pub use peak::peak_holders;
pub use pytorch::{
    BASE_ADDRESS, DEFAULT_POOL_ID, PAGE_SPAN, PyTorchBlock, PyTorchFrame, PyTorchSegment,
    PyTorchSettings, PyTorchSnapshot, PyTorchTraceEntry, STREAM_SLOTS,
};
pub use reserved_bands::{ReservedBands, STAGING_MEMORY, UPLOAD_MEMORY};
pub use rewind::RewindError;
pub(crate) use snapshot::memory_usage;
pub use snapshot::{
    MAIN_MEMORY, MemorySnapshot, MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
    SnapshotTotals,
};
pub use snapshot_error::SnapshotCheckError;
pub use summary::{BudgetUse, MemorySummary, PEAK_HELD, pool_line, pool_line_on};
pub use time_axis::{AxisBreak, BREAK_SHARE, QUIET_FACTOR, QUIET_SHARE, TimeAxis};
pub use timeline::{MARKED_KINDS, Timeline, TimelineMarker, TimelineSample};
pub use top_labels::{OTHER_LABELS, TopLabels};
