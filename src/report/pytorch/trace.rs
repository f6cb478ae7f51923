//! The history as PyTorch trace entries, oldest first (see the parent module's table).
//!
//! An allocation's address follows it: an `alloc` at the place its reservation names,
//! then, at each compaction move, a free there and an `alloc` where it went, and its free
//! where it lies then (a free recorded before the client followed moves names the page
//! it was reserved in; the moves recorded before it say better).
//!
//! Entries are built with each memory's address slot as their stream; the parent
//! renumbers them.

use super::{
    Addresses, DEFAULT_POOL_ID, PyTorchFrame, PyTorchSegment, PyTorchTraceEntry, frames_of, named,
};
use crate::memory_management::format_bytes;
use crate::report::history::{EventKind, HistoryEvent};
use crate::report::snapshot::{MAIN_MEMORY, MemorySnapshot};
use std::collections::{BTreeMap, BTreeSet};

/// The trace of `snapshot`'s history: first a `segment_alloc` for each page of the
/// snapshot made before the history's first event, then the events, then an `alloc`
/// at the end for each live staging slice of `segments` that no event reserved (see the
/// parent module doc).
pub(super) fn pytorch_trace(
    snapshot: &MemorySnapshot,
    addresses: &Addresses,
    segments: &[PyTorchSegment],
) -> Vec<PyTorchTraceEntry> {
    let mut events: Vec<&HistoryEvent> = snapshot.history.iter().collect();
    events.sort_by_key(|event| event.time_us);
    let anchor = snapshot.started_unix_us.unwrap_or(0);
    let mut trace = Vec::with_capacity(events.len() + segments.len());
    if let Some(first) = events.first() {
        made_before(
            &mut trace,
            snapshot,
            addresses,
            &events,
            anchor.saturating_add(first.time_us),
        );
    }
    // A free and a move carry the frames of the reservation they follow.
    let reservations: BTreeMap<u64, &HistoryEvent> = events
        .iter()
        .filter(|e| e.kind == EventKind::Reserve)
        .filter_map(|e| Some((e.id?, *e)))
        .collect();
    let mut walk = Walk {
        trace,
        placed: BTreeMap::new(),
        live: BTreeSet::new(),
    };
    for event in &events {
        let memory = event.memory.as_deref().unwrap_or(MAIN_MEMORY);
        let stream = addresses.slot(Some(memory));
        let at = |page: Option<u64>, offset: Option<u64>| {
            Some(addresses.page(stream, page?).saturating_add(offset?))
        };
        let reserve = event.id.and_then(|id| reservations.get(&id)).copied();
        let pool = event
            .pool
            .as_deref()
            .or(reserve.and_then(|r| r.pool.as_deref()));
        // The label and backtrace, or, without either, the memory and the pool.
        let frames = || {
            let label = event
                .label
                .as_deref()
                .or(reserve.and_then(|r| r.label.as_deref()));
            let backtrace = reserve
                .and_then(|r| r.backtrace.as_deref())
                .or(event.backtrace.as_deref());
            let frames = frames_of(label, backtrace);
            if frames.is_empty() {
                addresses.place(memory, pool)
            } else {
                frames
            }
        };
        let entry = |action: &str, addr: Option<u64>, size: u64| PyTorchTraceEntry {
            action: action.to_string(),
            addr,
            size,
            stream,
            time_us: anchor.saturating_add(event.time_us),
            frames: Vec::new(),
            segment_pool_id: None,
            device_free: None,
        };
        let key = event.id.map(|id| (stream, id));
        match event.kind {
            EventKind::Reserve => {
                let Some(addr) = at(event.page, event.offset) else {
                    continue;
                };
                if let Some(key) = key {
                    walk.placed.insert(key, addr);
                }
                walk.alloc(entry("alloc", Some(addr), event.bytes), frames());
            }
            EventKind::Free => {
                let placed = key.and_then(|key| walk.placed.remove(&key));
                let Some(addr) = placed.or_else(|| at(event.page, event.offset)) else {
                    continue;
                };
                walk.free(entry("free_requested", Some(addr), event.bytes), frames());
            }
            EventKind::Move => {
                let placed = key.and_then(|key| walk.placed.get(&key).copied());
                let from = placed.or_else(|| at(event.from_page, event.from_offset));
                let (Some(from), Some(to)) = (from, at(event.page, event.offset)) else {
                    continue;
                };
                walk.free(entry("free_requested", Some(from), event.bytes), frames());
                if let Some(key) = key {
                    walk.placed.insert(key, to);
                }
                walk.alloc(entry("alloc", Some(to), event.bytes), frames());
            }
            EventKind::PageMade | EventKind::PageReleased => {
                let Some(page) = event.page else { continue };
                let action = if event.kind == EventKind::PageMade {
                    "segment_alloc"
                } else {
                    "segment_free"
                };
                let addr = addresses.page(stream, page);
                walk.trace.push(PyTorchTraceEntry {
                    frames: addresses.place(memory, event.pool.as_deref()),
                    segment_pool_id: Some(DEFAULT_POOL_ID),
                    ..entry(action, Some(addr), event.bytes)
                });
            }
            EventKind::OutOfMemory => {
                let mut frames = refusal_frames(event, memory);
                frames.extend(addresses.place(memory, event.pool.as_deref()));
                frames.extend(frames_of(event.label.as_deref(), None));
                walk.trace.push(PyTorchTraceEntry {
                    device_free: Some(event.free_bytes.unwrap_or(0)),
                    frames,
                    ..entry("oom", None, event.bytes)
                });
            }
            _ => {}
        }
    }
    if !events.is_empty() {
        walk.staging_at_the_end(segments, anchor.saturating_add(snapshot.taken_us));
    }
    walk.trace
}

/// A `segment_alloc` at `time_us` (the history's first event) for each page of
/// `snapshot` that no `PageMade` or `PageReleased` of `events` names: a page made before
/// the history's first event. The viewer gives a segment no entry made no frames; these
/// name its memory and pool, and say when it was made.
fn made_before(
    trace: &mut Vec<PyTorchTraceEntry>,
    snapshot: &MemorySnapshot,
    addresses: &Addresses,
    events: &[&HistoryEvent],
    time_us: u64,
) {
    let named_pages: BTreeSet<(&str, u64)> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::PageMade | EventKind::PageReleased))
        .filter_map(|e| Some((e.memory.as_deref().unwrap_or(MAIN_MEMORY), e.page?)))
        .collect();
    for memory in &snapshot.memories {
        let slot = addresses.slot(Some(&memory.name));
        for pool in &memory.pools {
            for page in &pool.pages {
                if named_pages.contains(&(memory.name.as_str(), page.id)) {
                    continue;
                }
                let mut frames = addresses.place(&memory.name, Some(&pool.pool));
                frames.push(named(
                    "history",
                    0,
                    "page made before the history's first event (this entry stands there)",
                ));
                trace.push(PyTorchTraceEntry {
                    action: "segment_alloc".to_string(),
                    addr: Some(addresses.page(slot, page.id)),
                    size: page.size,
                    stream: slot,
                    time_us,
                    frames,
                    segment_pool_id: Some(DEFAULT_POOL_ID),
                    device_free: None,
                });
            }
        }
    }
}

/// The frames that say what an out-of-memory `event` of `memory` refused: the memory
/// and the bytes asked (`filename` "oom"), and for a budget's refusal how the budget
/// splits into pages held, pages given back that the device still used, and what was
/// free (`filename` "budget"; the parts add up to the budget).
fn refusal_frames(event: &HistoryEvent, memory: &str) -> Vec<PyTorchFrame> {
    let bytes = |n: u64| format!("{} ({n} bytes)", format_bytes(n));
    let free = event.free_bytes.unwrap_or(0);
    let what = match memory {
        MAIN_MEMORY => "the main memory".to_string(),
        "staging" => "readback staging (the staging memory)".to_string(),
        "upload" => "upload staging (the upload memory)".to_string(),
        other => format!("the {other} memory"),
    };
    let mut frames = Vec::with_capacity(2);
    match (event.budget, event.held_bytes, event.retiring_bytes) {
        (Some(budget), Some(held), Some(retiring)) => {
            frames.push(named(
                "oom",
                0,
                &format!(
                    "{what} refused {}: the budget would be crossed",
                    bytes(event.bytes)
                ),
            ));
            frames.push(named(
                "budget",
                0,
                &format!(
                    "budget {} = {} of pages held by every memory + {} of pages given back \
                     that the device still used + {} free",
                    bytes(budget),
                    bytes(held),
                    bytes(retiring),
                    bytes(free)
                ),
            ));
        }
        _ => frames.push(named(
            "oom",
            0,
            &format!(
                "{what} refused {}: {} free inside its pages (what the device has free is \
                 not known through wgpu)",
                bytes(event.bytes),
                bytes(free)
            ),
        )),
    }
    frames
}

/// The trace so far, and what its allocations hold.
struct Walk {
    trace: Vec<PyTorchTraceEntry>,
    /// Where each allocation (memory's stream, id) lies now: its made-up address.
    placed: BTreeMap<(u64, u64), u64>,
    /// Addresses an `alloc` holds that no free has ended yet.
    live: BTreeSet<u64>,
}

impl Walk {
    /// Pushes an `alloc` (`entry`) with `frames` and the default pool.
    fn alloc(&mut self, entry: PyTorchTraceEntry, frames: Vec<PyTorchFrame>) {
        if let Some(addr) = entry.addr {
            self.live.insert(addr);
        }
        self.trace.push(PyTorchTraceEntry {
            frames,
            segment_pool_id: Some(DEFAULT_POOL_ID),
            ..entry
        });
    }

    /// Pushes a `free_requested` (`entry`) and its `free_completed`, with `frames` and the
    /// default pool.
    fn free(&mut self, entry: PyTorchTraceEntry, frames: Vec<PyTorchFrame>) {
        if let Some(addr) = entry.addr {
            self.live.remove(&addr);
        }
        let requested = PyTorchTraceEntry {
            frames,
            segment_pool_id: Some(DEFAULT_POOL_ID),
            ..entry
        };
        let completed = PyTorchTraceEntry {
            action: "free_completed".to_string(),
            ..requested.clone()
        };
        self.trace.push(requested);
        self.trace.push(completed);
    }

    /// An `alloc` at `time_us` for each live block of a staging segment (any stream but
    /// the main memory's) that the trace does not hold: the library reserves staging
    /// without history events, so all that is known is that it was held then.
    fn staging_at_the_end(&mut self, segments: &[PyTorchSegment], time_us: u64) {
        let main = 0;
        for segment in segments.iter().filter(|s| s.stream != main) {
            for block in &segment.blocks {
                if block.state != "active_allocated" || self.live.contains(&block.address) {
                    continue;
                }
                self.alloc(
                    PyTorchTraceEntry {
                        action: "alloc".to_string(),
                        addr: Some(block.address),
                        size: block.requested_size,
                        stream: segment.stream,
                        time_us,
                        frames: Vec::new(),
                        segment_pool_id: None,
                        device_free: None,
                    },
                    block.frames.clone(),
                );
            }
        }
    }
}
