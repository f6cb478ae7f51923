//! The page map at an earlier moment: a snapshot with the history after that moment undone.
//!
//! The ring keeps the newest events, so every event after a moment inside the kept history
//! is there to undo, newest first:
//!
//! 1. A `Reserve` after the moment: its slice (found by allocation id) is taken out.
//! 2. A `Free` after the moment: its slice is put back where it was when it was freed,
//!    with its requested bytes and label: the page and offset of the allocation's last
//!    `Move` before the free, else those the event names. Its padding is not recorded, so
//!    it is drawn as 0.
//! 3. A `PageMade` after the moment: the page (and what is on it) is taken out.
//! 4. A `PageReleased` after the moment: an empty page of that size is put back in the pool
//!    the event names (a pool added at the end of its memory when the snapshot lacks it).
//! 5. A `Move` (compaction) after the moment: the slice goes back to the page and offset it
//!    left, keeping its size, padding and label.
//!
//! Then every touched page's free ranges are listed again, the history is cut at the moment,
//! and ages are counted from it. Only slices whose reservations and frees are recorded move:
//! the staging memories' slices are the library's own and stay as they are, unless their
//! page goes. The report is the one taken with the snapshot: it describes the end.

use super::history::{EventKind, HistoryEvent};
use super::snapshot::{
    MAIN_MEMORY, MemorySnapshot, MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
};
use std::collections::BTreeMap;

/// Why a snapshot cannot be taken back to a moment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RewindError {
    /// The moment is after the snapshot was taken: nothing is known about it. Retrying with
    /// a time at most `taken_us` helps.
    #[error("the snapshot was taken at {taken_us} µs; {asked_us} µs is later")]
    AfterSnapshot {
        /// The moment asked for, in µs.
        asked_us: u64,
        /// When the snapshot was taken, in µs.
        taken_us: u64,
    },
    /// The moment is before the oldest event the ring kept, and older events were dropped,
    /// so what happened in between is unknown. Retrying with a time at least
    /// `first_kept_us`, or recording a larger history, helps.
    #[error(
        "{asked_us} µs is before the oldest event kept ({first_kept_us} µs; {dropped} older ones were dropped)"
    )]
    BeforeHistory {
        /// The moment asked for, in µs.
        asked_us: u64,
        /// The oldest event kept, in µs.
        first_kept_us: u64,
        /// How many older events the ring dropped.
        dropped: u64,
    },
}

fn memory_name(event: &HistoryEvent) -> &str {
    event.memory.as_deref().unwrap_or(MAIN_MEMORY)
}

impl MemorySnapshot {
    /// This snapshot as it was at `time_us` (µs since the client started), rebuilt by
    /// undoing the later history (see the module doc of `report::rewind`). `taken_us`
    /// becomes `time_us`; the report is kept as it was at the end.
    ///
    /// # Errors
    /// - [`RewindError::AfterSnapshot`]: `time_us` is after `taken_us`.
    /// - [`RewindError::BeforeHistory`]: `time_us` is before the oldest event kept and the
    ///   ring had dropped older ones.
    ///
    /// # Complexity
    /// O(e log p + s log s) for e events after the moment, p pages and s slices.
    pub fn at(&self, time_us: u64) -> Result<MemorySnapshot, RewindError> {
        if time_us > self.taken_us {
            return Err(RewindError::AfterSnapshot {
                asked_us: time_us,
                taken_us: self.taken_us,
            });
        }
        let mut events: Vec<&HistoryEvent> = self.history.iter().collect();
        events.sort_by_key(|event| event.time_us);
        if let Some(first) = events.first()
            && time_us < first.time_us
            && self.history_dropped > 0
        {
            return Err(RewindError::BeforeHistory {
                asked_us: time_us,
                first_kept_us: first.time_us,
                dropped: self.history_dropped,
            });
        }
        let freed_at = followed_frees(&events);
        let mut at = self.clone();
        let mut touched: Vec<(String, u64)> = Vec::new();
        for (index, event) in events
            .iter()
            .enumerate()
            .rev()
            .take_while(|(_, e)| e.time_us > time_us)
        {
            if event.kind == EventKind::Move {
                touched.extend(undo_move(&mut at, event));
            } else if let Some(page) = undo(&mut at, event, freed_at[index]) {
                touched.push(page);
            }
        }
        touched.sort();
        touched.dedup();
        for (memory, id) in touched {
            if let Some(page) = page_mut(&mut at, &memory, id) {
                relist_free_ranges(page);
            }
        }
        let reserved_at: BTreeMap<u64, u64> = events
            .iter()
            .filter(|e| e.kind == EventKind::Reserve && e.time_us <= time_us)
            .filter_map(|e| e.id.map(|id| (id, e.time_us)))
            .collect();
        let shift = self.taken_us - time_us;
        for slice in at
            .memories
            .iter_mut()
            .flat_map(|m| &mut m.pools)
            .flat_map(|p| &mut p.pages)
            .flat_map(|p| &mut p.slices)
            .filter(|s| s.live)
        {
            let reserved = slice.id.and_then(|id| reserved_at.get(&id));
            slice.age_us = match reserved {
                Some(&reserved_us) => Some(time_us - reserved_us),
                None => slice.age_us.map(|age| age.saturating_sub(shift)),
            };
        }
        at.history.retain(|event| event.time_us <= time_us);
        at.taken_us = time_us;
        Ok(at)
    }
}

/// Undoes a compaction's move: the slice goes back from `page`/`offset` to
/// `from_page`/`from_offset`, with its size, padding and label. Returns both pages.
fn undo_move(snapshot: &mut MemorySnapshot, event: &HistoryEvent) -> Vec<(String, u64)> {
    let memory = memory_name(event).to_string();
    let (Some(to), Some(from), Some(from_offset)) =
        (event.page, event.from_page, event.from_offset)
    else {
        return Vec::new();
    };
    let Some(page) = page_mut(snapshot, &memory, to) else {
        return Vec::new();
    };
    let Some(index) = page
        .slices
        .iter()
        .position(|slice| slice.live && slice.id.is_some() && slice.id == event.id)
    else {
        return Vec::new();
    };
    let mut slice = page.slices.remove(index);
    slice.offset = from_offset;
    let Some(back) = page_mut(snapshot, &memory, from) else {
        return vec![(memory, to)];
    };
    back.slices.push(slice);
    vec![(memory.clone(), to), (memory, from)]
}

/// For each event (in `events`' order), where a `Free` found its slice: the page and
/// offset the allocation's last `Move` before the free put it in, else `None` (the free's
/// own page and offset stand). A free recorded before the client followed moves names the
/// page the slice was reserved in, which a compaction may since have emptied and given
/// back; following the moves keeps such a slice on the page it really left.
fn followed_frees(events: &[&HistoryEvent]) -> Vec<Option<(u64, u64)>> {
    let mut moved_to: BTreeMap<(&str, u64), (u64, u64)> = BTreeMap::new();
    let mut freed_at = vec![None; events.len()];
    for (index, event) in events.iter().enumerate() {
        let Some(id) = event.id else { continue };
        let key = (memory_name(event), id);
        match event.kind {
            EventKind::Move => {
                if let (Some(page), Some(offset)) = (event.page, event.offset) {
                    moved_to.insert(key, (page, offset));
                }
            }
            // A new reservation of the id starts it afresh where it was reserved.
            EventKind::Reserve => {
                moved_to.remove(&key);
            }
            EventKind::Free => freed_at[index] = moved_to.remove(&key),
            _ => {}
        }
    }
    freed_at
}

/// Undoes one event on `snapshot`; returns the page whose slices changed, if any. A free
/// goes back at `freed_at` (page, offset) when given, else where the event names.
fn undo(
    snapshot: &mut MemorySnapshot,
    event: &HistoryEvent,
    freed_at: Option<(u64, u64)>,
) -> Option<(String, u64)> {
    let memory = memory_name(event).to_string();
    let id = match (event.kind, freed_at) {
        (EventKind::Free, Some((page, _))) => page,
        _ => event.page?,
    };
    match event.kind {
        EventKind::Reserve => {
            let page = page_mut(snapshot, &memory, id)?;
            let before = page.slices.len();
            page.slices
                .retain(|slice| !(slice.live && slice.id.is_some() && slice.id == event.id));
            (page.slices.len() != before).then_some((memory, id))
        }
        EventKind::Free => {
            let offset = match freed_at {
                Some((_, offset)) => offset,
                None => event.offset?,
            };
            let page = page_mut(snapshot, &memory, id)?;
            let mut slice = SliceSnapshot::live(offset, event.bytes, 0);
            slice.id = event.id;
            slice.label = event.label.clone();
            page.slices.push(slice);
            Some((memory, id))
        }
        EventKind::PageMade => {
            for pool in memory_mut(snapshot, &memory).pools.iter_mut() {
                pool.pages.retain(|page| page.id != id);
            }
            None
        }
        EventKind::PageReleased => {
            let pool_name = event.pool.clone().unwrap_or_else(|| "?".to_string());
            let target = memory_mut(snapshot, &memory);
            let index = target.pools.iter().position(|p| p.pool == pool_name);
            let pool = match index {
                Some(index) => &mut target.pools[index],
                None => {
                    let next = target.pools.iter().map(|p| p.index + 1).max().unwrap_or(0);
                    target.pools.push(PoolSnapshot {
                        pool: pool_name,
                        index: next,
                        pages: Vec::new(),
                    });
                    target.pools.last_mut()?
                }
            };
            pool.pages.push(PageSnapshot {
                id,
                size: event.bytes,
                slices: vec![SliceSnapshot::free(0, event.bytes)],
            });
            pool.pages.sort_by_key(|page| page.id);
            None
        }
        _ => None,
    }
}

fn memory_mut<'a>(snapshot: &'a mut MemorySnapshot, name: &str) -> &'a mut MemorySnapshotMemory {
    let index = match snapshot.memories.iter().position(|m| m.name == name) {
        Some(index) => index,
        None => {
            snapshot.memories.push(MemorySnapshotMemory {
                name: name.to_string(),
                pools: Vec::new(),
            });
            snapshot.memories.len() - 1
        }
    };
    &mut snapshot.memories[index]
}

fn page_mut<'a>(
    snapshot: &'a mut MemorySnapshot,
    memory: &str,
    id: u64,
) -> Option<&'a mut PageSnapshot> {
    snapshot
        .memories
        .iter_mut()
        .filter(|m| m.name == memory)
        .flat_map(|m| &mut m.pools)
        .flat_map(|p| &mut p.pages)
        .find(|page| page.id == id)
}

/// Replaces a page's free ranges by those its live slices leave, in offset order.
fn relist_free_ranges(page: &mut PageSnapshot) {
    page.slices.retain(|slice| slice.live);
    let free = super::page_map::free_ranges(page);
    page.slices.extend(
        free.into_iter()
            .map(|r| SliceSnapshot::free(r.start, r.end - r.start)),
    );
    page.slices.sort_by_key(|slice| (slice.offset, !slice.live));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_management::MemoryReport;

    fn main_event(time_us: u64, kind: EventKind, bytes: u64, page: u64) -> HistoryEvent {
        HistoryEvent {
            memory: Some(MAIN_MEMORY.to_string()),
            pool: Some("sliced 1 KiB".to_string()),
            page: Some(page),
            ..HistoryEvent::new(time_us, kind, bytes)
        }
    }

    fn live_ids(snapshot: &MemorySnapshot, page: u64) -> Vec<(u64, u64)> {
        snapshot.memories[0]
            .pools
            .iter()
            .flat_map(|pool| &pool.pages)
            .filter(|p| p.id == page)
            .flat_map(|p| &p.slices)
            .filter(|s| s.live)
            .map(|s| (s.id.unwrap_or(u64::MAX), s.offset))
            .collect()
    }

    /// Allocation 9 is reserved in page 2, moved by a compaction into page 1's hole at
    /// 512, page 2 is given back, then 9 is freed. The free names page 2, where 9 was
    /// reserved (what the client recorded before it followed moves): the rewind still
    /// puts 9 where it was when it was freed.
    #[test]
    fn a_slice_moved_then_freed_is_back_where_the_move_put_it() {
        let mut reserve = main_event(1_000, EventKind::Reserve, 256, 2);
        reserve.id = Some(9);
        reserve.offset = Some(0);
        let mut moved = main_event(2_000, EventKind::Move, 256, 1);
        moved.id = Some(9);
        moved.offset = Some(512);
        moved.from_page = Some(2);
        moved.from_offset = Some(0);
        let released = main_event(2_500, EventKind::PageReleased, 1024, 2);
        let mut free = main_event(3_000, EventKind::Free, 256, 2);
        free.id = Some(9);
        free.offset = Some(0);
        let snapshot = MemorySnapshot {
            taken_us: 4_000,
            memories: vec![MemorySnapshotMemory {
                name: MAIN_MEMORY.to_string(),
                pools: vec![PoolSnapshot {
                    pool: "sliced 1 KiB".to_string(),
                    index: 0,
                    pages: vec![PageSnapshot {
                        id: 1,
                        size: 1024,
                        slices: vec![SliceSnapshot {
                            id: Some(4),
                            ..SliceSnapshot::live(0, 512, 0)
                        }],
                    }],
                }],
            }],
            history: vec![reserve, moved, released, free],
            history_dropped: 0,
            started_unix_us: None,
            budget: None,
            report: MemoryReport { streams: vec![] },
        };

        // After the page went, before the free: 9 lies in page 1 at 512, page 2 is empty.
        let before_free = snapshot.at(2_700).unwrap();
        assert_eq!(live_ids(&before_free, 1), vec![(4, 0), (9, 512)]);
        assert_eq!(live_ids(&before_free, 2), vec![]);
        before_free.check().unwrap();
        // Between the move and the release: the same.
        let before_release = snapshot.at(2_200).unwrap();
        assert_eq!(live_ids(&before_release, 1), vec![(4, 0), (9, 512)]);
        assert_eq!(live_ids(&before_release, 2), vec![]);
        // Before the move: 9 is back in page 2 at 0.
        let before_move = snapshot.at(1_500).unwrap();
        assert_eq!(live_ids(&before_move, 1), vec![(4, 0)]);
        assert_eq!(live_ids(&before_move, 2), vec![(9, 0)]);
    }
}
