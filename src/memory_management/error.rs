//! Why a reservation failed, with the numbers a user needs to act on it.

use super::usage::format_bytes;
use cubecl_runtime::server::IoError;

/// Why [`MemoryManagement::reserve`](super::MemoryManagement::reserve) returned no handle.
///
/// Every variant carries what was asked (`requested`, in bytes) and, where they apply, the
/// limit that refused it and what the memory held at that moment, so the message alone
/// says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// No pool of the layout accepts a reservation this large: it is over the largest
    /// page the device allows (`limit`, from `max_storage_buffer_binding_size` /
    /// `max_buffer_size` through [`MemoryDeviceProperties`](super::MemoryDeviceProperties)),
    /// or over every pool's maximum. Retrying cannot help; split the buffer.
    #[error(
        "cannot reserve {} ({requested} bytes): the largest reservation this memory accepts is {} ({limit} bytes)",
        format_bytes(*requested),
        format_bytes(*limit)
    )]
    BufferTooBig {
        /// Bytes asked for.
        requested: u64,
        /// The largest reservation any pool of the layout accepts, in bytes.
        limit: u64,
    },
    /// No pool of the layout accepts this size, though it is under the largest size the
    /// layout accepts: the sizes accepted have a gap (a sliced pool whose
    /// `max_slice_size` is below its page size takes slices up to `max_slice_size` and
    /// near-page sizes, over 80 % of a page, but nothing in between). Returned by
    /// [`MemoryManagement::reserve`](super::MemoryManagement::reserve) in the dynamic
    /// pools only. Retrying cannot help; add a pool that accepts the size, raise
    /// `max_slice_size`, or reserve a size in `accepted`.
    #[error(
        "cannot reserve {} ({requested} bytes): no pool of the layout accepts this size; the sizes accepted are {}",
        format_bytes(*requested),
        format_ranges(accepted)
    )]
    NoPoolAccepts {
        /// Bytes asked for.
        requested: u64,
        /// The sizes some pool of the layout accepts, in bytes: inclusive ranges
        /// `(smallest, largest)`, ascending, disjoint and merged where they touch.
        accepted: Vec<(u64, u64)>,
    },
    /// Every pool that accepts this size is capped and full. Retrying after live handles
    /// are dropped can help.
    #[error(
        "cannot reserve {} ({requested} bytes): pool {pool} is capped at {} and no later pool accepts the size; it holds {} in use of {} reserved, largest free slice {} (fragmentation {:.1} %)",
        format_bytes(*requested),
        format_bytes(*capacity),
        format_bytes(*bytes_in_use),
        format_bytes(*bytes_reserved),
        format_bytes(*largest_free_slice),
        fragmentation(*bytes_reserved, *bytes_in_use, *largest_free_slice) * 100.0
    )]
    PoolCapacityExceeded {
        /// Bytes asked for.
        requested: u64,
        /// Position of the capped pool in the layout.
        pool: u8,
        /// The pool's cap in whole pages, in bytes.
        capacity: u64,
        /// Bytes in use in that pool.
        bytes_in_use: u64,
        /// Bytes of the pool's pages.
        bytes_reserved: u64,
        /// The pool's largest free slice, in bytes: the biggest reservation it could take.
        largest_free_slice: u64,
    },
    /// The storage refused a new page (the device is out of memory, or a limit the storage
    /// enforces, such as a client's budget, refused it first: `IoError::OutOfMemory` does not
    /// say which) even after every free page was given back and, when
    /// the owner reported bytes pending release (see
    /// [`PendingRelease`](super::PendingRelease)), after those were waited for. Retrying
    /// after live handles are dropped can help.
    #[error(
        "out of memory reserving {} ({requested} bytes): {} in use, {} reserved, largest free slice {} (fragmentation {:.1} %){}, {} still pending release; the storage refused a page: {}",
        format_bytes(*requested),
        format_bytes(*bytes_in_use),
        format_bytes(*bytes_reserved),
        format_bytes(*largest_free_slice),
        fragmentation(*bytes_reserved, *bytes_in_use, *largest_free_slice) * 100.0,
        cap.map(|cap| format!(", pool cap {}", format_bytes(cap))).unwrap_or_default(),
        format_bytes(*bytes_pending_release),
        io_error_text(source)
    )]
    OutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// Bytes in use (requested sizes of live slices) in the whole memory.
        bytes_in_use: u64,
        /// Bytes of every page held.
        bytes_reserved: u64,
        /// The largest free slice of any page, in bytes: the biggest reservation that
        /// would have fit without a new page.
        largest_free_slice: u64,
        /// The cap of the pool that tried to grow, in bytes; when that pool is uncapped
        /// and the reservation spilled to it from a full capped pool, the cap of that
        /// pool. `None` when no cap applies.
        cap: Option<u64>,
        /// Bytes the memory's owner still reported as pending release when the
        /// reservation gave up ([`PendingRelease::bytes_pending_release`], after
        /// [`PendingRelease::release_pending`] ran): pages or slices whose release waits
        /// on work the device has not finished. 0 when the owner reports none.
        ///
        /// [`PendingRelease::bytes_pending_release`]: super::PendingRelease::bytes_pending_release
        /// [`PendingRelease::release_pending`]: super::PendingRelease::release_pending
        bytes_pending_release: u64,
        /// The storage's error.
        source: IoError,
    },
    /// A pool would need more pages than a handle's location can name (a `u16` page
    /// index, cubecl-runtime's `MemoryLocation`). Use larger pages.
    #[error(
        "cannot reserve {requested} bytes: pool {pool} already holds {limit} pages, the most a handle can address"
    )]
    TooManyPages {
        /// Bytes asked for.
        requested: u64,
        /// Position of the pool in the layout.
        pool: u8,
        /// The page limit.
        limit: u64,
    },
    /// Any other storage failure (a lost device, a validation error from the driver).
    #[error(
        "the storage failed while reserving {requested} bytes: {}",
        io_error_text(source)
    )]
    Storage {
        /// Bytes asked for.
        requested: u64,
        /// The storage's error.
        source: IoError,
    },
}

/// The share of free bytes outside the largest free slice: 0 when the free space is one
/// slice, near 1 when it is dust. `reserved - in_use` counts padding as free.
pub fn fragmentation(bytes_reserved: u64, bytes_in_use: u64, largest_free_slice: u64) -> f64 {
    let free = bytes_reserved.saturating_sub(bytes_in_use);
    if free == 0 {
        return 0.0;
    }
    1.0 - largest_free_slice.min(free) as f64 / free as f64
}

/// The message of a storage error on one line, without the backtrace.
///
/// cubecl-runtime's `IoError` ends its text with its backtrace, which prints as the
/// line "No backtrace available" unless one was captured; a user's message has no use
/// for either. The wording is ours, the numbers and reasons are the error's.
pub fn io_error_text(error: &IoError) -> String {
    match error {
        IoError::BufferTooBig { size, .. } => {
            format!("a buffer of {size} bytes is over the device's limit")
        }
        // The storage says no more than this: the device ran out, or a limit the storage
        // enforces (a client's budget, a host storage's capacity) refused the page first.
        IoError::OutOfMemory { size, .. } => format!(
            "no page of {size} bytes (the device is out of memory, or a budget or capacity the storage enforces refused it)"
        ),
        IoError::PageUpdateForbidden { size, .. } => format!(
            "no room for {size} bytes in the pages held, and adding a page is not allowed now"
        ),
        IoError::PageSizesExhausted { size, .. } => {
            format!("no page size is left for {size} bytes")
        }
        IoError::UnsupportedStrides { .. } => "strides not supported here".to_string(),
        IoError::NotFound { reason, .. } => format!("no such allocation: {reason}"),
        IoError::StorageHandleNotFound { reason, .. } => {
            format!("the storage has no such page: {reason}")
        }
        IoError::StorageMappingFailed { size, source, .. } => format!(
            "a deferred allocation of {size} bytes got no device memory: {}",
            io_error_text(source)
        ),
        IoError::Unknown { description, .. } => description.clone(),
        IoError::UnsupportedIoOperation { .. } => "operation not supported".to_string(),
        other => without_backtrace(&other.to_string()),
    }
}

/// `text` without a trailing backtrace line ("No backtrace available") or block.
fn without_backtrace(text: &str) -> String {
    let cut = ["\nNo backtrace available", "\nBacktrace:"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    text[..cut].to_string()
}

/// Inclusive byte ranges for a message: `0 B to 64.00 KiB (0 to 65536 bytes), …`.
fn format_ranges(ranges: &[(u64, u64)]) -> String {
    if ranges.is_empty() {
        return "none".to_string();
    }
    ranges
        .iter()
        .map(|&(low, high)| {
            format!(
                "{} to {} ({low} to {high} bytes)",
                format_bytes(low),
                format_bytes(high)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl ReserveError {
    /// Whether the storage ran out of memory (so giving back free pages may help).
    pub(crate) fn is_out_of_memory(&self) -> bool {
        matches!(self, ReserveError::OutOfMemory { .. })
    }

    /// Whether the reservation failed for room (the device or a pool cap): a cleanup, or
    /// bytes pending release, may make room. A full cap counts: the bounded sweeps may
    /// not have seen every dropped handle of a large pool yet.
    pub fn is_out_of_room(&self) -> bool {
        matches!(
            self,
            ReserveError::OutOfMemory { .. } | ReserveError::PoolCapacityExceeded { .. }
        )
    }

    /// The bytes asked for.
    pub fn requested(&self) -> u64 {
        match self {
            ReserveError::BufferTooBig { requested, .. }
            | ReserveError::NoPoolAccepts { requested, .. }
            | ReserveError::PoolCapacityExceeded { requested, .. }
            | ReserveError::OutOfMemory { requested, .. }
            | ReserveError::TooManyPages { requested, .. }
            | ReserveError::Storage { requested, .. } => *requested,
        }
    }
}

impl From<ReserveError> for IoError {
    fn from(error: ReserveError) -> Self {
        match error {
            ReserveError::BufferTooBig { requested, .. } => IoError::BufferTooBig {
                size: requested,
                backtrace: Default::default(),
            },
            ReserveError::OutOfMemory { requested, .. } => IoError::OutOfMemory {
                size: requested,
                backtrace: Default::default(),
            },
            ReserveError::Storage { source, .. } => source,
            other => IoError::Unknown {
                description: other.to_string(),
                backtrace: Default::default(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every storage error prints on one line with its numbers and reason, and without
    /// the backtrace line cubecl-runtime's own text ends with.
    #[test]
    fn storage_errors_print_one_line_without_a_backtrace() {
        let errors = [
            IoError::OutOfMemory {
                size: 4096,
                backtrace: Default::default(),
            },
            IoError::BufferTooBig {
                size: 4096,
                backtrace: Default::default(),
            },
            IoError::NotFound {
                reason: "gone".into(),
                backtrace: Default::default(),
            },
            IoError::Unknown {
                description: "wgpu said no".into(),
                backtrace: Default::default(),
            },
        ];
        for error in &errors {
            assert!(error.to_string().contains("No backtrace available"));
            let text = io_error_text(error);
            assert!(!text.contains('\n') && !text.contains("acktrace"), "{text}");
            assert!(
                text.contains("4096") || text.contains("gone") || text.contains("wgpu said no"),
                "{text}"
            );
        }
        assert_eq!(
            without_backtrace("the device is lost\nNo backtrace available"),
            "the device is lost"
        );
    }
}
