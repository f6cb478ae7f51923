//! The adaptive pool: pages sized after the allocations they serve.
//!
//! Reservations fall in two *bands*: *huge* ones (over a sixteenth of the largest page
//! and over [`HUGE_FLOOR`]) and the rest, so a small allocation never pins a page made
//! for a huge one (field scenario C17), while every other size shares pages and packs
//! with its neighbours. Each band holds pages of several sizes in one placement index
//! (its *tier*): a reservation takes a well-fitting free block of any page of its band
//! (two-level segregated fit, so the smallest hole that holds it, whatever page it is
//! in), and when none has room the band adds one page sized for the reservation:
//!
//! - shared band: the request rounded up to the ladder of page sizes (sixteen steps per
//!   power of two: at most 1/16 over the request) up to 16 MiB, to 2 MiB above, at least
//!   an eighth of the band's peak live bytes since the last explicit cleanup (the same
//!   ladder), so a large working set of small allocations spans a few big pages rather
//!   than many small ones, and at least twice the request between [`MIN_PAGE`] and
//!   [`FLOOR_CAP`] (see [`page_floor`]); pages up to
//!   [`POW2_UP_TO`] (4 MiB, the device memory block the client opens its device with)
//!   are powers of two, so they pack those blocks and a page given back frees its share;
//! - huge band: the request rounded up to a MiB, so a huge allocation reserves about its
//!   own size.
//!
//! Rules:
//!
//! 1. Whenever a band must add a page, it first gives back every page of its own that
//!    holds no live slice: free pages are a bet that their sizes come back, and a band
//!    that is growing has lost that bet. The other band's free pages stay: its bet is
//!    still open. A repeating workload adds no page in its steady state, so it loses
//!    nothing to this.
//! 2. When the device refuses a page of the size the band wants (an eighth of its
//!    working set may be more than the request), a page just big enough for the request
//!    (rounded up to a MiB) is tried instead.
//! 3. Compaction (`adaptive/compact.rs`) moves a band's slices between its pages.
//!
//! Why pages of many sizes, sized for the request: pages of one size per band (the
//! largest allocation plus a MiB of slack, a new size taking over and the older pages
//! serving nothing new) left a working set of a few large temporaries spread over pages
//! sized for the largest. On `benches/e2e`'s model step (50 temporaries of 1 KiB-16 MiB)
//! peak in use over peak reserved went from 0.750 to 0.862 on the H200 (0.779 to 0.862 on
//! lavapipe), on its held-out plan from 0.734 to 0.844 (0.539 to 0.844), over 60 more
//! seeds of that plan (host replay) from a mean of 0.65 to 0.79; on the allocator bench
//! every trace is now at or above cubecl-server's (`large_live` 0.562 to 0.689,
//! `fence_cycles` 0.766 to 0.878, `training` 0.872 to 0.935). The eighth of the working
//! set (rather than a sixteenth) and the 2 MiB floor (rather than 1 MiB) were what kept
//! `training` above the peer.
//!
//! Why the floor follows the request: a fixed 2 MiB floor gave a working set of four
//! 256 KiB slices a 2 MiB page (`steady`: efficiency 0.500), and the main job's 12-layer
//! chain (weights of 192-512 KiB) a second 2 MiB page for 0.2 MiB more. Twice the request
//! keeps what the 2 MiB floor was for (a page made for a 1 MiB request still holds two of
//! them) and gives the small ones 1 MiB pages: on `benches/allocator` steady 0.500 to
//! 1.000, leak_mix 0.825 to 0.859, random 0.824 to 0.842, inference 0.962 to 0.976,
//! phases 0.877 to 0.882, the 12 other random seeds a mean of 0.789 to 0.795, no trace
//! lower.

use super::pages::{MAX_PAGES, Search, SlicedPages};
use super::slices::{FreeSpace, Reuse, Slice, SliceTable, Sweep};
use super::{GrowError, PoolStats, align_down, align_up};
use crate::memory_management::placement::BlockId;
use crate::storage::ComputeStorage;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};
use cubecl_runtime::server::IoError;

mod compact;
mod fill;

/// The smallest page the shared band makes, in bytes.
pub(crate) const MIN_PAGE: u64 = 1 << 20;
/// The request-driven floor of a shared page stops here, in bytes: a larger request gets
/// its own size on the ladder (see [`page_floor`]).
pub(crate) const FLOOR_CAP: u64 = 2 << 20;
/// Pages up to this many bytes are powers of two (they pack 4 MiB device memory blocks).
pub(crate) const POW2_UP_TO: u64 = 4 << 20;
/// Huge reservations are over this many bytes as well as over a sixteenth of the largest
/// page: on a device whose largest binding is 128 MiB (lavapipe, WebGPU's default) a
/// sixteenth is 8 MiB, and a band of its own for every tensor over 8 MiB left each in a
/// page sized for the largest of them.
pub(crate) const HUGE_FLOOR: u64 = 64 << 20;
/// Shared pages up to this many bytes follow the ladder (at most 1/16 over the request).
const LADDER_UP_TO: u64 = 16 << 20;
/// Shared pages over [`LADDER_UP_TO`] are multiples of this many bytes (at most 1/8 over
/// the request): on the allocator bench's `large_live` (1-64 MiB under a moving budget)
/// and `fence_cycles` (256 KiB-32 MiB batches) the coarser sizes let a slightly larger
/// request reuse a page (efficiency 0.650 to 0.697 and 0.823 to 0.867), and the model
/// step's temporaries (up to 16 MiB) keep the ladder's fit.
const COARSE_GRANULE: u64 = 2 << 20;
/// Huge pages are multiples of this many bytes.
const HUGE_GRANULE: u64 = 1 << 20;
/// A new shared page is at least this fraction (1 / n) of the band's peak live bytes
/// (since the last explicit cleanup: see [`AdaptivePool::release_free_pages`]).
const PAGES_PER_WORKING_SET: u64 = 8;

/// The pages of one band.
#[derive(Debug)]
struct Tier {
    pages: SlicedPages,
    band: usize,
}

/// What one band has served.
#[derive(Debug, Default, Clone, Copy)]
struct Band {
    /// Its tier, once it made its first page.
    current: Option<usize>,
    live: u64,
    /// The most bytes live at once since the pool was made or last cleaned up.
    peak_live: u64,
}

impl Band {
    /// The band as it would be once it also serves `effective` bytes.
    fn serving(mut self, effective: u64) -> Self {
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
    /// Tiers by index (a slice records its tier): one per band that made a page.
    tiers: Vec<Option<Tier>>,
    bands: Vec<Band>,
    slices: SliceTable,
    stats: PoolStats,
    pages_peak: u64,
}

/// The shared band and the huge band.
const SHARED: usize = 0;
const HUGE: usize = 1;

/// The least size of a shared page made for a reservation of `effective` bytes: twice
/// the reservation, so the page holds another of its size, within [`MIN_PAGE`] and
/// [`FLOOR_CAP`].
pub(crate) fn page_floor(effective: u64) -> u64 {
    effective.saturating_mul(2).clamp(MIN_PAGE, FLOOR_CAP)
}

/// `bytes` rounded up to the ladder of page sizes: sixteen steps per power of two.
fn ladder_up(bytes: u64) -> u64 {
    let step = (bytes.next_power_of_two() / 32).max(1);
    bytes.div_ceil(step) * step
}

/// A shared page's size for a request of `bytes`: the ladder up to [`LADDER_UP_TO`],
/// whole multiples of [`COARSE_GRANULE`] above it.
fn shared_round_up(bytes: u64) -> u64 {
    if bytes <= LADDER_UP_TO {
        ladder_up(bytes)
    } else {
        align_up(bytes, COARSE_GRANULE)
    }
}

/// The free space of an adaptive pool as its sweeps see it: a released slice's block
/// goes back to its tier, and its bytes leave its band's live count.
struct BandSpace<'a> {
    tiers: &'a mut [Option<Tier>],
    bands: &'a mut [Band],
}

impl FreeSpace for BandSpace<'_> {
    fn release(&mut self, slice: &Slice) {
        if let (Some(tier), Some(block)) = (self.tiers[slice.tier as usize].as_mut(), slice.block) {
            tier.pages.free(block);
            self.bands[tier.band].live -= slice.storage.size() + slice.padding;
        }
    }

    fn reissues_in_place(&self, slice: &Slice) -> bool {
        match (&self.tiers[slice.tier as usize], slice.block) {
            (Some(tier), Some(block)) => tier.pages.reissues_in_place(block),
            _ => false,
        }
    }
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

    /// The smallest page the pool would make now, in bytes: the shared band's page for a
    /// reservation of one alignment unit (it grows with the band's peak).
    pub(crate) fn smallest_new_page(&self) -> u64 {
        self.fresh_page_for(SHARED)
    }

    /// The band of an aligned size: huge above a sixteenth of the largest page and above
    /// [`HUGE_FLOOR`].
    fn band_of(&self, effective: u64) -> usize {
        if effective > (self.max_page_size / 16).max(HUGE_FLOOR) {
            HUGE
        } else {
            SHARED
        }
    }

    /// The size of the page a band adds for a reservation of `effective` bytes (see the
    /// module doc).
    fn page_for(&self, band: usize, effective: u64) -> u64 {
        let page = if band == HUGE {
            // One per page in practice: about its own size.
            align_up(effective, HUGE_GRANULE)
        } else {
            let served = self.band_stats(band).serving(effective);
            shared_round_up(effective)
                .max(ladder_up(served.peak_live / PAGES_PER_WORKING_SET))
                .max(page_floor(effective))
        };
        let page = if page <= POW2_UP_TO {
            page.next_power_of_two()
        } else {
            page
        };
        align_up(page, self.granule).min(self.max_accepted)
    }

    /// The size of the pages a band's compaction makes fresh: the page it would add for
    /// a small reservation (its floor).
    fn fresh_page_for(&self, band: usize) -> u64 {
        self.page_for(band, self.granule)
    }

    fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    fn band_stats(&self, band: usize) -> Band {
        self.bands.get(band).copied().unwrap_or_default()
    }

    fn band_mut(&mut self, band: usize) -> &mut Band {
        if self.bands.len() <= band {
            self.bands.resize(band + 1, Band::default());
        }
        &mut self.bands[band]
    }

    /// A slice from the pages of the size's band, if one has room.
    pub(crate) fn try_reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Option<ManagedMemoryHandle> {
        let effective = self.effective(size);
        let band = self.band_of(effective);
        // A band without pages has nothing to place in, whatever a sweep frees. A
        // band's tier is never dropped, so `tier` stays valid.
        let Some(tier) = self.current_tier(band) else {
            self.sweep(storage, Sweep::Step);
            return None;
        };
        // The same bytes, freed and asked for again: the band's live bytes are unchanged.
        let reuse = Reuse {
            size,
            effective,
            tier: tier as u32,
        };
        let mut space = BandSpace {
            tiers: &mut self.tiers,
            bands: &mut self.bands,
        };
        if let Some(handle) = self.slices.step_reusing(reuse, &mut space) {
            self.stats.served(size);
            return Some(handle);
        }
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

    /// The index of the band's tier, once the band has one.
    fn current_tier(&self, band: usize) -> Option<usize> {
        self.bands.get(band)?.current
    }

    /// A slice of `size` bytes in the pages of its band.
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

    /// Adds a page sized for `size` to its band (giving back the band's free pages
    /// first) and places the reservation in it; a refused page leaves the pool as it was
    /// but for the pages given back.
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
        // Released pages go back to the storage before the new one is made: a storage
        // that frees a page at once when no unfinished work uses it (`WgpuStorage`)
        // never has the device hold both then; one that work in flight may still use
        // stays until that work is done, and the budget counts both meanwhile.
        if self.release_where(storage, |tier| tier.band == band) > 0 {
            storage.flush();
        }
        if let Some(tier) = self.current_tier(band).and_then(|t| self.tiers[t].as_ref())
            && tier.pages.count() >= MAX_PAGES
        {
            return Err(GrowError::TooManyPages { limit: MAX_PAGES });
        }
        let page_size = self.page_for(band, effective);
        match self.add_page(storage, band, page_size) {
            // The device cannot hold a page of the size the band wants (an eighth of
            // its working set may be more than the request); a page just big enough
            // for this request may still fit.
            Err(IoError::OutOfMemory { .. }) if self.smallest_page(effective) < page_size => {
                let smallest = self.smallest_page(effective);
                tracing::debug!(
                    page_size,
                    smallest,
                    "no room for a page of the band's size; trying one that fits the request"
                );
                self.add_page(storage, band, smallest)
                    .map_err(GrowError::Storage)?;
            }
            added => added.map_err(GrowError::Storage)?,
        }
        self.pages_peak = self.pages_peak.max(self.page_count());
        self.place(size, Search::Quick)
            .ok_or(GrowError::TooManyPages { limit: MAX_PAGES })
    }

    /// Adds a page of `page_size` bytes to the band's tier, making the tier with it when
    /// the band has none (a refused page leaves the pool as it was).
    fn add_page<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        band: usize,
        page_size: u64,
    ) -> Result<(), IoError> {
        let fresh = self.fresh_page_for(band);
        if let Some(tier) = self
            .current_tier(band)
            .and_then(|index| self.tiers[index].as_mut())
        {
            tier.pages.set_page_size(fresh);
            return tier.pages.add_page_of(storage, page_size).map(drop);
        }
        let mut pages = SlicedPages::new(fresh, self.granule);
        pages.add_page_of(storage, page_size)?;
        let index = match self.tiers.iter().position(Option::is_none) {
            Some(index) => {
                self.tiers[index] = Some(Tier { pages, band });
                index
            }
            None => {
                self.tiers.push(Some(Tier { pages, band }));
                self.tiers.len() - 1
            }
        };
        self.band_mut(band).current = Some(index);
        Ok(())
    }

    /// The smallest page that holds `effective` bytes.
    fn smallest_page(&self, effective: u64) -> u64 {
        align_up(align_up(effective, 1 << 20), self.granule).min(self.max_accepted)
    }

    /// Frees a block a moved slice left in `tier` (its copy can no longer be overtaken).
    pub(crate) fn free_moved(&mut self, tier: u32, block: BlockId) {
        if let Some(tier) = self.tiers.get_mut(tier as usize).and_then(Option::as_mut) {
            tier.pages.free(block);
        }
    }

    /// Whether gathering the free bytes of `size`'s band could make room for it: the
    /// band's pages hold that many free bytes, one of them is large enough for the size,
    /// and the band has two pages to move between.
    ///
    /// # Complexity
    /// O(pages of the band).
    pub(crate) fn could_gather(&self, size: u64) -> bool {
        let effective = self.effective(size);
        let band = self.band_of(effective);
        let Some(tier) = self
            .current_tier(band)
            .and_then(|index| self.tiers[index].as_ref())
        else {
            return false;
        };
        tier.pages.count() >= 2
            && tier.pages.free_bytes() >= effective
            && effective <= tier.pages.largest_page()
    }

    /// Frees the slices of dropped handles.
    pub(crate) fn sweep<S: ComputeStorage>(&mut self, _storage: &mut S, sweep: Sweep) {
        let mut space = BandSpace {
            tiers: &mut self.tiers,
            bands: &mut self.bands,
        };
        self.slices.sweep(sweep, |slice| space.release(slice));
    }

    /// Gives back the entirely free pages of the tiers `which` selects.
    fn release_where<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        which: impl Fn(&Tier) -> bool,
    ) -> u64 {
        let mut released = 0;
        for tier in self.tiers.iter_mut().flatten() {
            if which(tier) {
                released += tier.pages.release_free_pages(storage);
            }
        }
        released
    }

    /// Gives every entirely free page back, and starts each band's peak afresh from
    /// what is live now: the working set that sizes new pages is the one since this
    /// cleanup (a cleanup after a large phase of work would otherwise leave every later
    /// page sized for that phase: on the H200, after a fill to 8 GiB, 400 tensors of
    /// 4 KiB-3 MiB took 1 GiB pages and kept 1 GiB reserved for 56 MiB in use).
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) {
        self.sweep(storage, Sweep::All);
        self.release_where(storage, |_| true);
        for band in &mut self.bands {
            band.peak_live = band.live;
        }
    }

    /// Gives back the pages already known to hold no slice, without a sweep and
    /// leaving the bands' peaks as they are (the working set has not changed); returns
    /// whether any went back.
    pub(crate) fn release_empty_pages<S: ComputeStorage>(&mut self, storage: &mut S) -> bool {
        self.release_where(storage, |_| true) > 0
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

    /// The pages of every tier (for page maps).
    pub(crate) fn tier_pages(&self) -> impl Iterator<Item = &SlicedPages> + '_ {
        self.tiers.iter().flatten().map(|tier| &tier.pages)
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        &mut self.slices
    }

    /// The largest free block of any page, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.tiers
            .iter()
            .flatten()
            .map(|tier| tier.pages.largest_free())
            .max()
            .unwrap_or(0)
    }

    /// The pool's report. Its kind's `page_size` is the largest page held (0 with none);
    /// `outdated_pages` is always 0 (pages of every size serve: none is outdated).
    pub(crate) fn report(&self) -> MemoryPoolReport {
        let live = self.tiers.iter().flatten();
        let reserved = live.clone().map(|tier| tier.pages.reserved()).sum();
        let page_size = live
            .map(|tier| tier.pages.largest_page())
            .max()
            .unwrap_or(0);
        MemoryPoolReport {
            kind: MemoryPoolKind::Adaptive {
                page_size,
                outdated_pages: 0,
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
mod tests;
