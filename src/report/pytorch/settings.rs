//! The export's `allocator_settings` (what the viewer's Allocator Settings page prints),
//! and the stream numbers, made the ones the viewer shows.

use super::{Addresses, PyTorchSegment, PyTorchTraceEntry, int, opt_int};
use crate::memory_management::{MemoryPoolKind, MemoryPoolsReport, pool_kind_text};
use crate::report::snapshot::{MAIN_MEMORY, MemorySnapshot};
use serde::Serialize;
use std::collections::BTreeMap;

/// The value of `allocator_settings`: the viewer prints it as JSON. Every map has one
/// entry per memory (or stream) of the snapshot, every list one per pool or page size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PyTorchSettings {
    /// The budget over every memory when the snapshot was taken, in bytes; `None` (null)
    /// without one, or where the snapshot does not say.
    #[serde(serialize_with = "opt_int")]
    pub budget: Option<u64>,
    /// Each stream number (as text: the keys of a JSON object are text) and the name of
    /// its memory.
    pub streams: BTreeMap<String, String>,
    /// Each memory's pools in layout order, "pool 0: sliced (512.00 KiB pages, slices up
    /// to 64.00 KiB)": the kind and shape from the snapshot's report, or the snapshot's
    /// pool name where the report does not have the pool.
    pub pools: BTreeMap<String, Vec<String>>,
    /// Each memory's page sizes held when the snapshot was taken, in bytes, ascending,
    /// each once.
    #[serde(serialize_with = "int_lists")]
    pub page_sizes: BTreeMap<String, Vec<u64>>,
    /// The history events the snapshot carries (its trace's source).
    #[serde(serialize_with = "int")]
    pub history_events: u64,
    /// Older events the history ring had dropped: the trace starts late when this is not
    /// 0 (PyTorch's `trace_alloc_overflowed`).
    #[serde(serialize_with = "int")]
    pub history_dropped: u64,
}

fn int_lists<S: serde::Serializer>(
    value: &BTreeMap<String, Vec<u64>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let signed: BTreeMap<&String, Vec<i64>> = value
        .iter()
        .map(|(key, list)| (key, list.iter().map(|&v| super::signed(v)).collect()))
        .collect();
    signed.serialize(serializer)
}

/// Renumbers the streams of `segments` and `trace` (built with each memory's address slot
/// as its stream) as the viewer numbers them: the main memory's 0 stays 0, every other
/// takes the next number in the order it first appears in the trace, then in the
/// segments. Returns each slot's number.
///
/// # Complexity
/// O((s + e) log m) for s segments, e entries and m memories.
pub(super) fn number_streams(
    segments: &mut [PyTorchSegment],
    trace: &mut [PyTorchTraceEntry],
) -> BTreeMap<u64, u64> {
    let mut numbers = BTreeMap::from([(0, 0)]);
    let mut number = |slot: u64| {
        let next = numbers.len() as u64;
        *numbers.entry(slot).or_insert(next)
    };
    for entry in trace.iter_mut() {
        entry.stream = number(entry.stream);
    }
    for segment in segments.iter_mut() {
        segment.stream = number(segment.stream);
    }
    numbers
}

/// The settings of `snapshot`, whose memories have the stream `numbers` (slot to number).
pub(super) fn settings(
    snapshot: &MemorySnapshot,
    addresses: &Addresses,
    numbers: &BTreeMap<u64, u64>,
) -> PyTorchSettings {
    let streams = numbers
        .iter()
        .map(|(&slot, number)| (number.to_string(), addresses.memory(slot).to_string()))
        .collect();
    let mut pools = BTreeMap::new();
    let mut page_sizes = BTreeMap::new();
    for memory in &snapshot.memories {
        let report = pools_report(snapshot, &memory.name);
        let lines = memory
            .pools
            .iter()
            .map(|pool| {
                let shape = report
                    .and_then(|report| kind_at(report, pool.index))
                    .map_or_else(|| pool.pool.clone(), |kind| pool_kind_text(kind, None));
                format!("pool {}: {shape}", pool.index)
            })
            .collect();
        pools.insert(memory.name.clone(), lines);
        let mut sizes: Vec<u64> = memory
            .pools
            .iter()
            .flat_map(|pool| pool.pages.iter().map(|page| page.size))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        page_sizes.insert(memory.name.clone(), sizes);
    }
    PyTorchSettings {
        budget: snapshot.budget,
        streams,
        pools,
        page_sizes,
        history_events: snapshot.history.len() as u64,
        history_dropped: snapshot.history_dropped,
    }
}

/// The report's pools of the memory named `memory` (the first stream's), if it has them.
fn pools_report<'a>(snapshot: &'a MemorySnapshot, memory: &str) -> Option<&'a MemoryPoolsReport> {
    let stream = snapshot.report.streams.first()?;
    if memory == MAIN_MEMORY {
        return Some(&stream.pools);
    }
    stream
        .auxiliary
        .iter()
        .find(|auxiliary| auxiliary.name == memory)
        .map(|auxiliary| &auxiliary.pools)
}

/// The kind of the pool at `index` of a memory's layout: the dynamic pools, then the
/// persistent and the dedicated pool.
fn kind_at(report: &MemoryPoolsReport, index: usize) -> Option<&MemoryPoolKind> {
    let dynamic = report.dynamic.len();
    match index.checked_sub(dynamic) {
        None => Some(&report.dynamic[index].kind),
        Some(0) => Some(&report.persistent.kind),
        Some(1) => Some(&report.dedicated.kind),
        Some(_) => None,
    }
}
