//! Pages of one size carved into slices by a free-space index.

use super::slices::{Slice, SliceTable, Sweep};
use super::{GrowError, PoolStats, align_up};
use crate::memory_management::placement::Tlsf;
use crate::storage::{ComputeStorage, StorageHandle, StorageUtilization};
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};

/// Most pages a sliced pool may hold: a handle's location names its page in a `u16`.
pub(crate) const MAX_PAGES: u64 = u16::MAX as u64;

/// A pool of equal pages; placement is [`Tlsf`] over all of them, so a reservation and a
/// free cost O(1) whatever the number of slices.
#[derive(Debug)]
pub(crate) struct SlicedPool {
    page_size: u64,
    max_slice_size: u64,
    /// `None` when uncapped.
    max_pages: Option<u64>,
    granule: u64,
    pages: Vec<Option<StorageHandle>>,
    vacant_pages: Vec<u32>,
    page_count: u64,
    placement: Tlsf,
    slices: SliceTable,
    stats: PoolStats,
}

impl SlicedPool {
    /// A pool at layout position `pool`. A cap below one page shrinks the page to the cap
    /// (rounded down to the alignment, at least one alignment unit); a cap is counted in
    /// whole pages.
    pub(crate) fn new(
        pool: u8,
        page_size: u64,
        max_slice_size: u64,
        max_pool_size: Option<u64>,
        alignment: u64,
    ) -> Self {
        let granule = alignment.max(1);
        let page_size = match max_pool_size {
            Some(cap) if cap < page_size => (cap / granule * granule).max(granule),
            _ => page_size,
        };
        let max_pages = max_pool_size.map(|cap| (cap / page_size).min(MAX_PAGES));
        Self {
            page_size,
            max_slice_size: max_slice_size.min(page_size),
            max_pages,
            granule,
            pages: Vec::new(),
            vacant_pages: Vec::new(),
            page_count: 0,
            placement: Tlsf::new(granule),
            slices: SliceTable::new(pool),
            stats: PoolStats::default(),
        }
    }

    /// Whether the pool takes reservations of `size` bytes: up to `max_slice_size`, or, in
    /// an uncapped pool, a size that fills more than 80 % of a page (a near-page request
    /// wastes less here than in the next, larger pool).
    pub(crate) fn accept(&self, size: u64) -> bool {
        if size <= self.max_slice_size {
            return true;
        }
        self.max_pages.is_none()
            && size <= self.page_size
            && 5 * (self.page_size - size) < self.page_size
    }

    fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    /// A slice from the free space already held, if any fits.
    pub(crate) fn try_reserve(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        self.sweep(Sweep::Step);
        if let Some(handle) = self.place(size) {
            return Some(handle);
        }
        self.sweep(Sweep::All);
        self.place(size)
    }

    fn place(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        let effective = self.effective(size);
        let block = self.placement.allocate(effective)?;
        let page = self.pages[block.region as usize].as_ref()?;
        let storage = StorageHandle::new(
            page.id,
            StorageUtilization {
                offset: block.offset,
                size,
            },
        );
        self.stats.served(size);
        Some(
            self.slices
                .insert(storage, effective - size, block.region, Some(block.id)),
        )
    }

    /// Adds a page and carves the slice from it.
    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        if let Some(max_pages) = self.max_pages
            && self.page_count >= max_pages
        {
            return Err(GrowError::Capacity {
                capacity: max_pages * self.page_size,
                bytes_in_use: self.slices.sums().in_use,
            });
        }
        if self.page_count >= MAX_PAGES {
            return Err(GrowError::TooManyPages { limit: MAX_PAGES });
        }
        let page = storage.alloc(self.page_size).map_err(GrowError::Storage)?;
        let index = match self.vacant_pages.pop() {
            Some(index) => index,
            None => {
                self.pages.push(None);
                (self.pages.len() - 1) as u32
            }
        };
        self.pages[index as usize] = Some(page);
        self.page_count += 1;
        self.stats.pages_peak = self.stats.pages_peak.max(self.page_count);
        self.placement.add_region(index, self.page_size);
        // The page is empty and at least as large as any accepted size.
        self.place(size)
            .ok_or(GrowError::TooManyPages { limit: MAX_PAGES })
    }

    pub(crate) fn sweep(&mut self, sweep: Sweep) {
        let placement = &mut self.placement;
        self.slices.sweep(sweep, |slice: Slice| {
            if let Some(block) = slice.block {
                placement.free(block);
            }
        });
    }

    pub(crate) fn slices(&self) -> &SliceTable {
        &self.slices
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        &mut self.slices
    }

    /// Gives every entirely free page back to the storage.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) {
        self.sweep(Sweep::All);
        for index in 0..self.pages.len() {
            if self.pages[index].is_some() && self.placement.remove_region(index as u32) {
                if let Some(page) = self.pages[index].take() {
                    storage.dealloc(page.id);
                }
                self.vacant_pages.push(index as u32);
                self.page_count -= 1;
            }
        }
    }

    /// The largest free slice of any page, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.placement.largest_free()
    }

    pub(crate) fn cap(&self) -> Option<u64> {
        self.max_pages.map(|pages| pages * self.page_size)
    }

    pub(crate) fn report(&self) -> MemoryPoolReport {
        let usage = self
            .slices
            .sums()
            .into_usage(self.page_count * self.page_size);
        MemoryPoolReport {
            kind: MemoryPoolKind::Sliced {
                page_size: self.page_size,
                max_slice_size: self.max_slice_size,
            },
            usage,
            pages: self.page_count,
            pages_peak: self.stats.pages_peak,
            pages_unmapped: 0,
            largest_alloc: self.stats.largest_alloc,
        }
    }
}
