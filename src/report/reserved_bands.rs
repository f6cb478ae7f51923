//! Why reserved is larger than in use: every page followed through the history, so that
//! the bytes reserved at any moment split into what holds them.
//!
//! The pages are anchored at the end, as the timeline's levels are (see
//! [`Timeline`](super::Timeline)): a page listed in the snapshot and not made in the kept
//! history existed before the first event; a page released in the history existed until
//! then. Each page's live slice count is anchored the same way (the snapshot's live slices,
//! minus the reservations, plus the frees the history records on that page), so a page is
//! known to be empty, a page a cleanup can give back, at every event.

use super::history::{EventKind, HistoryEvent};
use super::levels::clamp;
use super::snapshot::{MAIN_MEMORY, MemorySnapshot};
use std::collections::BTreeMap;

/// The memory whose pages readbacks copy into.
pub const STAGING_MEMORY: &str = "staging";
/// The memory whose pages uploads are written through.
pub const UPLOAD_MEMORY: &str = "upload";

/// Bytes reserved at one moment, split by what holds them. The fields add up to the bytes
/// reserved then (every page of every memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservedBands {
    /// Requested bytes of live slices in the main memory (the timeline's in use).
    pub main_in_use: u64,
    /// Bytes of main pages that hold at least one live slice, but no live slice's requested
    /// bytes: padding and free ranges between and after slices.
    pub main_free_in_used_pages: u64,
    /// Bytes of main pages that hold no live slice: what a cleanup can give back.
    pub main_empty_pages: u64,
    /// Bytes of the readback staging pages ([`STAGING_MEMORY`]).
    pub staging: u64,
    /// Bytes of the upload staging pages ([`UPLOAD_MEMORY`]).
    pub upload: u64,
    /// Bytes of pages of any other memory.
    pub other_memories: u64,
}

impl ReservedBands {
    /// The bands from the bottom of a stack up, with their names (as a legend says them).
    pub fn stacked(&self) -> [(&'static str, u64); 6] {
        [
            ("main memory in use", self.main_in_use),
            (
                "main memory free inside used pages",
                self.main_free_in_used_pages,
            ),
            (
                "empty main pages (a cleanup gives them back)",
                self.main_empty_pages,
            ),
            ("readback staging", self.staging),
            ("upload staging", self.upload),
            ("other memories", self.other_memories),
        ]
    }

    /// All bands together: the bytes reserved (saturating).
    pub fn total(&self) -> u64 {
        self.stacked()
            .iter()
            .fold(0u64, |sum, (_, bytes)| sum.saturating_add(*bytes))
    }
}

/// One page followed through the history.
#[derive(Debug, Clone, Copy)]
struct Page {
    size: u64,
    /// Live slices on it (signed: a history that disagrees with the slices may dip below 0).
    live: i64,
}

/// Every page's size and live slice count at the current event, and the bytes of pages by
/// kind, kept up to date as events apply.
#[derive(Debug, Clone, Default)]
pub(super) struct PageLevels {
    /// Pages that exist now, by (memory, page id).
    pages: BTreeMap<(String, u64), Page>,
    /// Bytes of the pages counted in each slot (see [`Slot`]), signed while they change.
    sums: [i128; SLOTS],
}

/// Where a page's bytes count: main pages with live slices, empty main pages, staging,
/// upload, any other memory.
type Slot = usize;
const SLOTS: usize = 5;
const MAIN_USED: Slot = 0;
const MAIN_EMPTY: Slot = 1;
const STAGING: Slot = 2;
const UPLOAD: Slot = 3;
const OTHER: Slot = 4;

fn slot(memory: &str, page: &Page) -> Slot {
    match memory {
        MAIN_MEMORY if page.live > 0 => MAIN_USED,
        MAIN_MEMORY => MAIN_EMPTY,
        STAGING_MEMORY => STAGING,
        UPLOAD_MEMORY => UPLOAD,
        _ => OTHER,
    }
}

fn memory_of(event: &HistoryEvent) -> &str {
    event.memory.as_deref().unwrap_or(MAIN_MEMORY)
}

/// The change an event makes to the live slice count of its page: +1, −1 or 0.
fn count_delta(event: &HistoryEvent) -> i64 {
    match event.kind {
        EventKind::Reserve => 1,
        EventKind::Free => -1,
        _ => 0,
    }
}

impl PageLevels {
    /// The pages before the first of `events` (time-ordered), anchored at `snapshot`.
    ///
    /// # Complexity
    /// O((p + e) log p) for p pages and e events.
    pub(super) fn before(snapshot: &MemorySnapshot, events: &[&HistoryEvent]) -> Self {
        let mut levels = PageLevels::default();
        for memory in &snapshot.memories {
            for pool in &memory.pools {
                for page in &pool.pages {
                    let live = page.slices.iter().filter(|s| s.live).count();
                    let page_level = Page {
                        size: page.size,
                        live: i64::try_from(live).unwrap_or(i64::MAX),
                    };
                    levels.insert((memory.name.clone(), page.id), page_level);
                }
            }
        }
        // Undo the history, newest first.
        for event in events.iter().rev() {
            let Some(id) = event.page else { continue };
            let key = (memory_of(event).to_string(), id);
            match event.kind {
                EventKind::PageMade => levels.remove(&key),
                EventKind::PageReleased => levels.insert(
                    key,
                    Page {
                        size: event.bytes,
                        live: 0,
                    },
                ),
                _ => levels.count(&key, -count_delta(event)),
            }
        }
        levels
    }

    fn insert(&mut self, key: (String, u64), page: Page) {
        self.remove(&key);
        self.sums[slot(&key.0, &page)] += i128::from(page.size);
        self.pages.insert(key, page);
    }

    fn remove(&mut self, key: &(String, u64)) {
        if let Some(page) = self.pages.remove(key) {
            self.sums[slot(&key.0, &page)] -= i128::from(page.size);
        }
    }

    fn count(&mut self, key: &(String, u64), delta: i64) {
        if delta == 0 {
            return;
        }
        if let Some(page) = self.pages.get_mut(key) {
            let before = slot(&key.0, page);
            page.live = page.live.saturating_add(delta);
            let after = slot(&key.0, page);
            let size = i128::from(page.size);
            self.sums[before] -= size;
            self.sums[after] += size;
        }
    }

    /// Applies one event.
    ///
    /// # Complexity
    /// O(log p) for p pages.
    pub(super) fn apply(&mut self, event: &HistoryEvent) {
        let Some(id) = event.page else { return };
        let key = (memory_of(event).to_string(), id);
        match event.kind {
            EventKind::PageMade => self.insert(
                key,
                Page {
                    size: event.bytes,
                    live: 0,
                },
            ),
            EventKind::PageReleased => self.remove(&key),
            _ => self.count(&key, count_delta(event)),
        }
    }

    /// The bands now, given the main memory's bytes in use (the sum of the label levels).
    /// In use beyond the used pages (a history that disagrees with the slices) is capped,
    /// so the bands never add up to more than the pages.
    pub(super) fn bands(&self, main_in_use: u64) -> ReservedBands {
        let used = clamp(self.sums[MAIN_USED]);
        let main_in_use = main_in_use.min(used);
        ReservedBands {
            main_in_use,
            main_free_in_used_pages: used - main_in_use,
            main_empty_pages: clamp(self.sums[MAIN_EMPTY]),
            staging: clamp(self.sums[STAGING]),
            upload: clamp(self.sums[UPLOAD]),
            other_memories: clamp(self.sums[OTHER]),
        }
    }
}
