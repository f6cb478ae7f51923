//! The adaptive pool: pages sized after the allocations they serve.
//!
//! Reservations are split by size class (powers of four of their aligned size), so a
//! small allocation never pins a page made for a large one (field scenario C17). Each
//! class has a *current* tier: pages of one size, chosen from the largest allocation the
//! class has served:
//!
//! - eight of it per page while that stays under a quarter of the largest page, so a
//!   page holds several allocations and placement has room to pack them;
//! - otherwise one per page, so a big allocation reserves about its own size (rounded
//!   up to a MiB).
//!
//! Shared page sizes are rounded up to a coarse ladder (eight steps per power of two, at
//! least [`MIN_PAGE`]). When a class's allocations outgrow its pages (a request does not fit a
//! page, or the wanted page size doubled), a tier of the new size takes over; the old one
//! becomes *outdated*: it serves nothing new and gives each page back as it empties.

use super::pages::{MAX_PAGES, SlicedPages};
use super::slices::{Slice, SliceTable, Sweep};
use super::{GrowError, PoolStats, align_up};
use crate::storage::ComputeStorage;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};

/// The smallest page an adaptive tier makes, in bytes.
pub(crate) const MIN_PAGE: u64 = 2 << 20;
/// Allocations per page while pages stay small.
const PER_PAGE: u64 = 8;

#[derive(Debug)]
struct Tier {
    pages: SlicedPages,
    class: usize,
    outdated: bool,
    /// The largest allocation the tier was sized after, in bytes.
    sized_after: u64,
}

/// Pages sized after the largest allocation served, per size class.
#[derive(Debug)]
pub(crate) struct AdaptivePool {
    max_page_size: u64,
    granule: u64,
    /// Tiers by index (a slice records its tier); `None` once a tier is gone.
    tiers: Vec<Option<Tier>>,
    /// The current tier of each size class.
    current: Vec<Option<usize>>,
    slices: SliceTable,
    stats: PoolStats,
    pages_peak: u64,
}

/// The size class of an aligned size: floor(log4(size)).
fn class_of(size: u64) -> usize {
    ((63 - size.max(1).leading_zeros()) / 2) as usize
}

/// `bytes` rounded up to the ladder of page sizes: eight steps per power of two.
fn ladder_up(bytes: u64) -> u64 {
    let step = (bytes.next_power_of_two() / 16).max(1);
    bytes.div_ceil(step) * step
}

impl AdaptivePool {
    pub(crate) fn new(pool: u8, max_page_size: u64, alignment: u64) -> Self {
        Self {
            max_page_size,
            granule: alignment.max(1),
            tiers: Vec::new(),
            current: Vec::new(),
            slices: SliceTable::new(pool),
            stats: PoolStats::default(),
            pages_peak: 0,
        }
    }

    pub(crate) fn accept(&self, size: u64) -> bool {
        size <= self.max_page_size
    }

    /// The largest reservation the pool accepts, in bytes.
    pub(crate) fn max_accepted(&self) -> u64 {
        self.max_page_size
    }

    /// The page size wanted for allocations up to `largest` bytes.
    fn page_size_for(&self, largest: u64) -> u64 {
        let shared = ladder_up(largest.saturating_mul(PER_PAGE)).max(MIN_PAGE);
        let page = if shared <= self.max_page_size / 4 {
            shared
        } else {
            // One allocation per page: about its own size (to the MiB).
            align_up(largest, 1 << 20)
        };
        align_up(page, self.granule).min(self.max_page_size / self.granule * self.granule)
    }

    fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    /// A slice from the current tier of the size's class, if it has room.
    pub(crate) fn try_reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Option<ManagedMemoryHandle> {
        self.sweep(storage, Sweep::Step);
        if let Some(handle) = self.place(size) {
            return Some(handle);
        }
        // Freed slices only help a class that has pages.
        let class = class_of(self.effective(size));
        self.current.get(class).copied().flatten()?;
        self.sweep(storage, Sweep::All);
        self.place(size)
    }

    fn place(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        let class = class_of(self.effective(size));
        let tier_index = (*self.current.get(class)?)?;
        let tier = self.tiers[tier_index].as_mut()?;
        let placed = tier.pages.place(size)?;
        self.stats.served(size);
        Some(self.slices.insert(placed, tier_index as u32))
    }

    /// Adds a page to the class's current tier, or, when the allocations outgrew its
    /// pages, makes a tier of the new size that takes over once its first page exists
    /// (a refused page leaves the pool as it was).
    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        let effective = self.effective(size);
        let class = class_of(effective);
        if self.current.len() <= class {
            self.current.resize(class + 1, None);
        }
        match self.current_if_fitting(class, effective) {
            Some(index) => {
                let Some(tier) = self.tiers[index].as_mut() else {
                    unreachable!("a current tier is live");
                };
                if tier.pages.count() >= MAX_PAGES {
                    return Err(GrowError::TooManyPages { limit: MAX_PAGES });
                }
                tier.pages.add_page(storage).map_err(GrowError::Storage)?;
                tier.sized_after = tier.sized_after.max(effective);
            }
            None => {
                let sized_after = self.current[class]
                    .and_then(|index| self.tiers[index].as_ref())
                    .map_or(effective, |tier| tier.sized_after.max(effective));
                let mut pages = SlicedPages::new(self.page_size_for(sized_after), self.granule);
                pages.add_page(storage).map_err(GrowError::Storage)?;
                self.take_over(
                    class,
                    Tier {
                        pages,
                        class,
                        outdated: false,
                        sized_after,
                    },
                );
            }
        }
        self.pages_peak = self.pages_peak.max(self.page_count());
        self.place(size)
            .ok_or(GrowError::TooManyPages { limit: MAX_PAGES })
    }

    /// The class's current tier, unless `effective` outgrew its pages (it does not fit
    /// one, or the page size it wants is at least double).
    fn current_if_fitting(&self, class: usize, effective: u64) -> Option<usize> {
        let index = self.current[class]?;
        let tier = self.tiers[index].as_ref()?;
        let largest = tier.sized_after.max(effective);
        let fits = effective <= tier.pages.page_size();
        let doubled = self.page_size_for(largest) >= 2 * tier.pages.page_size();
        (fits && !doubled).then_some(index)
    }

    /// Makes `tier` the class's current one; the previous one becomes outdated.
    fn take_over(&mut self, class: usize, tier: Tier) {
        if let Some(old) = self.current[class]
            && let Some(tier) = self.tiers[old].as_mut()
        {
            tier.outdated = true;
        }
        let index = match self.tiers.iter().position(Option::is_none) {
            Some(index) => {
                self.tiers[index] = Some(tier);
                index
            }
            None => {
                self.tiers.push(Some(tier));
                self.tiers.len() - 1
            }
        };
        self.current[class] = Some(index);
    }

    /// Frees the slices of dropped handles; outdated tiers give back pages as they empty.
    pub(crate) fn sweep<S: ComputeStorage>(&mut self, storage: &mut S, sweep: Sweep) {
        let tiers = &mut self.tiers;
        let mut emptied_outdated = false;
        self.slices.sweep(sweep, |slice: Slice| {
            if let (Some(tier), Some(block)) = (tiers[slice.tier as usize].as_mut(), slice.block) {
                tier.pages.free(block);
                emptied_outdated |= tier.outdated;
            }
        });
        if emptied_outdated {
            self.release_outdated(storage);
        }
    }

    fn release_outdated<S: ComputeStorage>(&mut self, storage: &mut S) {
        for slot in &mut self.tiers {
            if let Some(tier) = slot.as_mut().filter(|tier| tier.outdated) {
                tier.pages.release_free_pages(storage);
                if tier.pages.count() == 0 {
                    *slot = None;
                }
            }
        }
    }

    /// Gives every entirely free page back; tiers left without pages are dropped.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) {
        self.sweep(storage, Sweep::All);
        for slot in &mut self.tiers {
            if let Some(tier) = slot.as_mut() {
                tier.pages.release_free_pages(storage);
                if tier.outdated && tier.pages.count() == 0 {
                    *slot = None;
                }
            }
        }
    }

    fn page_count(&self) -> u64 {
        self.tiers
            .iter()
            .flatten()
            .map(|tier| tier.pages.count())
            .sum()
    }

    pub(crate) fn slices(&self) -> &SliceTable {
        &self.slices
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        &mut self.slices
    }

    /// The largest free block of any page of a current tier, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.tiers
            .iter()
            .flatten()
            .filter(|tier| !tier.outdated)
            .map(|tier| tier.pages.largest_free())
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn report(&self) -> MemoryPoolReport {
        let live = self.tiers.iter().flatten();
        let reserved = live.clone().map(|tier| tier.pages.reserved()).sum();
        let outdated_pages = live
            .clone()
            .filter(|tier| tier.outdated)
            .map(|tier| tier.pages.count())
            .sum();
        let page_size = live
            .filter(|tier| !tier.outdated)
            .max_by_key(|tier| tier.class)
            .map_or(0, |tier| tier.pages.page_size());
        MemoryPoolReport {
            kind: MemoryPoolKind::Adaptive {
                page_size,
                outdated_pages,
            },
            usage: self.slices.sums().into_usage(reserved),
            pages: self.page_count(),
            pages_peak: self.pages_peak,
            pages_unmapped: 0,
            largest_alloc: self.stats.largest_alloc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Classes are powers of four: 1..3 -> 0, 4..15 -> 1, 1 MiB -> 10.
    #[test]
    fn size_classes_are_powers_of_four() {
        assert_eq!(class_of(1), 0);
        assert_eq!(class_of(3), 0);
        assert_eq!(class_of(4), 1);
        assert_eq!(class_of(15), 1);
        assert_eq!(class_of(16), 2);
        assert_eq!(class_of(1 << 20), 10);
    }

    /// Pages: eight allocations each while small, one each when large.
    #[test]
    fn page_sizes_follow_the_largest_allocation() {
        let pool = AdaptivePool::new(0, 1 << 30, 256);
        assert_eq!(pool.page_size_for(1000), MIN_PAGE);
        assert_eq!(pool.page_size_for(1 << 20), 8 << 20);
        assert_eq!(pool.page_size_for(800 << 20), 800 << 20);
        assert_eq!(ladder_up(1000), 1024);
        assert_eq!(ladder_up(17 << 20), 18 << 20);
    }
}
