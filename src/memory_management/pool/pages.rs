//! Pages and the free space inside them.

use super::align_up;
use crate::memory_management::placement::{BlockId, Tlsf};
use crate::storage::{ComputeStorage, StorageHandle, StorageId, StorageUtilization};
use cubecl_runtime::server::IoError;

/// How hard a placement looks for a free block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Search {
    /// O(1): the first blocks of the request's own bin, then the first larger bin. It
    /// can pass over a block that fits (one of the few bytes larger than the request
    /// further down its bin).
    Quick,
    /// Every block that could fit: before a pool grows or reports itself full, which it
    /// must not do while a fitting block is free.
    Thorough,
}

/// Most pages one set may hold: a handle's location names its page in a `u16`.
pub(crate) const MAX_PAGES: u64 = u16::MAX as u64;

/// Free space is scarce below `1 / SCARCE_FREE` of the pages. Measured on the allocator
/// bench's random trace shape (64 live, 64 B..1 MiB) over twelve seeds, mean efficiency:
/// 0.817 at 2, 0.806 at 3, 0.801 at 4, 0.766 at 8 (0.785 with no poll at all); 3 is
/// also the best or level at 200 live and with sizes up to 4 MiB. Polling at 2 cost that
/// trace 38 % more time per operation than at 3, polling at 4 saved 18 %.
const SCARCE_FREE: u64 = 3;

/// Where a slice was placed.
#[derive(Debug)]
pub(crate) struct Placement {
    pub(crate) storage: StorageHandle,
    pub(crate) padding: u64,
    pub(crate) page: u32,
    pub(crate) block: BlockId,
}

/// Pages, their free space indexed by a [`Tlsf`] so placement and free are O(1) whatever
/// the number of slices. Pages are [`page_size`](Self::page_size) bytes unless added
/// with a size of their own ([`add_page_of`](Self::add_page_of)); placement looks at the
/// free space of every page whatever its size.
#[derive(Debug)]
pub(crate) struct SlicedPages {
    page_size: u64,
    granule: u64,
    pages: Vec<Option<StorageHandle>>,
    vacant: Vec<u32>,
    count: u64,
    peak: u64,
    /// Bytes of every page held.
    reserved: u64,
    placement: Tlsf,
}

impl SlicedPages {
    pub(crate) fn new(page_size: u64, granule: u64) -> Self {
        Self {
            page_size,
            granule,
            pages: Vec::new(),
            vacant: Vec::new(),
            count: 0,
            peak: 0,
            reserved: 0,
            placement: Tlsf::new(granule),
        }
    }

    /// The size of the pages [`add_page`](Self::add_page) adds, in bytes.
    pub(crate) fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Sets the size of the pages [`add_page`](Self::add_page) adds from now on, in
    /// bytes; pages held keep theirs.
    pub(crate) fn set_page_size(&mut self, page_size: u64) {
        self.page_size = page_size;
    }

    /// The size of held page `page`, in bytes (0 for a page not held).
    pub(crate) fn size_of(&self, page: u32) -> u64 {
        self.pages
            .get(page as usize)
            .and_then(Option::as_ref)
            .map_or(0, StorageHandle::size)
    }

    /// The largest page held, in bytes (0 with none).
    ///
    /// # Complexity
    /// O(pages held).
    pub(crate) fn largest_page(&self) -> u64 {
        self.held_pages()
            .map(StorageHandle::size)
            .max()
            .unwrap_or(0)
    }

    /// Pages held now.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The most pages held at once.
    pub(crate) fn peak(&self) -> u64 {
        self.peak
    }

    /// The aligned bytes a reservation of `size` occupies (a zero-size one takes one
    /// alignment unit, so it binds as a real range).
    pub(crate) fn effective(&self, size: u64) -> u64 {
        align_up(size.max(1), self.granule)
    }

    /// A slice of `size` bytes from the free space held, if a block fits (any fitting
    /// block with [`Search::Thorough`]).
    pub(crate) fn place(&mut self, size: u64, search: Search) -> Option<Placement> {
        let effective = self.effective(size);
        let block = match search {
            Search::Quick => self.placement.allocate(effective),
            Search::Thorough => self.placement.allocate_thorough(effective),
        }?;
        let Some(page) = self.pages[block.region as usize].as_ref() else {
            unreachable!("the placement index only holds regions of held pages");
        };
        Some(Placement {
            storage: StorageHandle::new(
                page.id,
                StorageUtilization {
                    offset: block.offset,
                    size,
                },
            ),
            padding: effective - size,
            page: block.region,
            block: block.id,
        })
    }

    /// Takes exactly the ranges `ranges` of page `page` (`(offset, requested size)`,
    /// sorted by offset, each inside one free block once aligned): a compaction's
    /// destinations, chosen in a planning index built from
    /// [`free_ranges`](Self::free_ranges). `None` for a range that is not free (the
    /// plan was made on other free space: a bug) or a page not held.
    ///
    /// # Complexity
    /// O(blocks in the page + ranges).
    pub(crate) fn claim(&mut self, page: u32, ranges: &[(u64, u64)]) -> Vec<Option<Placement>> {
        let Some(held) = self.pages.get(page as usize).and_then(Option::as_ref) else {
            return ranges.iter().map(|_| None).collect();
        };
        let id = held.id;
        let aligned: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(offset, size)| (offset, self.effective(size)))
            .collect();
        let blocks = self.placement.claim(page, &aligned);
        ranges
            .iter()
            .zip(blocks)
            .map(|(&(offset, size), block)| {
                Some(Placement {
                    storage: StorageHandle::new(id, StorageUtilization { offset, size }),
                    padding: self.effective(size) - size,
                    page,
                    block: block?,
                })
            })
            .collect()
    }

    /// Takes every free range of the page whose storage id is `id`, so no placement lands
    /// there until they are freed (a page the application destroyed). Empty when no page
    /// here has that id or the page has no free room.
    ///
    /// # Complexity
    /// O(pages held + blocks in the page).
    pub(crate) fn fill(&mut self, id: StorageId) -> Vec<Placement> {
        let page = self
            .pages
            .iter()
            .position(|held| held.as_ref().is_some_and(|held| held.id == id));
        let Some(page) = page else {
            return Vec::new();
        };
        let ranges = self.free_ranges(page as u32);
        self.claim(page as u32, &ranges)
            .into_iter()
            .flatten()
            .collect()
    }

    /// The free ranges `(offset, size)` of page `page`, in bytes, sorted by offset.
    ///
    /// # Complexity
    /// O(blocks in the page).
    pub(crate) fn free_ranges(&self, page: u32) -> Vec<(u64, u64)> {
        self.placement.free_ranges(page)
    }

    /// The indices of the pages held that hold no slice, ascending.
    ///
    /// # Complexity
    /// O(pages held).
    pub(crate) fn free_pages(&self) -> Vec<u32> {
        self.held_indices()
            .filter(|&page| self.placement.is_region_free(page))
            .collect()
    }

    /// The indices of the pages held, ascending.
    pub(crate) fn held_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages
            .iter()
            .enumerate()
            .filter(|(_, page)| page.is_some())
            .map(|(index, _)| index as u32)
    }

    /// The alignment of every slice, in bytes.
    pub(crate) fn granule(&self) -> u64 {
        self.granule
    }

    /// Free bytes of every page, in bytes (the holes a compaction could gather).
    pub(crate) fn free_bytes(&self) -> u64 {
        self.placement.free_bytes()
    }

    /// Whether placing `size` bytes now should wait for a [`Sweep::Poll`]: free space is
    /// scarce (less than [`SCARCE_FREE`] of the pages is known to be free) and no free
    /// block fits the aligned size closely (a block of the request's own size class, at
    /// most 1/32 larger: a placement there is as tight as any a poll could enable). While
    /// free space is ample a placement that misses a dropped-but-unswept block still
    /// finds room and the pool does not grow; when it is scarce, placing around such a
    /// block is what makes a pool grow or fragment. (Accepting a close fit rather than
    /// only an exact one polled less and placed no worse: on the allocator bench,
    /// efficiency rose on `large_live` from 0.649 to 0.680 and on `leak_mix` from 0.662
    /// to 0.695, and stayed the same on every other trace and seed.)
    ///
    /// [`Sweep::Poll`]: super::slices::Sweep::Poll
    pub(crate) fn placement_is_tight(&mut self, size: u64) -> bool {
        let effective = self.effective(size);
        self.placement.free_bytes() < self.reserved() / SCARCE_FREE
            && !self.placement.has_close_fit(effective)
    }

    /// Adds one empty page and returns its index.
    ///
    /// # Errors
    /// The storage's error when it refuses the page.
    pub(crate) fn add_page<S: ComputeStorage>(&mut self, storage: &mut S) -> Result<u32, IoError> {
        self.add_page_of(storage, self.page_size)
    }

    /// Adds one empty page of `size` bytes and returns its index.
    ///
    /// # Errors
    /// The storage's error when it refuses the page.
    pub(crate) fn add_page_of<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<u32, IoError> {
        let page = storage.alloc(size)?;
        let index = match self.vacant.pop() {
            Some(index) => index,
            None => {
                self.pages.push(None);
                (self.pages.len() - 1) as u32
            }
        };
        self.pages[index as usize] = Some(page);
        self.count += 1;
        self.reserved += size;
        self.peak = self.peak.max(self.count);
        self.placement.add_region(index, size);
        Ok(index)
    }

    /// Returns a slice's block to the free space, merging it with free neighbours.
    pub(crate) fn free(&mut self, block: BlockId) {
        self.placement.free(block);
    }

    /// Whether `block` may be handed out again where it is to a request of its size:
    /// its hole would start at its offset (see [`Tlsf::reissues_in_place`]).
    pub(crate) fn reissues_in_place(&self, block: BlockId) -> bool {
        self.placement.reissues_in_place(block)
    }

    /// Gives every entirely free page back to the storage; returns how many.
    pub(crate) fn release_free_pages<S: ComputeStorage>(&mut self, storage: &mut S) -> u64 {
        let before = self.count;
        for index in 0..self.pages.len() {
            if self.pages[index].is_some() && self.placement.remove_region(index as u32) {
                if let Some(page) = self.pages[index].take() {
                    self.reserved -= page.size();
                    storage.dealloc(page.id);
                }
                self.vacant.push(index as u32);
                self.count -= 1;
            }
        }
        before - self.count
    }

    /// The largest free block of any page, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.placement.largest_free()
    }

    /// Bytes of all pages held.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// The pages held, in index order (for page maps).
    pub(crate) fn held_pages(&self) -> impl Iterator<Item = &StorageHandle> + '_ {
        self.pages.iter().flatten()
    }
}
