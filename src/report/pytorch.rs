//! A memory snapshot in the shape PyTorch's `torch.cuda.memory._snapshot()` returns and
//! `torch.cuda.memory._dump_snapshot` pickles, so that `pytorch.org/memory_viz` and
//! `torch.cuda._memory_viz` open it (Active Memory Timeline, Allocator State History,
//! frames on hover).
//!
//! How our words map onto theirs:
//!
//! | ours | PyTorch |
//! | --- | --- |
//! | a page | a segment (`segment_type` "large" past 1 MiB, else "small") |
//! | a live slice | an `active_allocated` block: `size` its footprint, `requested_size` its requested bytes |
//! | bytes of a page no live slice covers | an `inactive` block per free range |
//! | a memory ("main", "staging", "upload") | a `stream` (0, 1, 2 in snapshot order) |
//! | a pool | `segment_pool_id` = (memory's stream, pool index) |
//! | label and backtrace | `frames`: the label first (`filename` "label"), then the backtrace's frames, innermost first |
//! | `Reserve` / `Free` | trace `alloc` / `free_requested` + `free_completed` |
//! | `PageMade` / `PageReleased` | trace `segment_alloc` / `segment_free` |
//! | `OutOfMemory` | trace `oom` (no `addr`; `device_free` 0: not recorded) |
//!
//! Addresses are made up: each page (of the snapshot or of the history) gets its own
//! range, pages laid one after the other from [`BASE_ADDRESS`], each rounded up to
//! [`PAGE_ALIGN`]; a slice's address is its page's plus its offset. Events whose page is not
//! recorded, and the other kinds (uploads, readbacks, launches, cleanups), have no PyTorch
//! equivalent and are left out. Every list has the bounds of the snapshot it comes from.

use super::frames::{Frame, backtrace_frames};
use super::history::{EventKind, HistoryEvent};
use super::snapshot::{MAIN_MEMORY, MemorySnapshot, PageSnapshot};
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the first page's made-up address starts (not 0, which reads as null).
pub const BASE_ADDRESS: u64 = 1 << 32;
/// The alignment of each page's made-up address, in bytes.
pub const PAGE_ALIGN: u64 = 2 << 20;
/// Segments past this size are "large", as PyTorch splits them.
const LARGE_SEGMENT: u64 = 1 << 20;

/// `torch.cuda.memory._snapshot()`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchSnapshot {
    /// Every page of every memory, as segments.
    pub segments: Vec<PyTorchSegment>,
    /// One trace per device (one here), oldest first.
    pub device_traces: Vec<Vec<PyTorchTraceEntry>>,
}

/// One segment: a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchSegment {
    /// The device index: 0.
    pub device: u64,
    /// The page's made-up address.
    pub address: u64,
    /// The page size, in bytes.
    pub total_size: u64,
    /// Footprints of its live slices, in bytes.
    pub allocated_size: u64,
    /// Footprints of its live slices, in bytes (nothing waits for another stream here).
    pub active_size: u64,
    /// Requested bytes of its live slices.
    pub requested_size: u64,
    /// The memory's stream number (0 main, then the auxiliary memories).
    pub stream: u64,
    /// "large" past 1 MiB, else "small".
    pub segment_type: String,
    /// (the memory's stream number, the pool's index).
    pub segment_pool_id: (u64, u64),
    /// Always false: pages never grow.
    pub is_expandable: bool,
    /// Where the segment was made: not recorded, empty.
    pub frames: Vec<PyTorchFrame>,
    /// Its blocks, covering the page in address order.
    pub blocks: Vec<PyTorchBlock>,
}

/// One block: a live slice or a free range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchBlock {
    /// Its made-up address.
    pub address: u64,
    /// Its footprint, in bytes (requested bytes and padding).
    pub size: u64,
    /// Requested bytes (0 for a free range).
    pub requested_size: u64,
    /// "active_allocated" or "inactive".
    pub state: String,
    /// The label and the backtrace of its reservation, when known.
    pub frames: Vec<PyTorchFrame>,
}

/// One stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchFrame {
    /// The source file ("label" for the label frame).
    pub filename: String,
    /// The line (0 when unknown).
    pub line: u64,
    /// The function, or the label.
    pub name: String,
}

/// One trace entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchTraceEntry {
    /// "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free" or "oom".
    pub action: String,
    /// The block's or segment's made-up address; absent for "oom".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<u64>,
    /// Requested bytes (alloc, frees, oom) or the page size (segment events).
    pub size: u64,
    /// The memory's stream number.
    pub stream: u64,
    /// When, in µs since the client started.
    pub time_us: u64,
    /// The label and backtrace of the reservation (alloc and frees).
    pub frames: Vec<PyTorchFrame>,
    /// Free device bytes, only for "oom": not recorded, 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free: Option<u64>,
}

fn frame(frame: &Frame) -> PyTorchFrame {
    PyTorchFrame {
        filename: frame.filename.clone(),
        line: frame.line,
        name: frame.name.clone(),
    }
}

/// The frames of a reservation: its label, then its backtrace's frames.
fn frames_of(label: Option<&str>, backtrace: Option<&str>) -> Vec<PyTorchFrame> {
    let mut frames: Vec<PyTorchFrame> = label
        .map(|label| PyTorchFrame {
            filename: "label".to_string(),
            line: 0,
            name: label.to_string(),
        })
        .into_iter()
        .collect();
    if let Some(backtrace) = backtrace {
        frames.extend(backtrace_frames(backtrace).iter().map(frame));
    }
    frames
}

/// Each memory's stream number and each page's made-up address.
struct Addresses {
    streams: BTreeMap<String, u64>,
    pages: BTreeMap<(u64, u64), u64>,
}

impl Addresses {
    fn new(snapshot: &MemorySnapshot) -> Self {
        let mut streams: BTreeMap<String, u64> = BTreeMap::new();
        let mut stream_of = |name: &str| {
            let next = streams.len() as u64;
            *streams.entry(name.to_string()).or_insert(next)
        };
        // Each page's size: from the snapshot, else the history's page events and the
        // furthest slice end its events name.
        let mut sizes: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for memory in &snapshot.memories {
            let stream = stream_of(&memory.name);
            for page in memory.pools.iter().flat_map(|p| &p.pages) {
                sizes.insert((stream, page.id), page.size);
            }
        }
        for event in &snapshot.history {
            let Some(page) = event.page else { continue };
            let stream = stream_of(event.memory.as_deref().unwrap_or(MAIN_MEMORY));
            let size = match event.kind {
                EventKind::PageMade | EventKind::PageReleased => event.bytes,
                _ => event.offset.unwrap_or(0).saturating_add(event.bytes),
            };
            let known = sizes.entry((stream, page)).or_default();
            *known = (*known).max(size);
        }
        let mut next = BASE_ADDRESS;
        let pages = sizes
            .into_iter()
            .map(|(key, size)| {
                let address = next;
                next = next
                    .saturating_add(size.max(1).div_ceil(PAGE_ALIGN).saturating_mul(PAGE_ALIGN));
                (key, address)
            })
            .collect();
        Addresses { streams, pages }
    }

    fn stream(&self, memory: Option<&str>) -> u64 {
        self.streams
            .get(memory.unwrap_or(MAIN_MEMORY))
            .copied()
            .unwrap_or(0)
    }

    fn page(&self, stream: u64, page: u64) -> Option<u64> {
        self.pages.get(&(stream, page)).copied()
    }
}

fn segment(
    page: &PageSnapshot,
    address: u64,
    stream: u64,
    pool_index: u64,
    backtraces: &BTreeMap<u64, &str>,
) -> PyTorchSegment {
    let mut blocks: Vec<PyTorchBlock> = Vec::new();
    let mut live: Vec<_> = page.slices.iter().filter(|s| s.live).collect();
    live.sort_by_key(|slice| slice.offset);
    let mut cursor = 0u64;
    let free = |start: u64, end: u64| PyTorchBlock {
        address: address + start,
        size: end - start,
        requested_size: 0,
        state: "inactive".to_string(),
        frames: Vec::new(),
    };
    let (mut allocated, mut requested) = (0u64, 0u64);
    for slice in live {
        let end = slice.end().unwrap_or(page.size).min(page.size);
        if slice.offset < cursor || slice.offset >= end {
            continue; // overlapping or outside its page: an unchecked snapshot.
        }
        if slice.offset > cursor {
            blocks.push(free(cursor, slice.offset));
        }
        let backtrace = slice.id.and_then(|id| backtraces.get(&id).copied());
        blocks.push(PyTorchBlock {
            address: address + slice.offset,
            size: end - slice.offset,
            requested_size: slice.size,
            state: "active_allocated".to_string(),
            frames: frames_of(slice.label.as_deref(), backtrace),
        });
        allocated += end - slice.offset;
        requested += slice.size;
        cursor = end;
    }
    if page.size > cursor {
        blocks.push(free(cursor, page.size));
    }
    PyTorchSegment {
        device: 0,
        address,
        total_size: page.size,
        allocated_size: allocated,
        active_size: allocated,
        requested_size: requested,
        stream,
        segment_type: if page.size > LARGE_SEGMENT {
            "large"
        } else {
            "small"
        }
        .to_string(),
        segment_pool_id: (stream, pool_index),
        is_expandable: false,
        frames: Vec::new(),
        blocks,
    }
}

impl MemorySnapshot {
    /// This snapshot in PyTorch's shape (see the module doc of `report::pytorch`).
    ///
    /// # Complexity
    /// O(s log s + e log e) for s slices and e events.
    pub fn to_pytorch(&self) -> PyTorchSnapshot {
        let addresses = Addresses::new(self);
        let backtraces: BTreeMap<u64, &str> = self
            .history
            .iter()
            .filter(|e| e.kind == EventKind::Reserve)
            .filter_map(|e| Some((e.id?, e.backtrace.as_deref()?)))
            .collect();
        let mut segments = Vec::new();
        for memory in &self.memories {
            let stream = addresses.stream(Some(&memory.name));
            for pool in &memory.pools {
                for page in &pool.pages {
                    let address = addresses.page(stream, page.id).unwrap_or(BASE_ADDRESS);
                    segments.push(segment(
                        page,
                        address,
                        stream,
                        pool.index as u64,
                        &backtraces,
                    ));
                }
            }
        }
        PyTorchSnapshot {
            segments,
            device_traces: vec![self.pytorch_trace(&addresses)],
        }
    }

    /// The history as PyTorch trace entries, oldest first.
    fn pytorch_trace(&self, addresses: &Addresses) -> Vec<PyTorchTraceEntry> {
        let mut events: Vec<&HistoryEvent> = self.history.iter().collect();
        events.sort_by_key(|event| event.time_us);
        // A free names the frames of its reservation.
        let reservations: BTreeMap<u64, &HistoryEvent> = events
            .iter()
            .filter(|e| e.kind == EventKind::Reserve)
            .filter_map(|e| Some((e.id?, *e)))
            .collect();
        let mut trace = Vec::with_capacity(events.len());
        for event in events {
            let stream = addresses.stream(event.memory.as_deref());
            let page = event.page.and_then(|page| addresses.page(stream, page));
            let entry =
                |action: &str, addr: Option<u64>, frames: Vec<PyTorchFrame>| PyTorchTraceEntry {
                    action: action.to_string(),
                    addr,
                    size: event.bytes,
                    stream,
                    time_us: event.time_us,
                    frames,
                    device_free: None,
                };
            let slice_addr = page.map(|base| base + event.offset.unwrap_or(0));
            match event.kind {
                EventKind::Reserve | EventKind::Free => {
                    let Some(addr) = slice_addr.filter(|_| event.offset.is_some()) else {
                        continue;
                    };
                    let reserve = event.id.and_then(|id| reservations.get(&id)).copied();
                    let backtrace = reserve
                        .unwrap_or(event)
                        .backtrace
                        .as_deref()
                        .or(event.backtrace.as_deref());
                    let frames = frames_of(event.label.as_deref(), backtrace);
                    if event.kind == EventKind::Reserve {
                        trace.push(entry("alloc", Some(addr), frames));
                    } else {
                        trace.push(entry("free_requested", Some(addr), frames.clone()));
                        trace.push(entry("free_completed", Some(addr), frames));
                    }
                }
                EventKind::PageMade | EventKind::PageReleased => {
                    let Some(addr) = page else { continue };
                    let action = if event.kind == EventKind::PageMade {
                        "segment_alloc"
                    } else {
                        "segment_free"
                    };
                    trace.push(entry(action, Some(addr), Vec::new()));
                }
                EventKind::OutOfMemory => trace.push(PyTorchTraceEntry {
                    device_free: Some(0),
                    ..entry("oom", None, frames_of(event.label.as_deref(), None))
                }),
                _ => {}
            }
        }
        trace
    }

    /// [`to_pytorch`](Self::to_pytorch) as a pickle (protocol 3, readable by Python 3's
    /// `pickle.load`), what `_dump_snapshot` writes.
    ///
    /// # Errors
    /// A `serde_pickle::Error` only if serialization fails, which these types never cause.
    pub fn to_pytorch_pickle(&self) -> Result<Vec<u8>, serde_pickle::Error> {
        serde_pickle::to_vec(&self.to_pytorch(), serde_pickle::SerOptions::new())
    }

    /// Writes the snapshot to `path`: as PyTorch's pickle
    /// ([`to_pytorch_pickle`](Self::to_pytorch_pickle)) when the file name ends in
    /// `.pickle` or `.pkl`, as JSON ([`to_json`](Self::to_json)) otherwise.
    ///
    /// # Errors
    /// A message naming the path and what failed: serializing, or writing the file.
    pub fn write_to(&self, path: &std::path::Path) -> Result<(), String> {
        let pickle = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("pickle") || e.eq_ignore_ascii_case("pkl"));
        let bytes = if pickle {
            self.to_pytorch_pickle().map_err(|e| e.to_string())?
        } else {
            self.to_json().map_err(|e| e.to_string())?.into_bytes()
        };
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}
