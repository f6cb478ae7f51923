//! Bytes in use per label group, rebuilt from a snapshot's history: what both pictures'
//! label ranking and timeline are computed from.

use super::history::{EventKind, HistoryEvent};
use super::snapshot::{MAIN_MEMORY, MemorySnapshot};
use std::collections::BTreeMap;

/// What a reservation made outside every label scope is drawn as.
pub const NO_LABEL: &str = "(no label)";

/// The group a label belongs to: its first `depth` scopes ("model/layer 3/attn" at depth 1
/// is "model", at depth 2 "model/layer 3"); the whole label when `depth` is `None` or the
/// label is shallower; [`NO_LABEL`] for `None`. A depth of 0 counts as 1.
pub fn label_group(label: Option<&str>, depth: Option<usize>) -> &str {
    let Some(label) = label else {
        return NO_LABEL;
    };
    let Some(depth) = depth else {
        return label;
    };
    match label.match_indices('/').nth(depth.max(1) - 1) {
        Some((at, _)) => &label[..at],
        None => label,
    }
}

/// Whether an event concerns the main memory: it names [`MAIN_MEMORY`], or no memory at all
/// (events recorded before memories were named).
pub(super) fn is_main(event: &HistoryEvent) -> bool {
    event
        .memory
        .as_deref()
        .is_none_or(|name| name == MAIN_MEMORY)
}

/// The signed change an event makes to bytes in use of the main memory (`Reserve` +,
/// `Free` −) and to bytes reserved in any memory (`PageMade` +, `PageReleased` −).
///
/// In use counts the main memory only: staging slices are the library's own, not the
/// user's allocations.
pub(super) fn deltas(event: &HistoryEvent) -> (i128, i128) {
    let bytes = i128::from(event.bytes);
    match event.kind {
        EventKind::Reserve if is_main(event) => (bytes, 0),
        EventKind::Free if is_main(event) => (-bytes, 0),
        EventKind::PageMade => (0, bytes),
        EventKind::PageReleased => (0, -bytes),
        _ => (0, 0),
    }
}

pub(super) fn clamp(level: i128) -> u64 {
    u64::try_from(level.max(0)).unwrap_or(u64::MAX)
}

/// The history in time order (stable: events at one time keep their ring order).
pub(super) fn ordered(snapshot: &MemorySnapshot) -> Vec<&HistoryEvent> {
    let mut events: Vec<&HistoryEvent> = snapshot.history.iter().collect();
    events.sort_by_key(|event| event.time_us);
    events
}

/// Each label group's level in the main memory before the first event, and the bytes
/// reserved then in all memories (steps 1 and 2 of the timeline's module doc); labels
/// grouped as [`label_group`] does at `depth`.
pub(super) fn initial_levels(
    snapshot: &MemorySnapshot,
    events: &[&HistoryEvent],
    depth: Option<usize>,
) -> (BTreeMap<String, i128>, i128) {
    let mut levels: BTreeMap<String, i128> = BTreeMap::new();
    let mut reserved = 0i128;
    for memory in &snapshot.memories {
        for pool in &memory.pools {
            for page in &pool.pages {
                reserved += i128::from(page.size);
                if memory.name != MAIN_MEMORY {
                    continue;
                }
                for slice in page.slices.iter().filter(|slice| slice.live) {
                    *levels
                        .entry(label_group(slice.label.as_deref(), depth).to_string())
                        .or_default() += i128::from(slice.size);
                }
            }
        }
    }
    for event in events {
        let (in_use, pages) = deltas(event);
        reserved -= pages;
        if in_use != 0 {
            *levels
                .entry(label_group(event.label.as_deref(), depth).to_string())
                .or_default() -= in_use;
        }
    }
    (levels, reserved)
}

/// Each label group's peak bytes in use in the main memory over the history, the
/// snapshot's live slices included, sorted by group. Labels are grouped as [`label_group`] does at `depth`
/// (`None`: every label its own group; unlabelled reservations under
/// [`NO_LABEL`](super::NO_LABEL)). A group's peak is the peak of its summed level, not the
/// sum of its labels' peaks.
pub fn label_peaks(snapshot: &MemorySnapshot, depth: Option<usize>) -> Vec<(String, u64)> {
    let events = ordered(snapshot);
    let (mut levels, _) = initial_levels(snapshot, &events, depth);
    let mut peaks: BTreeMap<String, i128> = levels.clone();
    for event in &events {
        let (in_use, _) = deltas(event);
        if in_use == 0 {
            continue;
        }
        let key = label_group(event.label.as_deref(), depth);
        if let Some(level) = levels.get_mut(key) {
            *level += in_use;
            if let Some(peak) = peaks.get_mut(key) {
                *peak = (*peak).max(*level);
            }
        }
    }
    peaks
        .into_iter()
        .map(|(label, peak)| (label, clamp(peak)))
        .collect()
}
