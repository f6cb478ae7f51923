//! What [`MemorySnapshot::check`](super::MemorySnapshot::check) and
//! [`check_report`](super::MemorySnapshot::check_report) find wrong.

use core::ops::Range;

/// A snapshot that breaks its invariants. Retrying cannot help: the snapshot itself is wrong
/// (a bug in whatever filled it, or an edited file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotCheckError {
    /// Two live slices of one page share bytes (footprints `offset .. offset + size + padding`).
    #[error(
        "memory {memory}, pool {pool}, page {page}: live slices at bytes {}..{} and {}..{} overlap",
        first.start, first.end, second.start, second.end
    )]
    Overlap {
        /// The memory's name.
        memory: String,
        /// The pool's name.
        pool: String,
        /// The page's id.
        page: u64,
        /// The footprint of the slice that starts first, in bytes.
        first: Range<u64>,
        /// The footprint of the slice that starts inside it, in bytes.
        second: Range<u64>,
    },
    /// A slice's footprint ends past its page.
    #[error(
        "memory {memory}, pool {pool}, page {page}: a slice at byte {offset} ends at {} but the page holds {page_size} bytes",
        end.map_or_else(|| "past 2^64".to_string(), |end| end.to_string())
    )]
    SliceOutsidePage {
        /// The memory's name.
        memory: String,
        /// The pool's name.
        pool: String,
        /// The page's id.
        page: u64,
        /// The slice's offset, in bytes.
        offset: u64,
        /// `offset + size + padding`, or `None` when that overflows `u64`.
        end: Option<u64>,
        /// The page's size, in bytes.
        page_size: u64,
    },
    /// A memory's totals differ from the report's usage for it.
    #[error("memory {memory}: {field} is {snapshot} in the slices but {report} in the report")]
    ReportMismatch {
        /// The memory's name.
        memory: String,
        /// The `MemoryUsage` field that differs.
        field: &'static str,
        /// The sum over the snapshot's slices or pages.
        snapshot: u64,
        /// The report's value.
        report: u64,
    },
}
