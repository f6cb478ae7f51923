//! Pool types and pool options: the pieces a layout is written in.

use serde::{Deserialize, Serialize};

/// The placement policy of one dynamic pool.
///
/// All sizes are bytes. A layout is an ordered list of pools; a reservation goes to the
/// first pool that accepts its size (see [`MemoryPoolOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolType {
    /// One device allocation (page) per reservation; a freed page is reused by a later
    /// reservation of a similar size (at most half again as large as the request).
    ExclusivePages {
        /// The largest reservation the pool accepts, in bytes. `0` makes a pool for
        /// zero-size reservations only.
        max_alloc_size: u64,
    },
    /// Pages of `page_size` bytes carved into slices by a free-space index.
    SlicedPages {
        /// Bytes of each page (one device allocation each).
        page_size: u64,
        /// The largest reservation the pool accepts, in bytes (at most `page_size`).
        max_slice_size: u64,
        /// A cap on the bytes of all pages of this pool; `None` lets it grow without
        /// bound. A full capped pool answers
        /// [`ReserveError::PoolCapacityExceeded`](super::ReserveError::PoolCapacityExceeded)
        /// and the reservation spills to the next pool that accepts its size.
        max_pool_size: Option<u64>,
    },
    /// One device allocation per reservation, sized exactly to it (plus alignment
    /// padding), reused only by reservations of the same aligned size.
    Direct {
        /// When reserved bytes would cross this watermark, free pages are given back
        /// before a new one is made. `None`: only an explicit cleanup gives them back.
        reclaim_at: Option<u64>,
    },
}

/// One dynamic pool of a layout: its type and how often its idle pages are released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPoolOptions {
    /// The placement policy.
    pub pool_type: PoolType,
    /// For [`PoolType::ExclusivePages`]: a free page idle for this many reservations (of
    /// the whole memory) is given back to the driver by the periodic cleanup; and when the
    /// pool grows, free pages beyond its bytes in use go back first (so drifting sizes
    /// keep reserved under twice the peak in use, field scenario C01). `None`: only an
    /// explicit cleanup gives a page back. Sliced and direct pools give pages back on
    /// explicit cleanup only, and ignore it.
    pub dealloc_period: Option<u64>,
}
