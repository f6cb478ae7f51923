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
        started_unix_us: None,
        budget: None,
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

// ---- a snapshot with a history on two memories ----------------------------------------

/// A snapshot on two memories whose history reserves, frees, makes and gives back pages
/// and fails once, with a backtrace on one reservation.
fn pytorch_snapshot() -> MemorySnapshot {
    let mut snapshot = snapshot();
    snapshot.memories.push(MemorySnapshotMemory {
        name: "staging".to_string(),
        pools: vec![PoolSnapshot {
            pool: "sliced 64 KiB".to_string(),
            index: 0,
            pages: vec![PageSnapshot {
                id: 0,
                size: 65536,
                slices: vec![],
            }],
        }],
    });
    let at = |kind, time, bytes| HistoryEvent {
        memory: Some(MAIN_MEMORY.to_string()),
        page: Some(7),
        ..HistoryEvent::new(time, kind, bytes)
    };
    snapshot.history = vec![
        at(EventKind::PageMade, 1_000, 1024),
        HistoryEvent {
            offset: Some(0),
            id: Some(0),
            label: Some("model/weights".to_string()),
            backtrace: Some("   0: app::load\n             at ./src/app.rs:42:9\n".to_string()),
            ..at(EventKind::Reserve, 2_000, 100)
        },
        HistoryEvent {
            offset: Some(128),
            id: Some(128),
            label: Some("model/activations".to_string()),
            ..at(EventKind::Reserve, 3_000, 200)
        },
        HistoryEvent {
            offset: Some(384),
            id: Some(5),
            label: Some("model/scratch".to_string()),
            ..at(EventKind::Reserve, 3_500, 64)
        },
        HistoryEvent {
            offset: Some(384),
            id: Some(5),
            label: Some("model/scratch".to_string()),
            ..at(EventKind::Free, 3_600, 64)
        },
        HistoryEvent {
            memory: Some("staging".to_string()),
            pool: Some("sliced 64 KiB".to_string()),
            page: Some(3),
            ..HistoryEvent::new(3_700, EventKind::PageMade, 65536)
        },
        HistoryEvent {
            memory: Some("staging".to_string()),
            pool: Some("sliced 64 KiB".to_string()),
            page: Some(3),
            ..HistoryEvent::new(3_800, EventKind::PageReleased, 65536)
        },
        HistoryEvent {
            label: Some("model/huge".to_string()),
            ..HistoryEvent::new(4_000, EventKind::OutOfMemory, 1 << 40)
        },
        HistoryEvent::new(4_500, EventKind::Launch, 0),
    ];
    snapshot
}

// The export's fields, types and meaning are checked in `tests/pytorch.rs`.

#[test]
fn write_to_picks_json_unless_the_path_says_pickle() {
    let snapshot = pytorch_snapshot();
    let dir = std::env::temp_dir();
    let json = dir.join(format!("wgpu-memory-{}.json", std::process::id()));
    snapshot.write_to(&json).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(MemorySnapshot::from_json(&text).unwrap(), snapshot);
    std::fs::remove_file(&json).unwrap();
    let pickle = dir.join(format!("wgpu-memory-{}.PKL", std::process::id()));
    snapshot.write_to(&pickle).unwrap();
    let bytes = std::fs::read(&pickle).unwrap();
    std::fs::remove_file(&pickle).unwrap();
    // Pickle protocol 2+ starts with PROTO.
    assert_eq!(bytes[0], 0x80);
    let error = snapshot
        .write_to(std::path::Path::new("/nonexistent-dir/x.pickle"))
        .unwrap_err();
    assert!(error.contains("/nonexistent-dir/x.pickle"), "{error}");
}

// ---- the levels behind the pictures -----------------------------------------------------

#[test]
fn reserved_splits_into_bands_that_add_up_and_each_column_keeps_its_dip() {
    let mut snapshot = pytorch_snapshot();
    // A second main page made and given back within one column, 10 µs apart.
    snapshot.history.push(HistoryEvent {
        memory: Some(MAIN_MEMORY.to_string()),
        page: Some(8),
        ..HistoryEvent::new(3_900, EventKind::PageMade, 4096)
    });
    snapshot.history.push(HistoryEvent {
        memory: Some(MAIN_MEMORY.to_string()),
        page: Some(8),
        ..HistoryEvent::new(3_910, EventKind::PageReleased, 4096)
    });
    let labels = TopLabels::from_snapshot(&snapshot, 8, None);
    let timeline = Timeline::from_snapshot(&snapshot, &labels, 10);
    for sample in &timeline.samples {
        assert_eq!(
            sample.bands.total(),
            sample.reserved,
            "at {} µs",
            sample.time_us
        );
        assert!(sample.reserved_min <= sample.reserved && sample.reserved <= sample.reserved_max);
        assert_eq!(sample.bands.main_in_use, sample.total_in_use());
    }
    // At the end: page 7 holds 300 bytes in use of 1024; the staging page's 65536 are
    // idle (it holds no slice).
    let last = timeline.samples.last().unwrap();
    assert_eq!(last.bands.main_in_use, 300);
    assert_eq!(last.bands.main_free_in_used_pages, 724);
    assert_eq!(last.bands.main_empty_pages, 0);
    assert_eq!((last.bands.staging, last.bands.staging_idle), (0, 65536));
    // The column of 3.9 ms saw 4096 more reserved for 10 µs, and its markers sit within.
    let column = timeline.column_of(3_900);
    let sample = timeline
        .samples
        .iter()
        .find(|s| timeline.column_of(s.time_us) == column && s.time_us > timeline.start_us)
        .unwrap();
    assert_eq!(sample.reserved_max - sample.reserved_end, 4096);
    for marker in timeline
        .markers
        .iter()
        .filter(|m| timeline.column_of(m.time_us) == column)
    {
        assert!((sample.reserved_min..=sample.reserved_max).contains(&marker.reserved_after));
    }
    // Before the weights' reservation, page 7 was empty: a page a cleanup could give back.
    let first = &timeline.samples[1];
    assert_eq!(first.time_us, 1_000);
    assert_eq!(first.bands.main_empty_pages, 1024);
}

#[test]
fn the_peak_holders_add_up_to_the_peak_label_by_label() {
    let snapshot = pytorch_snapshot();
    let labels = TopLabels::from_snapshot(&snapshot, 1, Some(1));
    let timeline = Timeline::from_snapshot(&snapshot, &labels, 100);
    assert_eq!(timeline.peak_in_use, 364);
    assert_eq!(timeline.peak_in_use_us, 3_500);
    assert_eq!(
        timeline.peak_holders,
        [
            ("model/activations".to_string(), 200),
            ("model/weights".to_string(), 100),
            ("model/scratch".to_string(), 64),
        ]
    );
    assert_eq!(
        wgpu_memory::report::peak_holders(&snapshot, 3_600),
        [
            ("model/activations".to_string(), 200),
            ("model/weights".to_string(), 100),
        ]
    );
}

#[test]
fn a_snapshot_taken_back_to_a_moment_has_that_moments_slices_and_pages() {
    let snapshot = pytorch_snapshot();
    let at = snapshot.at(3_550).unwrap();
    at.check().unwrap();
    let page = &at.memories[0].pools[0].pages[0];
    let live: Vec<(u64, u64, Option<&str>)> = page
        .slices
        .iter()
        .filter(|s| s.live)
        .map(|s| (s.offset, s.size, s.label.as_deref()))
        .collect();
    assert_eq!(
        live,
        [
            (0, 100, Some("model/weights")),
            (128, 200, Some("model/activations")),
            (384, 64, Some("model/scratch")),
        ]
    );
    // Ages count from the moment; the free ranges are listed again.
    assert_eq!(
        page.slices.iter().find(|s| s.id == Some(0)).unwrap().age_us,
        Some(1_550)
    );
    assert!(page.slices.iter().any(|s| !s.live && s.offset == 448));
    assert!(at.history.iter().all(|e| e.time_us <= 3_550));
    assert_eq!(at.taken_us, 3_550);
    // At 3.75 ms the staging page 3 existed; at 0.5 ms page 7 did not.
    let staging = snapshot.at(3_750).unwrap();
    assert!(
        staging.memory("staging").unwrap().pools[0]
            .pages
            .iter()
            .any(|p| p.id == 3)
    );
    let early = snapshot.at(500).unwrap();
    assert!(early.memories[0].pools[0].pages.is_empty());
    assert!(matches!(
        snapshot.at(6_000),
        Err(wgpu_memory::report::RewindError::AfterSnapshot {
            asked_us: 6_000,
            taken_us: 5_000
        })
    ));
    let mut dropped = snapshot.clone();
    dropped.history_dropped = 3;
    assert!(matches!(
        dropped.at(500),
        Err(wgpu_memory::report::RewindError::BeforeHistory {
            first_kept_us: 1_000,
            ..
        })
    ));
}

#[test]
fn pool_stats_measure_fragmentation() {
    let snapshot = snapshot();
    let pool = &snapshot.memories[0].pools[0];
    let stats = wgpu_memory::report::PoolStats::of(pool);
    // Live footprints 0..128 and 128..384: one free range of 640 bytes.
    assert_eq!(stats.bytes_free, 640);
    assert_eq!(stats.free_ranges, 1);
    assert_eq!(stats.largest_free, 640);
    assert_eq!(stats.fragmentation(), 0.0);
    let mut holed = pool.clone();
    holed.pages[0].slices.push(SliceSnapshot::live(512, 100, 0));
    let stats = wgpu_memory::report::PoolStats::of(&holed);
    assert_eq!(
        (stats.free_ranges, stats.largest_free, stats.bytes_free),
        (2, 412, 540)
    );
    assert!((stats.fragmentation() - (1.0 - 412.0 / 540.0)).abs() < 1e-12);
}

/// A compaction's move is undone too: before it, the slice is back in the page and at
/// the offset it left, and the page it went to is empty.
#[test]
fn a_moment_before_a_move_has_the_slice_where_it_was() {
    let mut snapshot = pytorch_snapshot();
    let pool = &mut snapshot.memories[0].pools[0];
    let moved = pool.pages[0].slices.remove(1);
    pool.pages[0].slices.push(SliceSnapshot::free(128, 256));
    pool.pages[0].slices.sort_by_key(|slice| slice.offset);
    let mut arrived = moved.clone();
    arrived.offset = 0;
    pool.pages.push(PageSnapshot {
        id: 8,
        size: 1024,
        slices: vec![arrived, SliceSnapshot::free(256, 768)],
    });
    snapshot.history.push(HistoryEvent {
        memory: Some(MAIN_MEMORY.to_string()),
        page: Some(8),
        offset: Some(0),
        from_page: Some(7),
        from_offset: Some(128),
        id: moved.id,
        ..HistoryEvent::new(4_800, EventKind::Move, moved.size)
    });
    let before = snapshot.at(4_700).unwrap();
    let pages = &before.memories[0].pools[0].pages;
    let live = |id: u64| -> Vec<u64> {
        pages
            .iter()
            .find(|page| page.id == id)
            .map(|page| {
                page.slices
                    .iter()
                    .filter(|s| s.live)
                    .map(|s| s.offset)
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(live(7), vec![0, 128]);
    assert!(live(8).is_empty());
}
