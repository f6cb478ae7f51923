//! Pools: each owns its pages and decides where a reservation goes inside them.
//!
//! - [`sliced`]: pages of one size carved into slices through [`placement`](super::placement).
//! - [`whole_page`]: one allocation per page (exclusive pages, direct allocations, the
//!   persistent pool, dedicated allocations), kept in [`solo_pages`].
//!
//! Every pool answers the same questions: does it accept a size, can it serve it from
//! what it holds (`try_reserve`), can it grow to serve it (`grow`), and what does it
//! hold (`report`). The manager only routes between them.

pub(crate) mod adaptive;
pub(crate) mod evacuate;
pub(crate) mod page_map;
pub(crate) mod pages;
pub(crate) mod sliced;
pub(crate) mod slices;
pub(crate) mod solo_pages;
pub(crate) mod whole_page;

use crate::memory_management::MoveLimits;
use crate::memory_management::placement::BlockId;
use crate::storage::{ComputeStorage, CopyStorage};
use adaptive::AdaptivePool;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolReport};
use cubecl_runtime::server::IoError;
use evacuate::{Goal, Pinned, Relocated};
use sliced::SlicedPool;
use slices::{SliceTable, Sweep};
use whole_page::WholePagePool;

/// Rounds `value` up to a multiple of `granule` (any non-zero granule, not only powers
/// of two: a device may report an alignment of 48). Saturates at `u64::MAX`, which no
/// page can hold, so an absurd request fails its size check instead of wrapping.
///
/// Device alignments are powers of two in practice (WebGPU requires it of
/// `min_storage_buffer_offset_alignment`), and this runs several times per reservation:
/// that case is a mask instead of a division.
#[inline]
pub(crate) fn align_up(value: u64, granule: u64) -> u64 {
    if granule.is_power_of_two() {
        let mask = granule - 1;
        return value.checked_add(mask).map_or(u64::MAX, |v| v & !mask);
    }
    value.div_ceil(granule).saturating_mul(granule)
}

/// Why a pool could not add the page a reservation needs.
#[derive(Debug)]
pub(crate) enum GrowError {
    /// The pool is capped and holds every page its cap allows.
    Capacity {
        capacity: u64,
        bytes_in_use: u64,
        bytes_reserved: u64,
        largest_free_slice: u64,
    },
    /// The pool holds as many pages as a handle's location can name.
    TooManyPages { limit: u64 },
    /// The storage refused the page.
    Storage(IoError),
}

/// High-water marks of one pool, reset only by building a new pool.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PoolStats {
    pub(crate) pages_peak: u64,
    pub(crate) largest_alloc: u64,
}

impl PoolStats {
    pub(crate) fn served(&mut self, size: u64) {
        self.largest_alloc = self.largest_alloc.max(size);
    }
}

/// One dynamic pool of a layout.
// A layout holds a handful of pools, built once: the size gap between variants costs
// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum DynamicPool {
    Sliced(SlicedPool),
    WholePage(WholePagePool),
    Adaptive(AdaptivePool),
}

impl DynamicPool {
    #[inline]
    pub(crate) fn accept(&self, size: u64) -> bool {
        match self {
            DynamicPool::Sliced(pool) => pool.accept(size),
            DynamicPool::WholePage(pool) => pool.accept(size),
            DynamicPool::Adaptive(pool) => pool.accept(size),
        }
    }

    /// The largest reservation the pool accepts, in bytes.
    pub(crate) fn max_accepted(&self) -> u64 {
        match self {
            DynamicPool::Sliced(pool) => pool.max_accepted(),
            DynamicPool::WholePage(pool) => pool.max_accepted(),
            DynamicPool::Adaptive(pool) => pool.max_accepted(),
        }
    }

    /// The smallest page the pool would make now, in bytes: the page its smallest
    /// reservation would get.
    pub(crate) fn smallest_page(&self) -> u64 {
        match self {
            DynamicPool::Sliced(pool) => pool.smallest_page(),
            DynamicPool::WholePage(pool) => pool.smallest_page(),
            DynamicPool::Adaptive(pool) => pool.smallest_new_page(),
        }
    }

    /// The sizes the pool accepts, as inclusive ranges in ascending order: a sliced pool
    /// may leave a gap between `max_slice_size` and its near-page sizes; the other pools
    /// take every size up to their maximum.
    pub(crate) fn accepted_ranges(&self) -> Vec<(u64, u64)> {
        match self {
            DynamicPool::Sliced(pool) => pool.accepted_ranges(),
            DynamicPool::WholePage(_) | DynamicPool::Adaptive(_) => vec![(0, self.max_accepted())],
        }
    }

    pub(crate) fn try_reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
        now: u64,
    ) -> Option<ManagedMemoryHandle> {
        match self {
            DynamicPool::Sliced(pool) => pool.try_reserve(size),
            DynamicPool::WholePage(pool) => pool.try_reserve(size, now),
            DynamicPool::Adaptive(pool) => pool.try_reserve(storage, size),
        }
    }

    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
        now: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        match self {
            DynamicPool::Sliced(pool) => pool.grow(storage, size),
            DynamicPool::WholePage(pool) => pool.grow(storage, size, now),
            DynamicPool::Adaptive(pool) => pool.grow(storage, size),
        }
    }

    /// Whether the periodic cleanup can release pages of this pool (exclusive pages
    /// with a period).
    pub(crate) fn releases_on_a_timer(&self) -> bool {
        matches!(self, DynamicPool::WholePage(pool) if pool.releases_on_a_timer())
    }

    /// Frees the slices of dropped handles that `sweep` visits.
    pub(crate) fn sweep<S: ComputeStorage>(&mut self, storage: &mut S, sweep: Sweep, now: u64) {
        match self {
            DynamicPool::Sliced(pool) => pool.sweep(sweep),
            DynamicPool::WholePage(pool) => pool.sweep(sweep, now),
            DynamicPool::Adaptive(pool) => pool.sweep(storage, sweep),
        }
    }

    /// The pool's periodic release; whether it gave back a page (not yet flushed).
    pub(crate) fn cleanup_periodic<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        now: u64,
    ) -> bool {
        match self {
            DynamicPool::WholePage(pool) => pool.cleanup_periodic(storage, now),
            DynamicPool::Sliced(_) | DynamicPool::Adaptive(_) => false,
        }
    }

    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S, now: u64) {
        match self {
            DynamicPool::Sliced(pool) => pool.release_free_pages(storage),
            DynamicPool::WholePage(pool) => pool.release_free_pages(storage, now),
            DynamicPool::Adaptive(pool) => pool.release_free_pages(storage),
        }
    }

    /// Gives back the pages already known to hold no slice, without sweeping for
    /// dropped handles (O(pages)); returns whether any went back. Whole-page pools keep
    /// theirs: their own idle rule (`dealloc_period`, longer for sizes that come back)
    /// decides, and a size class given back here would be made again on the loop's next
    /// round.
    pub(crate) fn release_empty_pages<S: ComputeStorage>(&mut self, storage: &mut S) -> bool {
        match self {
            DynamicPool::Sliced(pool) => pool.release_empty_pages(storage),
            DynamicPool::Adaptive(pool) => pool.release_empty_pages(storage),
            DynamicPool::WholePage(_) => false,
        }
    }

    /// Moves live slices out of sparse pages (see [`evacuate`]) toward `goal`; whole-page
    /// pools have nothing to gather and move nothing.
    pub(crate) fn compact<S: CopyStorage>(
        &mut self,
        storage: &mut S,
        limits: MoveLimits,
        goal: Goal,
        pinned: Pinned<'_>,
    ) -> Vec<Relocated> {
        match self {
            DynamicPool::Sliced(pool) => pool.compact(storage, limits, goal, pinned),
            DynamicPool::Adaptive(pool) => pool.compact(storage, limits, goal, pinned),
            DynamicPool::WholePage(_) => Vec::new(),
        }
    }

    /// Frees the block a moved slice left in `tier`.
    pub(crate) fn free_moved(&mut self, tier: u32, block: BlockId) {
        match self {
            DynamicPool::Sliced(pool) => pool.free_moved(block),
            DynamicPool::Adaptive(pool) => pool.free_moved(tier, block),
            DynamicPool::WholePage(_) => {}
        }
    }

    /// Whether moving slices could make room for `size` bytes without a new page.
    pub(crate) fn could_gather(&self, size: u64) -> bool {
        match self {
            DynamicPool::Sliced(pool) => pool.could_gather(size),
            DynamicPool::Adaptive(pool) => pool.could_gather(size),
            DynamicPool::WholePage(_) => false,
        }
    }

    /// Slices over every free range of the page `id` (a sliced or adaptive pool's page),
    /// so nothing new lands in it while the caller holds them. A whole-page pool has
    /// nothing to fill: its page holds one slice, and a free one is given whole.
    pub(crate) fn fill_page(&mut self, id: crate::storage::StorageId) -> Vec<ManagedMemoryHandle> {
        match self {
            DynamicPool::Sliced(pool) => pool.fill_page(id),
            DynamicPool::WholePage(_) => Vec::new(),
            DynamicPool::Adaptive(pool) => pool.fill_page(id),
        }
    }

    pub(crate) fn slices(&self) -> &SliceTable {
        match self {
            DynamicPool::Sliced(pool) => pool.slices(),
            DynamicPool::WholePage(pool) => pool.slices(),
            DynamicPool::Adaptive(pool) => pool.slices(),
        }
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        match self {
            DynamicPool::Sliced(pool) => pool.slices_mut(),
            DynamicPool::WholePage(pool) => pool.slices_mut(),
            DynamicPool::Adaptive(pool) => pool.slices_mut(),
        }
    }

    pub(crate) fn largest_free(&self) -> u64 {
        match self {
            DynamicPool::Sliced(pool) => pool.largest_free(),
            DynamicPool::WholePage(pool) => pool.largest_free(),
            DynamicPool::Adaptive(pool) => pool.largest_free(),
        }
    }

    pub(crate) fn cap(&self) -> Option<u64> {
        match self {
            DynamicPool::Sliced(pool) => pool.cap(),
            DynamicPool::WholePage(_) | DynamicPool::Adaptive(_) => None,
        }
    }

    pub(crate) fn report(&self) -> MemoryPoolReport {
        match self {
            DynamicPool::Sliced(pool) => pool.report(),
            DynamicPool::WholePage(pool) => pool.report(),
            DynamicPool::Adaptive(pool) => pool.report(),
        }
    }
}

/// Rounds `value` down to a multiple of `granule` (any non-zero granule): the largest
/// aligned size that fits in `value` bytes, e.g. a device's largest page when it is not
/// a multiple of the alignment.
pub(crate) fn align_down(value: u64, granule: u64) -> u64 {
    value / granule * granule
}

#[cfg(test)]
mod reuse_tests;
#[cfg(test)]
mod work_bound_tests;

#[cfg(test)]
mod tests {
    use super::{align_down, align_up};

    /// The mask path and the division path agree, and both saturate instead of wrapping.
    #[test]
    fn align_up_rounds_and_saturates_for_any_granule() {
        for granule in [1u64, 32, 48, 256, 4096] {
            for value in [0u64, 1, 47, 48, 255, 256, 257, 1 << 40] {
                let expected = value.div_ceil(granule) * granule;
                assert_eq!(align_up(value, granule), expected, "{value} / {granule}");
            }
            if granule > 1 {
                assert_eq!(align_up(u64::MAX - 1, granule), u64::MAX);
            }
        }
        assert_eq!(align_up(u64::MAX - 300, 256), u64::MAX - 255);
        assert_eq!(align_down(100_003, 4), 100_000);
        assert_eq!(align_down(65_536, 48), 65_520);
        assert_eq!(align_down(48, 48), 48);
    }
}
