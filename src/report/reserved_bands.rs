//! Why reserved is larger than in use: every page followed through the history, so that
//! the bytes reserved at any moment split into what holds them.
//!
//! The pages are anchored at the end, as the timeline's levels are (see
//! [`Timeline`](super::Timeline)): a page listed in the snapshot and not made in the kept
//! history existed before the first event; a page released in the history existed until
//! then. Each page's live slice count is anchored the same way (the snapshot's live slices,
//! minus the reservations, plus the frees the history records on that page), so a page is
//! known to be empty, a page a cleanup can give back, at every event. A staging page has
//! no slice events (its slices are the library's own): it is in use or idle as the
//! snapshot finds it, changed back through its `StagingInUse` / `StagingIdle` events, and
//! in use from when it was made (a staging page is only made to serve a reservation).
//! (Snapshots written before those events were recorded show each staging page all along
//! as the snapshot found it.)

use super::history::{EventKind, HistoryEvent};
use super::levels::clamp;
use super::snapshot::{MAIN_MEMORY, MemorySnapshot};
use std::collections::{BTreeMap, BTreeSet};

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
    /// Bytes of the readback staging pages ([`STAGING_MEMORY`]) that hold a slice.
    pub staging: u64,
    /// Bytes of the readback staging pages that hold none: idle.
    pub staging_idle: u64,
    /// Bytes of the upload staging pages ([`UPLOAD_MEMORY`]) that hold a slice.
    pub upload: u64,
    /// Bytes of the upload staging pages that hold none: idle.
    pub upload_idle: u64,
    /// Bytes of pages of any other memory.
    pub other_memories: u64,
}

impl ReservedBands {
    /// The bands from the bottom of a stack up, with their names (as a legend says them).
    pub fn stacked(&self) -> [(&'static str, u64); 8] {
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
            ("readback staging in use", self.staging),
            ("idle readback staging", self.staging_idle),
            ("upload staging in use", self.upload),
            ("idle upload staging", self.upload_idle),
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
    /// Its pool, as an index into [`PageLevels::pool_names`].
    pool: usize,
}

/// Every page's size and live slice count at the current event, and the bytes of pages by
/// kind, kept up to date as events apply.
#[derive(Debug, Clone, Default)]
pub(super) struct PageLevels {
    /// Pages that exist now, by (memory, page id).
    pages: BTreeMap<(String, u64), Page>,
    /// Bytes of the pages counted in each slot (see [`Slot`]), signed while they change.
    sums: [i128; SLOTS],
    /// The pool names met so far (from the snapshot's pools and the events' `pool`), in
    /// the order met: one per pool of the snapshot's memories, so bounded by them.
    pool_names: Vec<String>,
    /// Bytes of each pool's pages in each slot, by (slot, pool index).
    pool_sums: BTreeMap<(Slot, usize), i128>,
    /// Once [`watch`](Self::watch) was called: the pools that held bytes in each slot
    /// since (at most one entry per pool and slot).
    seen: Option<[BTreeSet<usize>; SLOTS]>,
}

/// Where a page's bytes count: main pages with live slices, empty main pages, staging and
/// upload pages in use and idle, any other memory.
type Slot = usize;
const SLOTS: usize = 7;
const MAIN_USED: Slot = 0;
const MAIN_EMPTY: Slot = 1;
const STAGING: Slot = 2;
const STAGING_IDLE: Slot = 3;
const UPLOAD: Slot = 4;
const UPLOAD_IDLE: Slot = 5;
const OTHER: Slot = 6;

fn slot(memory: &str, page: &Page) -> Slot {
    let used = page.live > 0;
    match memory {
        MAIN_MEMORY if used => MAIN_USED,
        MAIN_MEMORY => MAIN_EMPTY,
        STAGING_MEMORY if used => STAGING,
        STAGING_MEMORY => STAGING_IDLE,
        UPLOAD_MEMORY if used => UPLOAD,
        UPLOAD_MEMORY => UPLOAD_IDLE,
        _ => OTHER,
    }
}

/// Whether `memory` is neither the main memory nor a staging memory.
fn is_other(memory: &str) -> bool {
    !matches!(memory, MAIN_MEMORY | STAGING_MEMORY | UPLOAD_MEMORY)
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
                let pool_index = levels.pool_index(Some(&pool.pool));
                for page in &pool.pages {
                    let live = page.slices.iter().filter(|s| s.live).count();
                    let page_level = Page {
                        size: page.size,
                        live: i64::try_from(live).unwrap_or(i64::MAX),
                        pool: pool_index,
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
                EventKind::PageReleased => {
                    let pool = levels.pool_index(event.pool.as_deref());
                    levels.insert(
                        key,
                        Page {
                            size: event.bytes,
                            live: 0,
                            pool,
                        },
                    )
                }
                // Before a staging page went idle it was in use, and before it was in use
                // it was idle.
                EventKind::StagingIdle => levels.set_in_use(&key, true),
                EventKind::StagingInUse => levels.set_in_use(&key, false),
                _ => levels.count(&key, -count_delta(event)),
            }
        }
        levels
    }

    /// The index of the pool named `name` (an unnamed pool is named ""), added when new.
    ///
    /// # Complexity
    /// O(pools met).
    fn pool_index(&mut self, name: Option<&str>) -> usize {
        let name = name.unwrap_or("");
        match self.pool_names.iter().position(|known| known == name) {
            Some(index) => index,
            None => {
                self.pool_names.push(name.to_string());
                self.pool_names.len() - 1
            }
        }
    }

    /// Adds `bytes` (signed) of `pool`'s pages to `slot`, and, while watching, notes the
    /// pool when it holds bytes there.
    fn add(&mut self, slot: Slot, pool: usize, bytes: i128) {
        self.sums[slot] += bytes;
        let sum = self.pool_sums.entry((slot, pool)).or_insert(0);
        *sum += bytes;
        if *sum > 0
            && let Some(seen) = &mut self.seen
        {
            seen[slot].insert(pool);
        }
    }

    fn insert(&mut self, key: (String, u64), page: Page) {
        self.remove(&key);
        self.add(slot(&key.0, &page), page.pool, i128::from(page.size));
        self.pages.insert(key, page);
    }

    fn remove(&mut self, key: &(String, u64)) {
        if let Some(page) = self.pages.remove(key) {
            self.add(slot(&key.0, &page), page.pool, -i128::from(page.size));
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
            let (size, pool) = (i128::from(page.size), page.pool);
            self.add(before, pool, -size);
            self.add(after, pool, size);
        }
    }

    /// Starts noting which pools hold bytes in each slot, from the pages held now.
    pub(super) fn watch(&mut self) {
        let mut seen: [BTreeSet<usize>; SLOTS] = Default::default();
        for (&(slot, pool), &bytes) in &self.pool_sums {
            if bytes > 0 {
                seen[slot].insert(pool);
            }
        }
        self.seen = Some(seen);
    }

    /// The names of the pools that held pages of each band of
    /// [`ReservedBands::stacked`] since [`watch`](Self::watch), sorted; the in-use band
    /// and the free bytes inside used pages both name the pools of the used main pages.
    pub(super) fn band_pools(&self) -> [Vec<String>; 8] {
        let names = |slot: Slot| -> Vec<String> {
            let mut names: Vec<String> = self
                .seen
                .as_ref()
                .map(|seen| {
                    seen[slot]
                        .iter()
                        .map(|&pool| self.pool_names[pool].clone())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.dedup();
            names
        };
        [
            names(MAIN_USED),
            names(MAIN_USED),
            names(MAIN_EMPTY),
            names(STAGING),
            names(STAGING_IDLE),
            names(UPLOAD),
            names(UPLOAD_IDLE),
            names(OTHER),
        ]
    }

    /// Marks a page as holding a slice (`in_use`, counted as one when it counted none) or
    /// none.
    fn set_in_use(&mut self, key: &(String, u64), in_use: bool) {
        let Some(live) = self.pages.get(key).map(|page| page.live) else {
            return;
        };
        let delta = match (in_use, live > 0) {
            (true, false) => 1 - live,
            (false, true) => -live,
            _ => 0,
        };
        self.count(key, delta);
    }

    /// Applies one event.
    ///
    /// # Complexity
    /// O(log p) for p pages.
    pub(super) fn apply(&mut self, event: &HistoryEvent) {
        let Some(id) = event.page else { return };
        let key = (memory_of(event).to_string(), id);
        match event.kind {
            // A staging page is only made to serve a reservation, which no slice event
            // records: it starts in use. A main page's reservation follows as an event.
            EventKind::PageMade => {
                let live = i64::from(key.0 != MAIN_MEMORY && !is_other(&key.0));
                let pool = self.pool_index(event.pool.as_deref());
                self.insert(
                    key,
                    Page {
                        size: event.bytes,
                        live,
                        pool,
                    },
                )
            }
            EventKind::PageReleased => self.remove(&key),
            EventKind::StagingIdle => self.set_in_use(&key, false),
            EventKind::StagingInUse => self.set_in_use(&key, true),
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
            staging_idle: clamp(self.sums[STAGING_IDLE]),
            upload: clamp(self.sums[UPLOAD]),
            upload_idle: clamp(self.sums[UPLOAD_IDLE]),
            other_memories: clamp(self.sums[OTHER]),
        }
    }
}
