//! The adaptive pool: pages sized after the allocations they serve.
//!
//! Reservations fall in two *bands*: *huge* ones (over a sixteenth of the largest page)
//! and the rest, so a small allocation never pins a page made for a huge one (field
//! scenario C17), while every other size shares pages and packs with its neighbours.
//! Each band has a *current* tier: pages of one size, chosen from what the band served:
//!
//! - shared band: the largest allocation served plus [`PAGE_SLACK`] (when the band served
//!   anything that small), rounded up to a MiB, so every page leaves room for smaller
//!   allocations beside the largest; and at least a sixteenth of the band's peak live
//!   bytes (rounded up to a coarse ladder of sixteen steps per power of two), so a large
//!   working set of small allocations spans a few big pages rather than many small ones;
//!   at least [`MIN_PAGE`];
//! - huge band: one allocation per page, rounded up to a MiB, so a huge allocation
//!   reserves about its own size.
//!
//! Lifecycle of a tier:
//!
//! 1. It is made, with its first page, when a band's request does not fit its current
//!    pages or the page size the band wants doubled; it then takes over the band.
//! 2. The tier it replaced becomes *outdated*: it serves nothing new and gives each page
//!    back as the page empties.
//! 3. Whenever a band must add a page, it first gives back every page of its own tiers
//!    (and of outdated tiers) that holds no live slice: free pages are a bet that their
//!    sizes come back, and a band that is growing has lost that bet. The other band's
//!    free pages stay: its bet is still open. A repeating workload adds no page in its
//!    steady state, so it loses nothing to this.
//! 4. When the device refuses a page of the size the band wants, a tier of pages just
//!    big enough for the request (rounded up to a MiB) takes over instead: a nearly full
//!    device that cannot hold another page sized after the band's largest allocation
//!    may still hold the request.
//! 5. Compaction (`adaptive/compact.rs`) moves a band's slices between its pages
//!    whatever their tier: an outdated tier's pages empty into the holes of any tier
//!    of the band, or into fresh pages of its current tier, not only into the current
//!    tier's holes (which, after a tier took over, are often those of one full page).
//!
//! The slack rule and "a new tier only when a request does not fit" are what the
//! allocator bench (benches/README.md) measured best over repeated passes: a page sized
//! to the largest allocation alone packs the next-largest ones badly, and replacing a
//! tier whenever an allocation fits it poorly strands the allocations of the tier it
//! replaced.

use super::pages::{MAX_PAGES, Search, SlicedPages};
use super::slices::{Slice, SliceTable, Sweep};
use super::{GrowError, PoolStats, align_down, align_up};
use crate::memory_management::placement::BlockId;
use crate::storage::ComputeStorage;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};
use cubecl_runtime::server::IoError;

mod compact;

/// The smallest page a shared tier makes, in bytes.
pub(crate) const MIN_PAGE: u64 = 2 << 20;
/// Room a shared page keeps beside the largest allocation it was sized for, in bytes.
const PAGE_SLACK: u64 = 1 << 20;
/// Page sizes are multiples of this many bytes.
const PAGE_GRANULE: u64 = 1 << 20;
/// A page is at least this fraction (1 / n) of the band's peak live bytes.
const PAGES_PER_WORKING_SET: u64 = 16;

#[derive(Debug)]
struct Tier {
    pages: SlicedPages,
    band: usize,
    outdated: bool,
}

/// What one band has served.
#[derive(Debug, Default, Clone, Copy)]
struct Band {
    current: Option<usize>,
    largest: u64,
    /// The smallest allocation served; `None` before the first.
    smallest: Option<u64>,
    live: u64,
    peak_live: u64,
}

impl Band {
    /// The band as it would be once it also serves `effective` bytes.
    fn serving(mut self, effective: u64) -> Self {
        self.largest = self.largest.max(effective);
        self.smallest = Some(self.smallest.map_or(effective, |s| s.min(effective)));
        self.live += effective;
        self.peak_live = self.peak_live.max(self.live);
        self
    }
}

/// Pages sized after the allocations served, per band of sizes.
#[derive(Debug)]
pub(crate) struct AdaptivePool {
    max_page_size: u64,
    /// The largest page rounded down to the alignment (computed once: `accept` runs on
    /// every reservation).
    max_accepted: u64,
    granule: u64,
    /// Tiers by index (a slice records its tier); `None` once a tier is gone.
    tiers: Vec<Option<Tier>>,
    bands: Vec<Band>,
    slices: SliceTable,
    stats: PoolStats,
    pages_peak: u64,
}

/// The shared band and the huge band.
const SHARED: usize = 0;
const HUGE: usize = 1;

/// `bytes` rounded up to the ladder of page sizes: sixteen steps per power of two.
fn ladder_up(bytes: u64) -> u64 {
    let step = (bytes.next_power_of_two() / 32).max(1);
    bytes.div_ceil(step) * step
}

impl AdaptivePool {
    pub(crate) fn new(pool: u8, max_page_size: u64, alignment: u64) -> Self {
        let granule = alignment.max(1);
        Self {
            max_page_size,
            max_accepted: align_down(max_page_size, granule),
            granule,
            tiers: Vec::new(),
            bands: Vec::new(),
            slices: SliceTable::new(pool),
            stats: PoolStats::default(),
            pages_peak: 0,
        }
    }

    pub(crate) fn accept(&self, size: u64) -> bool {
        align_up(size.max(1), self.granule) <= self.max_accepted()
    }

    /// The largest reservation the pool accepts, in bytes: the largest page, rounded down
    /// to the alignment.
    pub(crate) fn max_accepted(&self) -> u64 {
        self.max_accepted
    }

    /// The band of an aligned size: huge above a sixteenth of the largest page.
    fn band_of(&self, effective: u64) -> usize {
        if effective > self.max_page_size / 16 {
            HUGE
        } else {
            SHARED
        }
    }

    /// The page size a band wants after what it served.
    fn page_size_for(&self, band: usize, served: &Band) -> u64 {
        let page = if band == HUGE {
            // One per page: about its own size.
            align_up(served.largest, PAGE_GRANULE)
        } else {
            // Room beside the largest is for smaller allocations: a band that served
            // none (equal large tensors) gets pages of exactly the largest.
            let slack = match served.smallest {
                Some(smallest) if smallest <= PAGE_SLACK => PAGE_SLACK,
                _ => 0,
            };
            align_up(served.largest.saturating_add(slack), PAGE_GRANULE)
                .max(ladder_up(served.peak_live / PAGES_PER_WORKING_SET))
                .max(MIN_PAGE)
        };
        align_up(page, self.granule).min(self.max_accepted)
    }

    fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    fn band_mut(&mut self, band: usize) -> &mut Band {
        if self.bands.len() <= band {
            self.bands.resize(band + 1, Band::default());
        }
        &mut self.bands[band]
    }

    /// A slice from the current tier of the size's band, if it has room.
    pub(crate) fn try_reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Option<ManagedMemoryHandle> {
        self.sweep(storage, Sweep::Step);
        let effective = self.effective(size);
        let band = self.band_of(effective);
        // A band without pages has nothing to place in, whatever a sweep frees. Sweeps
        // never drop a current tier (only outdated ones), so `tier` stays valid.
        let tier = self.current_tier(band)?;
        if self.tiers[tier]
            .as_mut()
            .is_some_and(|t| t.pages.placement_is_tight(size))
        {
            self.sweep(storage, Sweep::Poll);
        }
        if let Some(handle) = self.place_in(tier, band, size, Search::Quick) {
            return Some(handle);
        }
        self.sweep(storage, Sweep::CatchUp);
        self.place_in(tier, band, size, Search::Thorough)
    }

    /// The page size the band wants if it also serves `effective` bytes.
    fn wanted(&self, band: usize, effective: u64) -> u64 {
        let stats = self.bands.get(band).copied().unwrap_or_default();
        self.page_size_for(band, &stats.serving(effective))
    }

    /// The index of the band's current tier, once the band has one.
    fn current_tier(&self, band: usize) -> Option<usize> {
        self.bands.get(band)?.current
    }

    /// A slice of `size` bytes in the band's current tier.
    fn place(&mut self, size: u64, search: Search) -> Option<ManagedMemoryHandle> {
        let band = self.band_of(self.effective(size));
        let tier = self.current_tier(band)?;
        self.place_in(tier, band, size, search)
    }

    /// A slice of `size` bytes in tier `tier_index`, serving `band`.
    fn place_in(
        &mut self,
        tier_index: usize,
        band: usize,
        size: u64,
        search: Search,
    ) -> Option<ManagedMemoryHandle> {
        let tier = self.tiers[tier_index].as_mut()?;
        let placed = tier.pages.place(size, search)?;
        let effective = placed.padding + size;
        self.stats.served(size);
        let band = &mut self.bands[band];
        *band = band.serving(effective);
        Some(self.slices.insert(placed, tier_index as u32))
    }

    /// Adds a page to the band's current tier, or makes a tier of a new page size that
    /// takes over once its first page exists (a refused page leaves the pool as it was).
    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        let effective = self.effective(size);
        let band = self.band_of(effective);
        self.sweep(storage, Sweep::CatchUp);
        // The band's bet on its free pages is lost; the other band's is not (a loop
        // that uses both bands would otherwise re-make each band's pages every pass).
        // Released pages go back before the new one is made, so the device never holds
        // both.
        if self.release_where(storage, |tier| tier.band == band || tier.outdated) > 0 {
            storage.flush();
        }
        let wanted = self.wanted(band, effective);
        let (page_size, added) = match self.current_if_fitting(band, effective, wanted) {
            Some(index) => {
                let Some(tier) = self.tiers[index].as_mut() else {
                    unreachable!("a current tier is live");
                };
                if tier.pages.count() >= MAX_PAGES {
                    return Err(GrowError::TooManyPages { limit: MAX_PAGES });
                }
                (
                    tier.pages.page_size(),
                    tier.pages.add_page(storage).map(drop),
                )
            }
            None => (wanted, self.add_tier(storage, band, wanted)),
        };
        match added {
            // The device cannot hold a page of the size the band wants (sized after the
            // largest allocation it served); a page just big enough for this request
            // may still fit, so it takes over the band instead of failing.
            Err(IoError::OutOfMemory { .. }) if self.smallest_page(effective) < page_size => {
                let smallest = self.smallest_page(effective);
                tracing::debug!(
                    page_size,
                    smallest,
                    "no room for a page of the band's size; trying one that fits the request"
                );
                self.add_tier(storage, band, smallest)
                    .map_err(GrowError::Storage)?;
            }
            added => added.map_err(GrowError::Storage)?,
        }
        self.pages_peak = self.pages_peak.max(self.page_count());
        self.place(size, Search::Quick)
            .ok_or(GrowError::TooManyPages { limit: MAX_PAGES })
    }

    /// Makes a tier of `page_size` pages with its first page, and has it take over the
    /// band (a refused page leaves the pool as it was).
    fn add_tier<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        band: usize,
        page_size: u64,
    ) -> Result<(), IoError> {
        let mut pages = SlicedPages::new(page_size, self.granule);
        pages.add_page(storage)?;
        self.take_over(
            band,
            Tier {
                pages,
                band,
                outdated: false,
            },
        );
        Ok(())
    }

    /// The smallest page that holds `effective` bytes.
    fn smallest_page(&self, effective: u64) -> u64 {
        align_up(align_up(effective, PAGE_GRANULE), self.granule).min(self.max_accepted)
    }

    /// The band's current tier, unless `effective` outgrew its pages: it does not fit
    /// one, or the band now wants pages at least twice as large. A tier that holds no
    /// page is replaced by any other wanted size (that costs nothing).
    fn current_if_fitting(&self, band: usize, effective: u64, wanted: u64) -> Option<usize> {
        let index = self.current_tier(band)?;
        let pages = &self.tiers[index].as_ref()?.pages;
        let page_size = pages.page_size();
        let other_size = wanted != page_size;
        let outgrown =
            effective > page_size || wanted >= 2 * page_size || (other_size && pages.count() == 0);
        (!outgrown).then_some(index)
    }

    /// Makes `tier` the band's current one; the previous one becomes outdated.
    fn take_over(&mut self, band: usize, tier: Tier) {
        if let Some(old) = self.band_mut(band).current
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
        self.band_mut(band).current = Some(index);
    }

    /// Frees a block a moved slice left in `tier` (its copy can no longer be overtaken).
    pub(crate) fn free_moved(&mut self, tier: u32, block: BlockId) {
        if let Some(tier) = self.tiers.get_mut(tier as usize).and_then(Option::as_mut) {
            tier.pages.free(block);
        }
    }

    /// Whether gathering the free bytes of `size`'s band could make room for it in the
    /// band's current tier: the band's pages of every tier hold that many free bytes
    /// (outdated pages take moved slices too), a page of the current tier holds the
    /// size, and the band has two pages to move between.
    ///
    /// # Complexity
    /// O(tiers).
    pub(crate) fn could_gather(&self, size: u64) -> bool {
        let effective = self.effective(size);
        let band = self.band_of(effective);
        let Some(current) = self
            .current_tier(band)
            .and_then(|index| self.tiers[index].as_ref())
        else {
            return false;
        };
        let (pages, free) = self
            .tiers
            .iter()
            .flatten()
            .filter(|tier| tier.band == band)
            .fold((0, 0), |(pages, free), tier| {
                (pages + tier.pages.count(), free + tier.pages.free_bytes())
            });
        current.pages.count() >= 1
            && pages >= 2
            && effective <= current.pages.page_size()
            && free >= effective
    }

    /// Frees the slices of dropped handles; outdated tiers give back pages as they empty.
    pub(crate) fn sweep<S: ComputeStorage>(&mut self, storage: &mut S, sweep: Sweep) {
        let (tiers, bands) = (&mut self.tiers, &mut self.bands);
        let mut emptied_outdated = false;
        self.slices.sweep(sweep, |slice: &Slice| {
            if let (Some(tier), Some(block)) = (tiers[slice.tier as usize].as_mut(), slice.block) {
                tier.pages.free(block);
                bands[tier.band].live -= slice.storage.size() + slice.padding;
                emptied_outdated |= tier.outdated;
            }
        });
        // Flushed here: the periodic cleanup flushes only what it released itself.
        if emptied_outdated && self.release_where(storage, |tier| tier.outdated) > 0 {
            storage.flush();
        }
    }

    /// Gives back the entirely free pages of the tiers `which` selects; outdated tiers
    /// left without pages are dropped.
    fn release_where<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        which: impl Fn(&Tier) -> bool,
    ) -> u64 {
        let mut released = 0;
        for slot in &mut self.tiers {
            if let Some(tier) = slot.as_mut().filter(|tier| which(tier)) {
                released += tier.pages.release_free_pages(storage);
                if tier.outdated && tier.pages.count() == 0 {
                    *slot = None;
                }
            }
        }
        released
    }

    /// Gives every entirely free page back; outdated tiers left without pages are dropped.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) {
        self.sweep(storage, Sweep::All);
        self.release_where(storage, |_| true);
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

    /// The pages of every tier, outdated ones included (for page maps).
    pub(crate) fn tier_pages(&self) -> impl Iterator<Item = &SlicedPages> + '_ {
        self.tiers.iter().flatten().map(|tier| &tier.pages)
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
            .max_by_key(|tier| tier.band)
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

    /// Huge means over a sixteenth of the largest page.
    #[test]
    fn huge_is_over_a_sixteenth_of_the_largest_page() {
        let pool = AdaptivePool::new(0, 1 << 30, 256);
        assert_eq!(pool.band_of(1), SHARED);
        assert_eq!(pool.band_of(64 << 20), SHARED);
        assert_eq!(pool.band_of((64 << 20) + 256), HUGE);
    }

    /// Shared pages: the largest allocation plus a MiB of slack when the band served
    /// something that fits the slack, rounded up to a MiB, at least a sixteenth of the
    /// working set and 2 MiB; one per page when huge.
    #[test]
    fn page_sizes_follow_the_band() {
        const MIB: u64 = 1 << 20;
        let pool = AdaptivePool::new(0, 1 << 30, 256);
        let served = |sizes: &[u64]| {
            let mut band = Band::default();
            for &size in sizes {
                band = band.serving(size);
            }
            band
        };
        let page = |band, sizes: &[u64]| pool.page_size_for(band, &served(sizes));
        assert_eq!(page(SHARED, &[1000]), MIN_PAGE);
        assert_eq!(page(SHARED, &[MIB; 20]), MIN_PAGE);
        assert_eq!(page(SHARED, &[1000, 3 * MIB + 1]), 5 * MIB);
        assert_eq!(
            page(SHARED, &[4 * MIB; 3]),
            4 * MIB,
            "equal tensors, no slack"
        );
        assert_eq!(page(SHARED, &[1000, 4 * MIB, 4 * MIB]), 5 * MIB);
        assert_eq!(page(SHARED, &[4 * MIB; 40]), 10 * MIB);
        assert_eq!(page(SHARED, &[4 * MIB; 100]), 25 * MIB);
        assert_eq!(page(SHARED, &[15 * MIB]), 15 * MIB);
        assert_eq!(page(HUGE, &[800 * MIB]), 800 * MIB);
        assert_eq!(ladder_up(1000), 1024);
        assert_eq!(ladder_up(17 << 20), 17 << 20);
    }
}
