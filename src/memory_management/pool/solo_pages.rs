//! Pages that each hold one allocation, and the free ones among them.
//!
//! The bookkeeping behind the whole-page pools (exclusive pages, direct, persistent,
//! dedicated). Which free page a reservation may take and when free pages go back are
//! the pool's rules; this only keeps the pages, indexes the free ones by size and gives
//! pages back.

use crate::storage::{ComputeStorage, StorageHandle};
use std::collections::BTreeSet;

/// One page and when it last became free (in reservations, the pools' clock).
#[derive(Debug)]
pub(crate) struct SoloPage {
    pub(crate) storage: StorageHandle,
    pub(crate) freed_at: u64,
}

/// One-allocation pages; the free ones are indexed by size.
#[derive(Debug, Default)]
pub(crate) struct SoloPages {
    pages: Vec<Option<SoloPage>>,
    vacant: Vec<u32>,
    /// Free pages as (bytes, index): ordered so the best fit is one range query.
    free: BTreeSet<(u64, u32)>,
    free_bytes: u64,
    reserved: u64,
    count: u64,
}

impl SoloPages {
    /// Takes the smallest free page of `smallest..=largest` bytes, if there is one, and
    /// returns its index.
    pub(crate) fn take_free(&mut self, smallest: u64, largest: u64) -> Option<u32> {
        let &(bytes, index) = self
            .free
            .range((smallest, 0)..=(largest, u32::MAX))
            .next()?;
        self.free.remove(&(bytes, index));
        self.free_bytes -= bytes;
        Some(index)
    }

    /// The storage behind page `index`.
    pub(crate) fn storage(&self, index: u32) -> Option<&StorageHandle> {
        self.pages
            .get(index as usize)?
            .as_ref()
            .map(|page| &page.storage)
    }

    /// Adds `page`, in use, and returns its index.
    pub(crate) fn add(&mut self, page: StorageHandle, now: u64) -> u32 {
        self.reserved += page.size();
        let index = match self.vacant.pop() {
            Some(index) => index,
            None => {
                self.pages.push(None);
                (self.pages.len() - 1) as u32
            }
        };
        self.pages[index as usize] = Some(SoloPage {
            storage: page,
            freed_at: now,
        });
        self.count += 1;
        index
    }

    /// Page `index` no longer holds its allocation.
    pub(crate) fn mark_free(&mut self, index: u32, now: u64) {
        if let Some(page) = self.pages.get_mut(index as usize).and_then(Option::as_mut) {
            page.freed_at = now;
            let bytes = page.storage.size();
            if self.free.insert((bytes, index)) {
                self.free_bytes += bytes;
            }
        }
    }

    /// Gives back the free pages `rule` selects; returns each one's size in bytes and
    /// when it became free.
    pub(crate) fn release_where<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        mut rule: impl FnMut(&SoloPage) -> bool,
    ) -> Vec<(u64, u64)> {
        let candidates: Vec<(u64, u32)> = self.free.iter().copied().collect();
        let mut released = Vec::new();
        for (bytes, index) in candidates {
            if let Some(page) = self.pages[index as usize].as_ref()
                && rule(page)
            {
                released.push((bytes, page.freed_at));
                self.release(storage, bytes, index);
            }
        }
        released
    }

    /// Gives back free pages, longest idle first, until `enough` holds; returns each
    /// one's size in bytes and when it became free.
    pub(crate) fn release_until<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        enough: impl Fn(&Self) -> bool,
    ) -> Vec<(u64, u64)> {
        let mut candidates: Vec<(u64, u64, u32)> = self
            .free
            .iter()
            .filter_map(|&(bytes, index)| {
                let page = self.pages[index as usize].as_ref()?;
                Some((page.freed_at, bytes, index))
            })
            .collect();
        candidates.sort_unstable();
        let mut released = Vec::new();
        for (freed_at, bytes, index) in candidates {
            if enough(self) {
                break;
            }
            self.release(storage, bytes, index);
            released.push((bytes, freed_at));
        }
        released
    }

    fn release<S: ComputeStorage>(&mut self, storage: &mut S, bytes: u64, index: u32) {
        if self.free.remove(&(bytes, index)) {
            self.free_bytes -= bytes;
        }
        if let Some(page) = self.pages[index as usize].take() {
            storage.dealloc(page.storage.id);
            self.reserved -= bytes;
            self.count -= 1;
            self.vacant.push(index);
        }
    }

    /// Bytes of all pages held.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Bytes of the free pages.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Pages held now.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The largest free page, in bytes.
    pub(crate) fn largest_free(&self) -> u64 {
        self.free.iter().next_back().map_or(0, |&(bytes, _)| bytes)
    }

    /// The pages held, free or not, in index order (for page maps).
    pub(crate) fn held_pages(&self) -> impl Iterator<Item = &StorageHandle> + '_ {
        self.pages.iter().flatten().map(|page| &page.storage)
    }
}
