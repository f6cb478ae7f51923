//! Memory snapshots through the public API: JSON round trips, the checks, the totals a
//! report is compared with, and the history ring. The pictures are tested beside their
//! drawing code, in `examples/memory_viz/tests.rs`.

use cubecl_environment::stream::StreamId;
use wgpu_memory::memory_management::{
    MemoryPoolKind, MemoryPoolReport, MemoryPoolsReport, MemoryReport, MemoryUsage,
    StreamMemoryReport,
};
use wgpu_memory::report::{
    EventKind, HistoryEvent, HistoryRing, LabelStack, MAIN_MEMORY, MemorySnapshot,
    MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot, SnapshotCheckError,
    SnapshotTotals, Timeline, TopLabels,
};

fn live(offset: u64, size: u64, padding: u64, label: &str) -> SliceSnapshot {
    SliceSnapshot {
        id: Some(offset),
        age_us: Some(10),
        ..SliceSnapshot::live(offset, size, padding).labelled(label)
    }
}

fn pool_report(usage: MemoryUsage, pages: u64) -> MemoryPoolReport {
    MemoryPoolReport {
        kind: MemoryPoolKind::Sliced {
            page_size: 1024,
            max_slice_size: 1024,
        },
        usage,
        pages,
        pages_peak: pages,
        pages_unmapped: 0,
        largest_alloc: 0,
    }
}

fn empty_pool() -> MemoryPoolReport {
    MemoryPoolReport {
        kind: MemoryPoolKind::Persistent,
        ..pool_report(MemoryUsage::default(), 0)
    }
}

/// One page of 1024 bytes with two live slices and one free range, and a report that agrees.
fn snapshot() -> MemorySnapshot {
    let usage = MemoryUsage {
        number_allocs: 2,
        bytes_in_use: 100 + 200,
        bytes_padding: 28 + 56,
        bytes_reserved: 1024,
    };
    let stream = StreamMemoryReport {
        stream: StreamId { value: 0 },
        pools: MemoryPoolsReport {
            dynamic: vec![pool_report(usage, 1)],
            persistent: empty_pool(),
            dedicated: empty_pool(),
        },
        auxiliary: vec![],
    };
    let report = MemoryReport {
        streams: vec![stream],
    };
    MemorySnapshot {
        taken_us: 5_000,
        memories: vec![MemorySnapshotMemory {
            name: MAIN_MEMORY.to_string(),
            pools: vec![PoolSnapshot {
                pool: "sliced 1 KiB".to_string(),
                index: 0,
                pages: vec![PageSnapshot {
                    id: 7,
                    size: 1024,
                    slices: vec![
                        live(0, 100, 28, "model/weights"),
                        live(128, 200, 56, "model/activations"),
                        SliceSnapshot::free(384, 640),
                    ],
                }],
            }],
        }],
        history: vec![
            HistoryEvent {
                page: Some(7),
                ..HistoryEvent::new(1_000, EventKind::PageMade, 1024)
            },
            HistoryEvent {
                label: Some("model/weights".to_string()),
                page: Some(7),
                offset: Some(0),
                id: Some(0),
                backtrace: Some("at main.rs:1".to_string()),
                ..HistoryEvent::new(2_000, EventKind::Reserve, 100)
            },
            HistoryEvent {
                label: Some("model/activations".to_string()),
                ..HistoryEvent::new(3_000, EventKind::Reserve, 200)
            },
        ],
        history_dropped: 0,
        report,
    }
}

#[test]
fn the_snapshot_round_trips_through_json() {
    let snapshot = snapshot();
    let json = snapshot.to_json().unwrap();
    let back = MemorySnapshot::from_json(&json).unwrap();
    assert_eq!(back, snapshot);
    assert_eq!(back.to_json().unwrap(), json);
}

#[test]
fn bad_json_is_an_error_not_a_panic() {
    for text in [
        "",
        "{",
        "[]",
        r#"{"taken_us": -1}"#,
        r#"{"taken_us": 1, "memories": 3}"#,
    ] {
        assert!(
            MemorySnapshot::from_json(text).is_err(),
            "{text:?} was accepted"
        );
    }
}

#[test]
fn the_slices_match_the_report_totals_exactly() {
    let snapshot = snapshot();
    snapshot.check().unwrap();
    snapshot.check_report().unwrap();
    assert_eq!(
        snapshot.totals(),
        SnapshotTotals {
            slices: 2,
            bytes_in_use: 300,
            bytes_padding: 84,
            bytes_reserved: 1024,
            pages: 1,
        }
    );
    let usage = snapshot.report.usage();
    let totals = snapshot.memory(MAIN_MEMORY).unwrap().totals();
    assert_eq!(totals.bytes_in_use, usage.bytes_in_use);
    assert_eq!(totals.bytes_padding, usage.bytes_padding);
    assert_eq!(totals.bytes_reserved, usage.bytes_reserved);
    assert_eq!(totals.slices, usage.number_allocs);
}

#[test]
fn check_report_names_the_field_that_differs() {
    let mut snapshot = snapshot();
    snapshot.memories[0].pools[0].pages[0].slices[1].padding = 50;
    assert_eq!(
        snapshot.check_report(),
        Err(SnapshotCheckError::ReportMismatch {
            memory: MAIN_MEMORY.to_string(),
            field: "bytes_padding",
            snapshot: 78,
            report: 84,
        })
    );
}

#[test]
fn check_catches_two_live_slices_that_overlap() {
    let mut snapshot = snapshot();
    // The second slice now starts inside the first one's padding.
    snapshot.memories[0].pools[0].pages[0].slices[1].offset = 120;
    let error = snapshot.check().unwrap_err();
    assert_eq!(
        error,
        SnapshotCheckError::Overlap {
            memory: MAIN_MEMORY.to_string(),
            pool: "sliced 1 KiB".to_string(),
            page: 7,
            first: 0..128,
            second: 120..376,
        }
    );
    assert!(error.to_string().contains("overlap"), "{error}");
}

#[test]
fn adjacent_live_slices_do_not_overlap() {
    // The first slice's footprint ends at 128 (100 + 28 padding), where the second starts.
    let mut snapshot = snapshot();
    snapshot.memories[0].pools[0].pages[0].slices[1].offset = 128;
    snapshot.check().unwrap();
}

#[test]
fn check_catches_a_slice_past_its_page() {
    let mut snapshot = snapshot();
    snapshot.memories[0].pools[0].pages[0].slices[1].size = 900;
    assert!(matches!(
        snapshot.check(),
        Err(SnapshotCheckError::SliceOutsidePage {
            page: 7,
            offset: 128,
            end: Some(1084),
            page_size: 1024,
            ..
        })
    ));
    snapshot.memories[0].pools[0].pages[0].slices[1].offset = u64::MAX;
    assert!(matches!(
        snapshot.check(),
        Err(SnapshotCheckError::SliceOutsidePage { end: None, .. })
    ));
}

#[test]
fn the_timeline_ends_at_the_live_slices() {
    let snapshot = snapshot();
    let labels = TopLabels::from_snapshot(&snapshot, 8, None);
    let timeline = Timeline::from_snapshot(&snapshot, &labels, 100);
    let last = timeline.samples.last().unwrap();
    assert_eq!(last.time_us, 5_000);
    assert_eq!(last.total_in_use(), snapshot.totals().bytes_in_use);
    assert_eq!(last.reserved, snapshot.totals().bytes_reserved);
    assert_eq!(timeline.peak_in_use, 300);
}

#[test]
fn the_history_ring_keeps_the_newest_n() {
    let mut ring = HistoryRing::new(3);
    for time in 0..10 {
        ring.push(HistoryEvent::new(time, EventKind::Launch, 0));
        assert!(ring.len() <= 3);
    }
    let kept: Vec<u64> = ring.iter().map(|e| e.time_us).collect();
    assert_eq!(kept, [7, 8, 9]);
}

#[test]
fn label_scopes_nest() {
    let mut labels = LabelStack::default();
    let outer = labels.push("outer");
    let inner = labels.push("inner");
    assert_eq!(labels.current(), Some("outer/inner"));
    labels.close(inner);
    labels.close(outer);
    assert_eq!(labels.current(), None);
}

/// A snapshot read from a file is input: one stamped at `taken_us = u64::MAX` still gets
/// a timeline, without overflow.
#[test]
fn a_timeline_of_a_snapshot_at_the_end_of_time_does_not_overflow() {
    let mut at_end = snapshot();
    at_end.taken_us = u64::MAX;
    at_end.history.clear();
    let labels = TopLabels::from_snapshot(&at_end, 12, None);
    let timeline = Timeline::from_snapshot(&at_end, &labels, 100);
    assert!(timeline.end_us > timeline.start_us);
}
