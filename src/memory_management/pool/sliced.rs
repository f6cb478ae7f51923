//! A sliced pool: pages of one size carved into slices, optionally capped.

use super::evacuate::{self, Goal, Pinned, Relocated, plan};
use super::pages::{MAX_PAGES, Search, SlicedPages};
use super::slices::{FreeSpace, Reuse, Slice, SliceTable, Sweep};
use super::{GrowError, PoolStats, align_down, align_up};
use crate::memory_management::MoveLimits;
use crate::memory_management::placement::BlockId;
use crate::storage::ComputeStorage;
use crate::storage::{CopyStorage, StorageId};
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind, MemoryPoolReport};

/// A pool of equal pages.
#[derive(Debug)]
pub(crate) struct SlicedPool {
    pages: SlicedPages,
    max_slice_size: u64,
    /// `None` when uncapped.
    max_pages: Option<u64>,
    /// The smallest near-page size [`accept`](Self::accept) takes, when it takes any
    /// (sizes over `max_slice_size` that fill most of a page; computed once: `accept`
    /// runs on every reservation).
    near_page_from: Option<u64>,
    slices: SliceTable,
    stats: PoolStats,
    /// The size of the first page of a pool that starts small
    /// ([`ramping`](Self::ramping)), in bytes; `None`: every page is `page_size`.
    ramp_from: Option<u64>,
}

impl FreeSpace for SlicedPages {
    fn release(&mut self, slice: &Slice) {
        if let Some(block) = slice.block {
            self.free(block);
        }
    }

    fn reissues_in_place(&self, slice: &Slice) -> bool {
        slice
            .block
            .is_some_and(|block| SlicedPages::reissues_in_place(self, block))
    }
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
            Some(cap) if cap < page_size => align_down(cap, granule).max(granule),
            // Rounded up: a page must hold any size it accepts, aligned.
            _ => align_up(page_size.max(1), granule),
        };
        let max_pages = max_pool_size.map(|cap| (cap / page_size).min(MAX_PAGES));
        Self {
            pages: SlicedPages::new(page_size, granule),
            max_slice_size: max_slice_size.min(page_size),
            max_pages,
            near_page_from: max_pages.is_none().then(|| near_page_from(page_size)),
            slices: SliceTable::new(pool),
            stats: PoolStats::default(),
            ramp_from: None,
        }
    }

    /// A small first page: while the pool holds no page, the page it makes is `first`
    /// bytes (aligned, at least the largest slice); every other page is the page size. A
    /// program with a few small tensors then holds little for them (the adaptive
    /// layout's small pool: 128 KiB, then 512 KiB pages). Pages that doubled their way up
    /// (128, 128, 256 KiB) were tried: the allocator bench's `tiny` trace (256 KiB live)
    /// then filled its pages exactly, and every reservation swept for a freed slot (10x
    /// slower on the H200). On `benches/e2e`'s held-out
    /// model step this took peak in use over peak reserved from 0.844 to 0.857 (host
    /// replay; the small pool held one 512 KiB page for a few KiB).
    pub(crate) fn ramping(mut self, first: u64) -> Self {
        let granule = self.pages.granule();
        let first = align_up(first.max(self.max_slice_size).max(1), granule);
        self.ramp_from = (first < self.pages.page_size()).then_some(first);
        self
    }

    /// The smallest page the pool makes, in bytes: its first page when it ramps (see
    /// [`ramping`](Self::ramping)), else the page size.
    pub(crate) fn smallest_page(&self) -> u64 {
        self.ramp_from.unwrap_or(self.pages.page_size())
    }

    /// The size of the next page, in bytes (see [`ramping`](Self::ramping)).
    fn next_page_size(&self) -> u64 {
        match self.ramp_from {
            Some(first) if self.pages.count() == 0 => first,
            _ => self.pages.page_size(),
        }
    }

    /// Whether the pool takes reservations of `size` bytes: up to `max_slice_size`, or, in
    /// an uncapped pool, a size that fills more than 80 % of a page (a near-page request
    /// wastes less here than in the next, larger pool). A capped pool never takes more
    /// than `max_slice_size` (upstream fix 0b09f3cdd: near-page strays drained it).
    #[inline]
    pub(crate) fn accept(&self, size: u64) -> bool {
        size <= self.max_slice_size
            || self
                .near_page_from
                .is_some_and(|from| size >= from && size <= self.pages.page_size())
    }

    /// The pool takes only sizes up to `max_slice_size` (a small pool in front of an
    /// adaptive one, whose near-page requests belong to the adaptive pool).
    pub(crate) fn without_near_page(mut self) -> Self {
        self.near_page_from = None;
        self
    }

    /// The largest reservation the pool accepts, in bytes.
    pub(crate) fn max_accepted(&self) -> u64 {
        if self.near_page_from.is_some() {
            self.pages.page_size()
        } else {
            self.max_slice_size
        }
    }

    /// The sizes [`accept`](Self::accept) takes, as inclusive ranges in ascending order:
    /// `0..=max_slice_size`, then, with near-page requests, the sizes that fill more than
    /// 80 % of a page up to the page (merged into one range where they touch).
    pub(crate) fn accepted_ranges(&self) -> Vec<(u64, u64)> {
        let slices = (0, self.max_slice_size);
        if self.near_page_from.is_none() {
            return vec![slices];
        }
        let page_size = self.pages.page_size();
        let near = near_page_from(page_size);
        if near <= self.max_slice_size.saturating_add(1) {
            vec![(0, page_size)]
        } else {
            vec![slices, (near, page_size)]
        }
    }

    /// A slice from the free space already held, if any fits.
    pub(crate) fn try_reserve(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        let reuse = Reuse {
            size,
            effective: self.pages.effective(size),
            tier: 0,
        };
        if let Some(handle) = self.slices.step_reusing(reuse, &mut self.pages) {
            self.stats.served(size);
            return Some(handle);
        }
        if self.pages.placement_is_tight(size) {
            self.sweep(Sweep::Poll);
        }
        if let Some(handle) = self.place(size, Search::Quick) {
            return Some(handle);
        }
        self.sweep(Sweep::CatchUp);
        self.place(size, Search::Thorough)
    }

    /// Slices over every free range of the page `id`, held by the caller so nothing else
    /// lands there (see [`SlicedPages::fill`]). Not counted as reservations served.
    pub(crate) fn fill_page(&mut self, id: StorageId) -> Vec<ManagedMemoryHandle> {
        let placed = self.pages.fill(id);
        placed
            .into_iter()
            .map(|placed| self.slices.insert(placed, 0))
            .collect()
    }

    fn place(&mut self, size: u64, search: Search) -> Option<ManagedMemoryHandle> {
        let placed = self.pages.place(size, search)?;
        self.stats.served(size);
        Some(self.slices.insert(placed, 0))
    }

    /// Adds a page and carves the slice from it.
    pub(crate) fn grow<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<ManagedMemoryHandle, GrowError> {
        let count = self.pages.count();
        if let Some(max_pages) = self.max_pages
            && count >= max_pages
        {
            return Err(GrowError::Capacity {
                capacity: max_pages * self.pages.page_size(),
                bytes_in_use: self.slices.sums().in_use,
                bytes_reserved: self.pages.reserved(),
                largest_free_slice: self.pages.largest_free(),
            });
        }
        if count >= MAX_PAGES {
            return Err(GrowError::TooManyPages { limit: MAX_PAGES });
        }
        let page_size = self.next_page_size();
        self.pages
            .add_page_of(storage, page_size)
            .map_err(GrowError::Storage)?;
        // An empty page holds any accepted size.
        self.place(size, Search::Quick)
            .ok_or(GrowError::TooManyPages { limit: MAX_PAGES })
    }

    /// Empties the sparsest unpinned pages into the holes of the others, or into fresh
    /// pages where those give back more than they take (within the cap), moving at most
    /// `limits` (see [`evacuate`]).
    pub(crate) fn compact<S: CopyStorage>(
        &mut self,
        storage: &mut S,
        limits: MoveLimits,
        goal: Goal,
        pinned: Pinned<'_>,
    ) -> Vec<Relocated> {
        self.sweep(Sweep::All);
        let page_size = self.pages.page_size();
        let census = evacuate::census(&self.slices, pinned, |_, _| page_size);
        let takes_moves = |tier, page| census.takes_moves(tier, page);
        let mut plan = plan::plan(plan::Request {
            takes_moves: &takes_moves,
            candidates: census.candidates.iter().collect(),
            tiers: vec![(0, &self.pages)],
            fresh_page: (goal == Goal::Pack).then_some(page_size),
            limits,
            max_pages: goal.max_pages(),
        });
        let mut fresh = Vec::new();
        let mut free_pages = self.pages.free_pages().into_iter();
        for k in 0..plan.fresh_pages() {
            // A page already free serves first: it costs nothing more.
            if let Some(page) = free_pages.next() {
                fresh.push((0, page));
                continue;
            }
            let room = self.max_pages.is_none_or(|max| self.pages.count() < max)
                && self.pages.count() < MAX_PAGES;
            match room.then(|| self.pages.add_page(storage)) {
                Some(Ok(page)) => fresh.push((0, page)),
                refused => {
                    if let Some(Err(error)) = refused {
                        tracing::debug!(%error, "compaction: no fresh page; planning without it");
                    }
                    plan.without_fresh_from(k);
                    break;
                }
            }
        }
        let planned = evacuate::take_destinations(&mut [Some(&mut self.pages)], plan, &fresh);
        let pages = &mut self.pages;
        evacuate::commit(&mut self.slices, storage, planned, |_, block| {
            pages.free(block)
        })
    }

    /// Frees a block a moved slice left (its copy can no longer be overtaken).
    pub(crate) fn free_moved(&mut self, block: BlockId) {
        self.pages.free(block);
    }

    /// Whether gathering the free bytes of this pool's pages could make room for `size`
    /// bytes: they add up to it, a page could hold it, and there are two pages to move
    /// between.
    pub(crate) fn could_gather(&self, size: u64) -> bool {
        let effective = self.pages.effective(size);
        self.pages.count() >= 2
            && effective <= self.pages.page_size()
            && self.pages.free_bytes() >= effective
    }

    pub(crate) fn sweep(&mut self, sweep: Sweep) {
        let pages = &mut self.pages;
        self.slices.sweep(sweep, |slice| pages.release(slice));
    }

    pub(crate) fn slices(&self) -> &SliceTable {
        &self.slices
    }

    /// The pages it holds (for page maps).
    pub(crate) fn sliced_pages(&self) -> &SlicedPages {
        &self.pages
    }

    pub(crate) fn slices_mut(&mut self) -> &mut SliceTable {
        &mut self.slices
    }

    /// Gives every entirely free page back to the storage.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) {
        self.sweep(Sweep::All);
        self.pages.release_free_pages(storage);
    }

    /// Gives back the pages already known to hold no slice, without a sweep; returns
    /// whether any went back.
    pub(crate) fn release_empty_pages<S: ComputeStorage>(&mut self, storage: &mut S) -> bool {
        self.pages.release_free_pages(storage) > 0
    }

    pub(crate) fn largest_free(&self) -> u64 {
        self.pages.largest_free()
    }

    pub(crate) fn cap(&self) -> Option<u64> {
        self.max_pages.map(|pages| pages * self.pages.page_size())
    }

    pub(crate) fn report(&self) -> MemoryPoolReport {
        MemoryPoolReport {
            kind: MemoryPoolKind::Sliced {
                page_size: self.pages.page_size(),
                max_slice_size: self.max_slice_size,
            },
            usage: self.slices.sums().into_usage(self.pages.reserved()),
            pages: self.pages.count(),
            pages_peak: self.pages.peak(),
            pages_unmapped: 0,
            largest_alloc: self.stats.largest_alloc,
        }
    }
}

/// The smallest size that fills more than 80 % of a page of `page_size` bytes:
/// `5 * (page_size - size) < page_size` ⇔ `page_size - size <= (page_size - 1) / 5` (in
/// integers, with no overflow for any page size).
fn near_page_from(page_size: u64) -> u64 {
    page_size - page_size.saturating_sub(1) / 5
}

#[cfg(test)]
mod tests {
    use super::SlicedPool;

    /// The near-page rule, checked by brute force in u128 (no overflow possible).
    fn near_page(page_size: u64, size: u64) -> bool {
        size <= page_size && 5 * u128::from(page_size - size) < u128::from(page_size)
    }

    /// A page of `i64::MAX` bytes (TOML's largest integer) with 1 KiB slices: `accept`
    /// neither panics nor wraps, and answers the near-page rule exactly.
    #[test]
    fn accept_does_not_overflow_on_a_huge_page() {
        let pool = SlicedPool::new(0, i64::MAX as u64, 1024, None, 32);
        let page = pool.pages.page_size();
        assert_eq!(page, 1 << 63);
        assert!(pool.accept(0) && pool.accept(1024));
        assert!(!pool.accept(1025) && !pool.accept(2048));
        // The near-page threshold: page - (page - 1) / 5.
        let near = page - (page - 1) / 5;
        assert!(pool.accept(near) && pool.accept(page));
        assert!(!pool.accept(near - 1) && !pool.accept(page + 1) && !pool.accept(u64::MAX));
        assert_eq!(pool.accepted_ranges(), vec![(0, 1024), (near, page)]);
    }

    /// Where it never overflowed, the answer is unchanged; `accepted_ranges` is exactly
    /// what `accept` takes.
    #[test]
    fn accept_and_accepted_ranges_agree_with_the_near_page_rule() {
        for (page_size, max_slice) in [
            (1024u64, 256u64),
            (1000, 64),
            (4096, 4096),
            (1 << 20, 64 << 10),
        ] {
            let pool = SlicedPool::new(0, page_size, max_slice, None, 1);
            let ranges = pool.accepted_ranges();
            for size in (0..=page_size + 2).chain([u64::MAX]) {
                let expected = size <= max_slice || near_page(page_size, size);
                assert_eq!(
                    pool.accept(size),
                    expected,
                    "{page_size}/{max_slice}: {size}"
                );
                let in_ranges = ranges
                    .iter()
                    .any(|&(low, high)| (low..=high).contains(&size));
                assert_eq!(
                    in_ranges, expected,
                    "{page_size}/{max_slice}: {size} in {ranges:?}"
                );
            }
        }
    }

    /// A ramping pool's pages: the first of the size asked, every later one the page
    /// size; once every page is given back, the next first page is small again.
    #[test]
    fn a_ramping_pool_starts_with_a_small_page() {
        const KIB: u64 = 1 << 10;
        let mut storage = crate::storage::BytesStorage::default();
        let mut pool = SlicedPool::new(0, 512 * KIB, 64 * KIB, None, 256)
            .without_near_page()
            .ramping(128 * KIB);
        let mut handles = Vec::new();
        let mut sizes = Vec::new();
        for _ in 0..6 {
            let before = pool.pages.reserved();
            // A largest slice per reservation that fills whatever is left first.
            while let Some(handle) = pool.try_reserve(64 * KIB) {
                handles.push(handle);
            }
            handles.push(pool.grow(&mut storage, 64 * KIB).unwrap());
            sizes.push((pool.pages.reserved() - before) / KIB);
        }
        assert_eq!(sizes, [128, 512, 512, 512, 512, 512]);
        drop(handles);
        pool.release_free_pages(&mut storage);
        assert_eq!(pool.pages.reserved(), 0);
        let _again = pool.grow(&mut storage, 64).unwrap();
        assert_eq!(pool.pages.reserved(), 128 * KIB);
        // A pool that does not ramp makes full pages from the first.
        let mut plain = SlicedPool::new(0, 512 * KIB, 64 * KIB, None, 256);
        let _one = plain.grow(&mut storage, 64).unwrap();
        assert_eq!(plain.pages.reserved(), 512 * KIB);
    }
}
