//! Pools where every reservation is a page of its own: exclusive pages, direct
//! allocations, the persistent pool and dedicated allocations.
//!
//! They differ only in which free page a reservation may take ([`Reuse`]) and when free
//! pages go back to the driver ([`Release`]); the bookkeeping is shared.

use super::slices::{Slice, SliceTable, Sweep};
use super::solo_pages::SoloPages;
use super::{GrowError, PoolStats, align_up};
use crate::storage::{ComputeStorage, StorageHandle, StorageUtilization};
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};
use std::collections::VecDeque;

/// Which free page a reservation may take, and which page a miss makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// The smallest free page at least as large as the aligned request and at most half
    /// again as large (explicit exclusive pools: bounded slack, broad reuse).
    Similar,
    /// The smallest free page at least as large as the aligned request and at most twice
    /// as large; a miss makes a page of the request's [`page_class`], not of its exact
    /// size (the exclusive-pages preset, the layout of the web). A bucket cache's buffer
    /// serves requests down to half its size, so a page taken by one half its size
    /// wastes no more than such a cache does, and the smallest fit keeps the usual slack
    /// far below that; a class leaves room for a tensor that grows a little each step
    /// (a language model's key/value caches) to take the page its predecessor freed, and
    /// keeps the sizes of a memory's pages few.
    SizeClasses,
    /// Only a free page of exactly the aligned size (direct, persistent, dedicated).
    Exact,
    /// The smallest free page at least as large (short-lived allocations such as staging
    /// for reads: a big idle page serves small reads instead of being re-made).
    AnyLarger,
}

/// When free pages go back to the driver (besides an explicit cleanup, which always
/// gives back every free page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Only on explicit cleanup.
    Explicit,
    /// A page free for this many reservations goes back on the periodic cleanup (under
    /// [`Reuse::SizeClasses`], longer once sizes given back came back:
    /// `WholePagePool::learn_from_return`).
    AfterIdle(u64),
    /// Before a new page would take reserved bytes over this watermark.
    Watermark(u64),
    /// On every periodic cleanup (dedicated allocations: freed, then gone).
    Immediately,
}

/// Pages given back at growth that are remembered, to notice when their sizes return;
/// under [`Reuse::SizeClasses`], as many pages given back by either rule.
const RELEASES_REMEMBERED: usize = 64;

/// Under [`Reuse::SizeClasses`], the longest a free page waits before the periodic
/// cleanup gives it back, in dealloc periods (see [`WholePagePool::learn_from_return`]).
const MOST_IDLE_PERIODS: u64 = 16;

/// The page classes of one octave `[2^k, 2^(k+1)]`, in 256ths of `2^k`: `2^(i/8)` for
/// `i = 0..=8`, rounded up. Eight classes an octave: a page is at most 9.4 % over the
/// request that made it.
const CLASS_STEPS: [u64; 9] = [256, 280, 305, 332, 363, 395, 431, 470, 512];

/// The page class of `bytes`: the smallest size of the form `2^k * 2^(i/8)` (see
/// [`CLASS_STEPS`]) at least `bytes`, rounded up to a multiple of `granule`. Sizes up to
/// 256 bytes are only rounded up to the granule. Saturates at `u64::MAX`.
pub(crate) fn page_class(bytes: u64, granule: u64) -> u64 {
    let granule = granule.max(1);
    if bytes <= 256 {
        return align_up(bytes, granule);
    }
    // bytes > 256: the octave's 256ths are whole bytes.
    let octave = 63 - bytes.leading_zeros();
    let unit = 1u64 << (octave - 8);
    let class = CLASS_STEPS
        .iter()
        .map(|&step| step.saturating_mul(unit))
        .find(|&class| class >= bytes)
        .unwrap_or(u64::MAX);
    align_up(class, granule)
}

/// A pool of one-allocation pages.
#[derive(Debug)]
pub(crate) struct WholePagePool {
    kind: MemoryPoolKind,
    max_alloc_size: u64,
    granule: u64,
    reuse: Reuse,
    release: Release,
    /// The largest page a miss makes, in bytes (a page class is cut down to it, never
    /// below the request): the device's largest page.
    page_limit: u64,
    pages: SoloPages,
    last_idle_check: u64,
    /// Pages given back at growth, as (bytes, when), oldest first, at most
    /// [`RELEASES_REMEMBERED`].
    released_at_growth: VecDeque<(u64, u64)>,
    /// Growth gives back no page before this reservation (see [`Self::grow`]).
    keep_until: u64,
    /// Under [`Reuse::SizeClasses`]: pages given back by the periodic cleanup or at
    /// growth, as (bytes, when the page became free), oldest first, at most
    /// [`RELEASES_REMEMBERED`].
    given_back: VecDeque<(u64, u64)>,
    /// Under [`Reuse::SizeClasses`]: how long a free page waits before the periodic
    /// cleanup gives it back, in reservations, once given-back sizes came back; 0 until
    /// then (the dealloc period applies).
    learned_idle: u64,
    slices: SliceTable,
    stats: PoolStats,
}

impl WholePagePool {
    pub(crate) fn new(
        pool: u8,
        kind: MemoryPoolKind,
        max_alloc_size: u64,
        alignment: u64,
        reuse: Reuse,
        release: Release,
    ) -> Self {
        Self {
            kind,
            max_alloc_size,
            granule: alignment.max(1),
            reuse,
            release,
            page_limit: u64::MAX,
            pages: SoloPages::default(),
            last_idle_check: 0,
            released_at_growth: VecDeque::new(),
            keep_until: 0,
            given_back: VecDeque::new(),
            learned_idle: 0,
            slices: SliceTable::new(pool),
            stats: PoolStats::default(),
        }
    }

    /// Makes no page over `limit` bytes (the device's largest page): a page class above
    /// it is cut down to it, or to the request where that is larger.
    pub(crate) fn pages_at_most(mut self, limit: u64) -> Self {
        self.page_limit = limit;
        self
    }

    pub(crate) fn accept(&self, size: u64) -> bool {
        size <= self.max_alloc_size
    }

    /// The largest reservation the pool accepts, in bytes.
    pub(crate) fn max_accepted(&self) -> u64 {
        self.max_alloc_size
    }

    /// The smallest page the pool makes, in bytes: one granule (the alignment, or the
    /// smaller granule the pool was given; a page is its reservation's aligned size or
    /// its class).
    pub(crate) fn smallest_page(&self) -> u64 {
        self.page_size(self.effective(1))
    }

    fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    /// A free page that fits, if the reuse rule allows one.
    pub(crate) fn try_reserve(&mut self, size: u64, now: u64) -> Option<ManagedMemoryHandle> {
        self.sweep(Sweep::Step, now);
        if let Some(handle) = self.take_free(size) {
            return Some(handle);
        }
        self.sweep(Sweep::CatchUp, now);
        self.take_free(size)
    }

    fn take_free(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        let effective = self.effective(size);
        let index = self
            .pages
            .take_free(effective, self.largest_reusable(effective))?;
        Some(self.occupy(index, size))
    }

    /// The largest free page the reuse rule lets a reservation of `effective` bytes take.
    fn largest_reusable(&self, effective: u64) -> u64 {
        match self.reuse {
            Reuse::Similar => effective.saturating_add(effective / 2),
            Reuse::SizeClasses => effective.saturating_mul(2),
            Reuse::Exact => effective,
            Reuse::AnyLarger => u64::MAX,
        }
    }

    /// Puts a slice of `size` bytes on page `index`. Its padding is the alignment
    /// padding only: a reused page's extra bytes count as reserved, not padding.
    fn occupy(&mut self, index: u32, size: u64) -> ManagedMemoryHandle {
        let padding = self.effective(size) - size;
        let page = self
            .pages
            .storage(index)
            .expect("a free-list entry names a held page");
        let storage = StorageHandle::new(page.id, StorageUtilization { offset: 0, size });
        self.stats.served(size);
        self.slices.insert_slice(storage, padding, index, None, 0)
    }

    /// The page a miss for `effective` (aligned) bytes makes: its [`page_class`] under
    /// [`Reuse::SizeClasses`], within the page limit; the aligned size otherwise.
    fn page_size(&self, effective: u64) -> u64 {
        match self.reuse {
            Reuse::SizeClasses => page_class(effective, self.granule)
                .min(self.page_limit)
                .max(effective),
            _ => effective,
        }
    }

    /// Allocates a page for the request (of the aligned size, or of its class under
    /// [`Reuse::SizeClasses`]), first giving back free pages as the [`Release`] rule
    /// says.
    ///
    /// Exclusive pages with a period: free pages the request could not use are a bet on
    /// their sizes coming back. At growth that bet is kept no larger than the pages in
    /// use, longest idle given back first, so reserved stays under about twice the peak
    /// in use when sizes drift (field scenario C01). But when a growth makes a page that
    /// a page given back at growth within the last period would have served, giving it
    /// back was the wrong bet (a loop over several sizes, each dropped before the next:
    /// issue 12, field failure 1, re-made every page on every pass). Growth then gives
    /// back nothing for one period; the periodic cleanup still gives back pages idle
    /// that long. So such a loop re-makes what the first pass gave back once, and
    /// nothing after.
    ///
    /// Under [`Reuse::SizeClasses`] (the exclusive-pages preset) a growth that a page
    /// given back would have served also teaches the periodic cleanup to wait longer
    /// ([`learn_from_return`](Self::learn_from_return)).
    ///
    /// Without a period the user asked to keep every free page until an explicit cleanup.
    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
        now: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        let effective = self.effective(size);
        let released = match self.release {
            Release::Watermark(watermark) => !self
                .release_until(
                    storage,
                    |pages| pages.reserved() + effective <= watermark,
                    now,
                )
                .is_empty(),
            Release::AfterIdle(period) if self.reuse != Reuse::Exact => {
                if self.reuse == Reuse::SizeClasses {
                    self.learn_from_return(effective, period, now);
                }
                self.release_at_growth(storage, effective, period, now)
            }
            _ => false,
        };
        // Released pages go back to the storage before the new one is made: freed at the
        // device at once when no unfinished work uses them (`WgpuStorage`), otherwise
        // held, and counted by the budget beside the new one, until that work is done.
        if released {
            storage.flush();
        }
        let page = storage
            .alloc(self.page_size(effective))
            .map_err(GrowError::Storage)?;
        let index = self.pages.add(page, now);
        self.stats.pages_peak = self.stats.pages_peak.max(self.pages.count());
        Ok(self.occupy(index, size))
    }

    /// The growth-time release of an exclusive pool with a `period` (see
    /// [`grow`](Self::grow)); returns whether it gave back any page.
    fn release_at_growth<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        effective: u64,
        period: u64,
        now: u64,
    ) -> bool {
        self.released_at_growth
            .retain(|&(_, at)| now.saturating_sub(at) < period);
        let largest = self.largest_reusable(effective);
        if self
            .released_at_growth
            .iter()
            .any(|&(bytes, _)| (effective..=largest).contains(&bytes))
        {
            self.released_at_growth.clear();
            self.keep_until = now.saturating_add(period);
        }
        if now < self.keep_until {
            return false;
        }
        let before = self.pages.count();
        let released = self.release_until(
            storage,
            |pages| pages.free_bytes() <= pages.reserved() - pages.free_bytes(),
            now,
        );
        for &(bytes, _) in &released {
            if self.released_at_growth.len() == RELEASES_REMEMBERED {
                self.released_at_growth.pop_front();
            }
            self.released_at_growth.push_back((bytes, now));
        }
        self.remember_given_back(&released);
        self.pages.count() < before
    }

    /// Under [`Reuse::SizeClasses`]: when a growth for `effective` bytes makes a page
    /// that a page given back (by the periodic cleanup or at growth) would have served,
    /// the workload came back to that size after the page had been free for `gap`
    /// reservations, so free pages idle that long are still wanted: the periodic cleanup
    /// waits at least `2 * gap` from then on, at most [`MOST_IDLE_PERIODS`] dealloc
    /// periods. A loop whose round is longer than the period (sizes that drift and come
    /// round again, prompts of varying length) then keeps its pages after the round that
    /// taught it; a workload that never comes back still gives its pages back after one
    /// period (field scenario C01).
    fn learn_from_return(&mut self, effective: u64, period: u64, now: u64) {
        let largest = self.largest_reusable(effective);
        let mut earliest: Option<u64> = None;
        self.given_back.retain(|&(bytes, freed_at)| {
            let served = (effective..=largest).contains(&bytes);
            if served {
                earliest = Some(earliest.map_or(freed_at, |e| e.min(freed_at)));
            }
            !served
        });
        if let Some(freed_at) = earliest {
            let wanted = now.saturating_sub(freed_at).saturating_mul(2);
            self.learned_idle = self
                .learned_idle
                .max(wanted)
                .min(period.saturating_mul(MOST_IDLE_PERIODS));
        }
    }

    /// Under [`Reuse::SizeClasses`], remembers pages given back (bytes, when each became
    /// free) for [`learn_from_return`](Self::learn_from_return), the newest
    /// [`RELEASES_REMEMBERED`].
    fn remember_given_back(&mut self, released: &[(u64, u64)]) {
        if self.reuse != Reuse::SizeClasses {
            return;
        }
        for &page in released {
            if self.given_back.len() == RELEASES_REMEMBERED {
                self.given_back.pop_front();
            }
            self.given_back.push_back(page);
        }
    }

    pub(crate) fn sweep(&mut self, sweep: Sweep, now: u64) {
        let pages = &mut self.pages;
        self.slices
            .sweep(sweep, |slice: &Slice| pages.mark_free(slice.page, now));
    }

    /// Whether [`cleanup_periodic`](Self::cleanup_periodic) can ever give back a page.
    pub(crate) fn releases_on_a_timer(&self) -> bool {
        matches!(self.release, Release::AfterIdle(_) | Release::Immediately)
    }

    /// Whether the pool holds any page.
    pub(crate) fn holds_pages(&self) -> bool {
        self.pages.count() > 0
    }

    /// The periodic cleanup: gives back pages its [`Release`] rule says are unused, and
    /// returns whether it gave back any (the caller then flushes the storage).
    pub(crate) fn cleanup_periodic<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        now: u64,
    ) -> bool {
        match self.release {
            Release::AfterIdle(period) => {
                // Checked every fifth of the period: a page goes back between one and
                // 1.2 periods after it was freed, for O(pages / period) work per reservation.
                if now.saturating_sub(self.last_idle_check) < (period / 5).max(1) {
                    return false;
                }
                self.last_idle_check = now;
                self.sweep(Sweep::All, now);
                let idle = period.max(self.learned_idle);
                let released = self
                    .pages
                    .release_where(storage, |page| now.saturating_sub(page.freed_at) >= idle);
                self.remember_given_back(&released);
                !released.is_empty()
            }
            // Runs on every reservation, so the sweep is the bounded catch-up: with
            // more than 1024 slots a freed page may wait a few reservations.
            Release::Immediately if self.pages.count() > 0 => {
                self.sweep(Sweep::CatchUp, now);
                !self.pages.release_where(storage, |_| true).is_empty()
            }
            _ => false,
        }
    }

    /// Gives every free page back.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S, now: u64) {
        self.sweep(Sweep::All, now);
        self.pages.release_where(storage, |_| true);
    }

    /// Releases free pages, longest idle first, until `enough` holds; returns each one's
    /// size in bytes and when it became free.
    fn release_until<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        enough: impl Fn(&SoloPages) -> bool,
        now: u64,
    ) -> Vec<(u64, u64)> {
        if enough(&self.pages) {
            return Vec::new();
        }
        self.sweep(Sweep::CatchUp, now);
        self.pages.release_until(storage, enough)
    }

    pub(crate) fn slices(&self) -> &SliceTable {
        &self.slices
    }

    /// The pages it holds, free or not (for page maps).
    pub(crate) fn solo_pages(&self) -> &SoloPages {
        &self.pages
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        &mut self.slices
    }

    /// The largest free page, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.pages.largest_free()
    }

    pub(crate) fn report(&self) -> MemoryPoolReport {
        MemoryPoolReport {
            kind: self.kind,
            usage: self.slices.sums().into_usage(self.pages.reserved()),
            pages: self.pages.count(),
            pages_peak: self.stats.pages_peak,
            pages_unmapped: 0,
            largest_alloc: self.stats.largest_alloc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::page_class;

    /// Classes are at least the request, at most 9.4 % over it (plus the granule), a
    /// class (granule 1) is its own class, and the largest sizes saturate instead of
    /// wrapping.
    #[test]
    fn page_classes_bound_the_slack_and_are_stable() {
        assert_eq!(page_class(1, 64), 64);
        assert_eq!(page_class(200, 64), 256);
        assert_eq!(page_class(257, 1), 280);
        assert_eq!(page_class(3 << 20, 64), 3_235_840);
        for bytes in (1..200_000u64).step_by(97).chain([1 << 30, (1 << 30) + 1]) {
            let class = page_class(bytes, 64);
            assert!(class >= bytes, "{bytes}");
            assert!(
                class as f64 <= bytes as f64 * 1.094 + 64.0,
                "{bytes} -> {class}"
            );
            let exact = page_class(bytes, 1);
            assert_eq!(page_class(exact, 1), exact, "{bytes} -> {exact}");
        }
        assert_eq!(page_class(u64::MAX - 10, 64), u64::MAX);
    }
}
