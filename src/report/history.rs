//! Memory history: what happened to the memory, event by event, in a bounded ring.
//!
//! A client that records history pushes one [`HistoryEvent`] per reservation, free, page
//! made or given back, staging page in use or idle, cleanup, install, spill, out-of-memory,
//! upload, readback, launch and compaction move
//! into a [`HistoryRing`] of at most N events. When the ring is full the oldest event is
//! dropped, so the memory it takes is bounded by N whatever the program does. A
//! [`MemorySnapshot`](super::MemorySnapshot) carries the ring's events, oldest first.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What a [`HistoryEvent`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// A slice was reserved: `bytes` requested, at `pool`/`page`/`offset`, allocation `id`.
    Reserve,
    /// The last clone of a handle was dropped: its `bytes` (requested) are no longer in use.
    Free,
    /// A page was made (one device allocation of `bytes`) for `pool` of `memory`.
    PageMade,
    /// A page of `pool` of `memory` was given back to the driver (`bytes` no longer
    /// reserved).
    PageReleased,
    /// A cleanup ran; `bytes` is what it released.
    Cleanup,
    /// A pool layout was installed; `bytes` is the reserved size it dropped, if any.
    Install,
    /// A reservation found the first pool that accepts its size capped and full, and went
    /// to a later one (`pool`); `id` and `label` are the reservation's.
    Spill,
    /// A reservation of `bytes` failed for lack of memory in `memory` (`pool`: the capped
    /// pool that was full, if that was why); `free_bytes` says what was still free.
    OutOfMemory,
    /// `bytes` were uploaded to the device.
    Upload,
    /// `bytes` were read back from the device.
    Readback,
    /// A kernel was launched (`label` names it).
    Launch,
    /// A compaction moved the live slice of allocation `id` (`bytes` requested) in `pool`
    /// from `from_page`/`from_offset` to `page`/`offset`; the label is the allocation's.
    Move,
    /// A staging page (`memory` "staging" or "upload", `pool`, `page`; `bytes` its size)
    /// holds a slice again, after it was made or idle.
    StagingInUse,
    /// A staging page holds no slice any more: idle, until it is used again or given back
    /// (`bytes` its size).
    StagingIdle,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 14] = [
        EventKind::Reserve,
        EventKind::Free,
        EventKind::PageMade,
        EventKind::PageReleased,
        EventKind::Cleanup,
        EventKind::Install,
        EventKind::Spill,
        EventKind::OutOfMemory,
        EventKind::Upload,
        EventKind::Readback,
        EventKind::Launch,
        EventKind::Move,
        EventKind::StagingInUse,
        EventKind::StagingIdle,
    ];

    /// A short lowercase name, for legends and logs ("reserve", "page made", ...).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Reserve => "reserve",
            EventKind::Free => "free",
            EventKind::PageMade => "page made",
            EventKind::PageReleased => "page released",
            EventKind::Cleanup => "cleanup",
            EventKind::Install => "install",
            EventKind::Spill => "spill",
            EventKind::OutOfMemory => "out of memory",
            EventKind::Upload => "upload",
            EventKind::Readback => "readback",
            EventKind::Launch => "launch",
            EventKind::Move => "move",
            EventKind::StagingInUse => "staging in use",
            EventKind::StagingIdle => "staging idle",
        }
    }
}

/// One thing that happened to the memory.
///
/// Fields that do not apply to a kind are `None` (and left out of the JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// When it happened, in µs since the client started.
    pub time_us: u64,
    /// What happened.
    pub kind: EventKind,
    /// The bytes it concerns: requested bytes for a reservation or a free, the page size for
    /// a page made or released, the bytes released by a cleanup, the bytes moved by an upload
    /// or a readback; 0 where nothing is counted (a launch).
    pub bytes: u64,
    /// The memory (as [`MemorySnapshotMemory::name`](super::MemorySnapshotMemory::name):
    /// `"main"`, `"staging"`, `"upload"`) of a reservation, page or spill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// The pool, by name (as [`PoolSnapshot::pool`](super::PoolSnapshot::pool)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The page id (as [`PageSnapshot::id`](super::PageSnapshot::id)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u64>,
    /// The slice's offset in its page, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The allocation id (as [`SliceSnapshot::id`](super::SliceSnapshot::id)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The label in force when the allocation was reserved ("outer/inner"), or the kernel
    /// name of a launch. A free carries the label of the reservation it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The caller's backtrace, when backtraces are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
    /// The page a moved slice left ([`EventKind::Move`]; `page` is where it went).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_page: Option<u64>,
    /// The offset in bytes a moved slice left in `from_page`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_offset: Option<u64>,
    /// For an [`EventKind::OutOfMemory`]: the bytes still free to the refused memory, in
    /// bytes. When the budget refused, what the budget had left; otherwise the free bytes
    /// inside the pages the memory held (the device's own free memory is not known
    /// through wgpu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// For an [`EventKind::OutOfMemory`] the budget refused: the budget in force, in
    /// bytes. With `held_bytes`, `retiring_bytes` and `free_bytes` it adds up:
    /// `budget = held_bytes + retiring_bytes + free_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// For an [`EventKind::OutOfMemory`] the budget refused: bytes of the pages every
    /// memory held then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_bytes: Option<u64>,
    /// For an [`EventKind::OutOfMemory`] the budget refused: bytes of pages given back
    /// that the device still used then (charged until it is done with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retiring_bytes: Option<u64>,
}

impl HistoryEvent {
    /// An event of `kind` at `time_us` concerning `bytes`, every optional field `None`.
    pub fn new(time_us: u64, kind: EventKind, bytes: u64) -> Self {
        HistoryEvent {
            time_us,
            kind,
            bytes,
            memory: None,
            pool: None,
            page: None,
            offset: None,
            id: None,
            label: None,
            backtrace: None,
            from_page: None,
            from_offset: None,
            free_bytes: None,
            budget: None,
            held_bytes: None,
            retiring_bytes: None,
        }
    }
}

/// A ring of at most `capacity` [`HistoryEvent`]s that keeps the newest.
///
/// Pushing into a full ring drops the oldest event and counts it in
/// [`dropped`](Self::dropped). A capacity of 0 records nothing. Memory is bounded by the
/// capacity (plus the strings the events own).
#[derive(Debug, Clone, Default)]
pub struct HistoryRing {
    events: VecDeque<HistoryEvent>,
    capacity: usize,
    dropped: u64,
}

impl HistoryRing {
    /// An empty ring that holds at most `capacity` events.
    ///
    /// # Panics
    /// Never: the storage grows as events arrive, up to `capacity`.
    pub fn new(capacity: usize) -> Self {
        HistoryRing {
            events: VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    /// The most events the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Changes the capacity; when it shrinks below [`len`](Self::len), the oldest events are
    /// dropped (and counted in [`dropped`](Self::dropped)).
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.trim();
    }

    /// Adds `event` as the newest, dropping the oldest when the ring is full.
    ///
    /// # Complexity
    /// O(1) amortized.
    pub fn push(&mut self, event: HistoryEvent) {
        if self.capacity == 0 {
            self.dropped += 1;
            return;
        }
        self.events.push_back(event);
        self.trim();
    }

    fn trim(&mut self) {
        while self.events.len() > self.capacity {
            self.events.pop_front();
            self.dropped += 1;
        }
    }

    /// The number of events held, at most [`capacity`](Self::capacity).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the ring holds no event.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// How many events were dropped (or never kept, at capacity 0) since the ring was made.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The events held, oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &HistoryEvent> + '_ {
        self.events.iter()
    }

    /// A copy of the events held, oldest first (what a snapshot stores).
    pub fn to_vec(&self) -> Vec<HistoryEvent> {
        self.events.iter().cloned().collect()
    }

    /// Drops every event held (not counted in [`dropped`](Self::dropped)).
    pub fn clear(&mut self) {
        self.events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(time_us: u64) -> HistoryEvent {
        HistoryEvent::new(time_us, EventKind::Reserve, time_us * 4)
    }

    #[test]
    fn the_ring_never_exceeds_its_capacity_and_keeps_the_newest() {
        let mut ring = HistoryRing::new(5);
        for time in 0..23 {
            ring.push(event(time));
            assert!(ring.len() <= 5, "{} events held", ring.len());
        }
        let times: Vec<u64> = ring.iter().map(|e| e.time_us).collect();
        assert_eq!(times, vec![18, 19, 20, 21, 22]);
        assert_eq!(ring.dropped(), 18);
    }

    #[test]
    fn shrinking_drops_the_oldest() {
        let mut ring = HistoryRing::new(4);
        for time in 0..4 {
            ring.push(event(time));
        }
        ring.set_capacity(2);
        let times: Vec<u64> = ring.to_vec().iter().map(|e| e.time_us).collect();
        assert_eq!(times, vec![2, 3]);
        assert_eq!(ring.dropped(), 2);
    }

    #[test]
    fn capacity_zero_records_nothing() {
        let mut ring = HistoryRing::new(0);
        ring.push(event(1));
        assert!(ring.is_empty());
        assert_eq!(ring.dropped(), 1);
    }

    #[test]
    fn optional_fields_are_left_out_of_the_json() {
        let json = serde_json::to_string(&HistoryEvent::new(7, EventKind::Launch, 0)).unwrap();
        assert_eq!(json, r#"{"time_us":7,"kind":"Launch","bytes":0}"#);
        let back: HistoryEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, HistoryEvent::new(7, EventKind::Launch, 0));
    }
}
