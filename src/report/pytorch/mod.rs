//! A memory snapshot in the shape PyTorch's `torch.cuda.memory._snapshot()` returns and
//! `torch.cuda.memory._dump_snapshot` pickles, so that `pytorch.org/memory_viz`
//! (`torch/utils/viz/MemoryViz.js`) and `torch.cuda._memory_viz` open it (Active Memory
//! Timeline, Active Cached Segment Timeline, Allocator State History, Allocator Settings,
//! frames on hover, `compare` of two snapshots).
//!
//! How our words map onto theirs:
//!
//! | ours | PyTorch |
//! | --- | --- |
//! | a page | a segment (`segment_type` "large" past 1 MiB, else "small"); its `frames` name the memory (`filename` "memory") and the pool (`filename` "pool", `line` the pool's index) |
//! | a live slice | an `active_allocated` block: `size` its footprint, `requested_size` its requested bytes; its `frames` are its label and backtrace, or, without either, its memory and pool |
//! | bytes of a page no live slice covers | an `inactive` block per free range |
//! | a memory ("main", "staging", "upload") | a `stream`: main is 0, the others are numbered 1, 2, ... in the order they first appear in the trace, then in the segments: the order the viewer numbers streams in, so the numbers it shows are these; `allocator_settings["streams"]` names each |
//! | every pool | the default pool, `segment_pool_id` (0, 0), on every segment and every trace entry but `oom`: PyTorch reads any other id as a *private* pool (a `MemPool`), which ours are not, and an entry without one as "pool_id unknown" once its page is gone; the pool's name is in the frames |
//! | label and backtrace | `frames`: the label first (`filename` "label"), then the backtrace's frames, innermost first; without either, the memory and the pool |
//! | `Reserve` / `Free` | trace `alloc` / `free_requested` + `free_completed` |
//! | `Move` (compaction) | `free_requested` + `free_completed` where the slice was, then `alloc` where it went, with the reservation's frames |
//! | `PageMade` / `PageReleased` | trace `segment_alloc` / `segment_free`, with the page's memory and pool as frames |
//! | a page made before the history's first event | a `segment_alloc` at that first event, its frames saying so (`filename` "history"): the viewer gives a segment no entry made no frames at all |
//! | `OutOfMemory` | trace `oom` (no `addr`), `device_free` the event's `free_bytes` (what was still free to the refused memory; 0 where a snapshot did not record it); its frames say which memory refused how many bytes (`filename` "oom", "memory") and, for a budget's refusal, how the budget splits into pages held, pages given back that the device still used, and what was free (`filename` "budget"), then the label |
//! | the budget, the pools, the page sizes, the history's bound | `allocator_settings` (see [`PyTorchSettings`]) |
//!
//! Times (`time_us`) are Unix time in µs, as PyTorch reads them (`new Date(time_us / 1000)`):
//! the snapshot's `started_unix_us` plus the event's time; a snapshot without
//! `started_unix_us` keeps the times since the client started.
//!
//! Addresses are made up, and depend only on the page: page `id` of the memory in slot
//! `s` (main 0, staging 1, upload 2, other memories after them, whatever their stream
//! numbers) starts at [`BASE_ADDRESS`] + (`id` × [`STREAM_SLOTS`] + `s`) × [`PAGE_SPAN`],
//! and a slice's address is its page's plus its offset. So two snapshots of one client
//! give a page the same address whatever history each kept, and `compare` matches them.
//! Page ids are unique across a process's memories, so each page owns 4 × 64 GiB of
//! address; below page id 32768 every address is under 2^53, exact in JavaScript (Python
//! reads every address exactly).
//!
//! Slices of the staging memories (the library's own, reserved and freed without history
//! events) that are live in the snapshot get an `alloc` at the moment it was taken, so the
//! timeline does not show them held since its first event. Events whose page is not
//! recorded, and the other kinds (uploads, readbacks, launches, cleanups), have no PyTorch
//! equivalent and are left out. Every list has the bounds of the snapshot it comes from.

mod settings;
mod trace;

pub use settings::PyTorchSettings;

use super::frames::{Frame, backtrace_frames};
use super::history::EventKind;
use super::snapshot::{MAIN_MEMORY, MemorySnapshot, PageSnapshot};
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the made-up address space starts (not 0, which reads as null).
pub const BASE_ADDRESS: u64 = 1 << 32;
/// The made-up address each (page, memory) slot owns, in bytes: 64 GiB, more than any one
/// buffer current devices let wgpu create.
pub const PAGE_SPAN: u64 = 1 << 36;
/// Slots per page id: one per memory (main, staging, upload, and one spare).
pub const STREAM_SLOTS: u64 = 4;
/// The segment pool id every segment and trace entry carries: PyTorch's default pool.
pub const DEFAULT_POOL_ID: (u64, u64) = (0, 0);
/// Segments past this size are "large", as PyTorch splits them.
const LARGE_SEGMENT: u64 = 1 << 20;

/// `torch.cuda.memory._snapshot()`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchSnapshot {
    /// Every page of every memory, as segments.
    pub segments: Vec<PyTorchSegment>,
    /// One trace per device (one here), oldest first.
    pub device_traces: Vec<Vec<PyTorchTraceEntry>>,
    /// What the viewer's Allocator Settings page shows: the budget, the streams, the
    /// pools and page sizes, the history's bound.
    pub allocator_settings: PyTorchSettings,
}

/// One segment: a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchSegment {
    /// The device index: 0.
    #[serde(serialize_with = "int")]
    pub device: u64,
    /// The page's made-up address.
    #[serde(serialize_with = "int")]
    pub address: u64,
    /// The page size, in bytes.
    #[serde(serialize_with = "int")]
    pub total_size: u64,
    /// Footprints of its live slices, in bytes.
    #[serde(serialize_with = "int")]
    pub allocated_size: u64,
    /// Footprints of its live slices, in bytes (nothing waits for another stream here).
    #[serde(serialize_with = "int")]
    pub active_size: u64,
    /// Requested bytes of its live slices.
    #[serde(serialize_with = "int")]
    pub requested_size: u64,
    /// The memory's stream number (0 main, the others in the order the trace, then the
    /// segments, first name them; see the module doc).
    #[serde(serialize_with = "int")]
    pub stream: u64,
    /// "large" past 1 MiB, else "small".
    pub segment_type: String,
    /// Always [`DEFAULT_POOL_ID`]: see the module doc.
    #[serde(serialize_with = "int_pair")]
    pub segment_pool_id: (u64, u64),
    /// Always false: pages never grow.
    pub is_expandable: bool,
    /// The memory (`filename` "memory", `name` its name) and the pool (`filename` "pool",
    /// `line` its index, `name` its kind and shape) the page belongs to.
    pub frames: Vec<PyTorchFrame>,
    /// Its blocks, covering the page in address order.
    pub blocks: Vec<PyTorchBlock>,
}

/// One block: a live slice or a free range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchBlock {
    /// Its made-up address.
    #[serde(serialize_with = "int")]
    pub address: u64,
    /// Its footprint, in bytes (requested bytes and padding).
    #[serde(serialize_with = "int")]
    pub size: u64,
    /// Requested bytes (0 for a free range).
    #[serde(serialize_with = "int")]
    pub requested_size: u64,
    /// "active_allocated" or "inactive".
    pub state: String,
    /// The label and the backtrace of its reservation, when known; else its memory
    /// (`filename` "memory") and pool (`filename` "pool"). Empty for a free range.
    pub frames: Vec<PyTorchFrame>,
}

/// One stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchFrame {
    /// The source file ("label", "memory", "pool", "history", "oom" or "budget" for the
    /// frames we make up).
    pub filename: String,
    /// The line (0 when unknown; a pool frame's line is the pool's index).
    #[serde(serialize_with = "int")]
    pub line: u64,
    /// The function, the label, or the memory's or pool's name.
    pub name: String,
}

/// One trace entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchTraceEntry {
    /// "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free" or "oom".
    pub action: String,
    /// The block's or segment's made-up address; absent for "oom".
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_int")]
    pub addr: Option<u64>,
    /// Requested bytes (alloc, frees, oom) or the page size (segment events).
    #[serde(serialize_with = "int")]
    pub size: u64,
    /// The memory's stream number.
    #[serde(serialize_with = "int")]
    pub stream: u64,
    /// When, in µs since 1970 (Unix time; see the module doc).
    #[serde(serialize_with = "int")]
    pub time_us: u64,
    /// The label and backtrace of the reservation (alloc and frees; without either, its
    /// memory and pool), the memory and pool of a page (segment events), or what was
    /// refused ("oom").
    pub frames: Vec<PyTorchFrame>,
    /// The block's or segment's pool, [`DEFAULT_POOL_ID`], on every entry but "oom".
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_int_pair"
    )]
    pub segment_pool_id: Option<(u64, u64)>,
    /// Free bytes, only for "oom" (see the module doc).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_int")]
    pub device_free: Option<u64>,
}

// Integers go into the pickle as signed 64-bit values: serde-pickle writes a `u64` of 2^31
// or more as a 9-byte long, which MemoryViz.js's unpickler turns into a BigInt (and
// `time_us / 1000` then throws); an 8-byte long reads as a Number. Values past i64::MAX
// (none a snapshot makes) saturate.
fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn int<S: serde::Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_i64(signed(*value))
}

fn opt_int<S: serde::Serializer>(value: &Option<u64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_some(&signed(*value)),
        None => serializer.serialize_none(),
    }
}

fn int_pair<S: serde::Serializer>(value: &(u64, u64), serializer: S) -> Result<S::Ok, S::Error> {
    (signed(value.0), signed(value.1)).serialize(serializer)
}

fn opt_int_pair<S: serde::Serializer>(
    value: &Option<(u64, u64)>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_some(&(signed(value.0), signed(value.1))),
        None => serializer.serialize_none(),
    }
}

fn frame(frame: &Frame) -> PyTorchFrame {
    PyTorchFrame {
        filename: frame.filename.clone(),
        line: frame.line,
        name: frame.name.clone(),
    }
}

/// A made-up frame: `filename` says what `name` is.
fn named(filename: &str, line: u64, name: &str) -> PyTorchFrame {
    PyTorchFrame {
        filename: filename.to_string(),
        line,
        name: name.to_string(),
    }
}

/// The frames of a reservation: its label, then its backtrace's frames.
fn frames_of(label: Option<&str>, backtrace: Option<&str>) -> Vec<PyTorchFrame> {
    let mut frames: Vec<PyTorchFrame> = label
        .map(|label| named("label", 0, label))
        .into_iter()
        .collect();
    if let Some(backtrace) = backtrace {
        frames.extend(backtrace_frames(backtrace).iter().map(frame));
    }
    frames
}

/// Each memory's address slot (pages' made-up addresses follow from it) and the index of
/// each pool by name.
struct Addresses {
    slots: BTreeMap<String, u64>,
    /// (memory, pool name) to the pool's index in its memory, from the snapshot.
    pools: BTreeMap<(String, String), u64>,
}

impl Addresses {
    /// Main, staging and upload are slots 0, 1 and 2 whatever the snapshot lists; other
    /// memories (of the snapshot, then of its history) follow in the order first seen.
    fn new(snapshot: &MemorySnapshot) -> Self {
        let mut slots: BTreeMap<String, u64> = [MAIN_MEMORY, "staging", "upload"]
            .iter()
            .enumerate()
            .map(|(slot, name)| (name.to_string(), slot as u64))
            .collect();
        let names = snapshot
            .memories
            .iter()
            .map(|memory| memory.name.as_str())
            .chain(snapshot.history.iter().filter_map(|e| e.memory.as_deref()));
        for name in names {
            let next = slots.len() as u64;
            slots.entry(name.to_string()).or_insert(next);
        }
        let pools = snapshot
            .memories
            .iter()
            .flat_map(|memory| {
                memory
                    .pools
                    .iter()
                    .map(|pool| ((memory.name.clone(), pool.pool.clone()), pool.index as u64))
            })
            .collect();
        Addresses { slots, pools }
    }

    /// The address slot of `memory` (`None`: the main memory).
    fn slot(&self, memory: Option<&str>) -> u64 {
        self.slots
            .get(memory.unwrap_or(MAIN_MEMORY))
            .copied()
            .unwrap_or(0)
    }

    /// The name of the memory in `slot`.
    fn memory(&self, slot: u64) -> &str {
        self.slots
            .iter()
            .find(|(_, s)| **s == slot)
            .map_or(MAIN_MEMORY, |(name, _)| name.as_str())
    }

    /// The made-up address of page `page` of the memory in `slot` (saturating: an
    /// absurd id still gives an address).
    fn page(&self, slot: u64, page: u64) -> u64 {
        let slot = page
            .saturating_mul(STREAM_SLOTS)
            .saturating_add(slot % STREAM_SLOTS);
        BASE_ADDRESS.saturating_add(slot.saturating_mul(PAGE_SPAN))
    }

    /// The frames naming `memory` and, when known, `pool` (its index as the line; 0
    /// for a pool the snapshot does not list).
    fn place(&self, memory: &str, pool: Option<&str>) -> Vec<PyTorchFrame> {
        let mut frames = vec![named("memory", 0, memory)];
        if let Some(pool) = pool {
            let index = self
                .pools
                .get(&(memory.to_string(), pool.to_string()))
                .copied()
                .unwrap_or(0);
            frames.push(named("pool", index, pool));
        }
        frames
    }
}

/// A page as a segment of `memory` in `pool` (its name and index), in the memory's
/// address slot (its stream number until [`settings::number_streams`] renumbers it).
struct SegmentOf<'a> {
    memory: &'a str,
    pool: &'a str,
    pool_index: u64,
    slot: u64,
    address: u64,
}

fn segment(
    page: &PageSnapshot,
    of: SegmentOf<'_>,
    backtraces: &BTreeMap<u64, &str>,
) -> PyTorchSegment {
    let mut blocks: Vec<PyTorchBlock> = Vec::new();
    let mut live: Vec<_> = page.slices.iter().filter(|s| s.live).collect();
    live.sort_by_key(|slice| slice.offset);
    let mut cursor = 0u64;
    let address = of.address;
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
        let mut frames = frames_of(slice.label.as_deref(), backtrace);
        if frames.is_empty() {
            frames = place_frames(&of);
        }
        blocks.push(PyTorchBlock {
            address: address + slice.offset,
            size: end - slice.offset,
            requested_size: slice.size,
            state: "active_allocated".to_string(),
            frames,
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
        stream: of.slot,
        segment_type: if page.size > LARGE_SEGMENT {
            "large"
        } else {
            "small"
        }
        .to_string(),
        segment_pool_id: DEFAULT_POOL_ID,
        is_expandable: false,
        frames: place_frames(&of),
        blocks,
    }
}

/// The frames naming a segment's memory and pool.
fn place_frames(of: &SegmentOf<'_>) -> Vec<PyTorchFrame> {
    vec![
        named("memory", 0, of.memory),
        named("pool", of.pool_index, of.pool),
    ]
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
            let slot = addresses.slot(Some(&memory.name));
            for pool in &memory.pools {
                for page in &pool.pages {
                    let of = SegmentOf {
                        memory: &memory.name,
                        pool: &pool.pool,
                        pool_index: pool.index as u64,
                        slot,
                        address: addresses.page(slot, page.id),
                    };
                    segments.push(segment(page, of, &backtraces));
                }
            }
        }
        let mut trace = trace::pytorch_trace(self, &addresses, &segments);
        let streams = settings::number_streams(&mut segments, &mut trace);
        let allocator_settings = settings::settings(self, &addresses, &streams);
        PyTorchSnapshot {
            segments,
            device_traces: vec![trace],
            allocator_settings,
        }
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
