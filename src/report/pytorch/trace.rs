//! The history as PyTorch trace entries, oldest first (see the parent module's table).
//!
//! An allocation's address follows it: an `alloc` at the place its reservation names,
//! then, at each compaction move, a free there and an `alloc` where it went, and its free
//! where it lies then (a free recorded before the client followed moves names the page
//! it was reserved in; the moves recorded before it say better).

use super::{
    Addresses, DEFAULT_POOL_ID, PyTorchFrame, PyTorchSegment, PyTorchTraceEntry, frames_of,
};
use crate::report::history::{EventKind, HistoryEvent};
use crate::report::snapshot::MemorySnapshot;
use std::collections::{BTreeMap, BTreeSet};

/// The trace of `snapshot`'s history, with an `alloc` at the end for each live staging
/// slice of `segments` that no event reserved (see the parent module doc).
pub(super) fn pytorch_trace(
    snapshot: &MemorySnapshot,
    addresses: &Addresses,
    segments: &[PyTorchSegment],
) -> Vec<PyTorchTraceEntry> {
    let mut events: Vec<&HistoryEvent> = snapshot.history.iter().collect();
    events.sort_by_key(|event| event.time_us);
    let anchor = snapshot.started_unix_us.unwrap_or(0);
    // A free and a move carry the frames of the reservation they follow.
    let reservations: BTreeMap<u64, &HistoryEvent> = events
        .iter()
        .filter(|e| e.kind == EventKind::Reserve)
        .filter_map(|e| Some((e.id?, *e)))
        .collect();
    let mut walk = Walk {
        trace: Vec::with_capacity(events.len()),
        placed: BTreeMap::new(),
        live: BTreeSet::new(),
    };
    for event in &events {
        let stream = addresses.stream(event.memory.as_deref());
        let at = |page: Option<u64>, offset: Option<u64>| {
            Some(addresses.page(stream, page?).saturating_add(offset?))
        };
        let reserve = event.id.and_then(|id| reservations.get(&id)).copied();
        let frames = || {
            let label = event
                .label
                .as_deref()
                .or(reserve.and_then(|r| r.label.as_deref()));
            let backtrace = reserve
                .and_then(|r| r.backtrace.as_deref())
                .or(event.backtrace.as_deref());
            frames_of(label, backtrace)
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
                walk.trace.push(entry(action, Some(addr), event.bytes));
            }
            EventKind::OutOfMemory => walk.trace.push(PyTorchTraceEntry {
                device_free: Some(event.free_bytes.unwrap_or(0)),
                frames: frames_of(event.label.as_deref(), None),
                ..entry("oom", None, event.bytes)
            }),
            _ => {}
        }
    }
    if !events.is_empty() {
        walk.staging_at_the_end(segments, anchor.saturating_add(snapshot.taken_us));
    }
    walk.trace
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
