//! The timeline's levels, columns and markers, rebuilt from small snapshots.

use super::history::{EventKind, HistoryEvent};
use super::timeline::{Timeline, TimelineMarker};
use super::top_labels::TopLabels;
use crate::memory_management::MemoryReport;
use crate::report::snapshot::{
    MemorySnapshot, MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
};

/// An event on page 0 of the main memory.
fn event(time_us: u64, kind: EventKind, bytes: u64, label: &str) -> HistoryEvent {
    HistoryEvent {
        label: Some(label.to_string()),
        page: Some(0),
        offset: Some(0),
        ..HistoryEvent::new(time_us, kind, bytes)
    }
}

fn live(offset: u64, size: u64, label: &str) -> SliceSnapshot {
    SliceSnapshot::live(offset, size, 0).labelled(label)
}

fn snapshot(history: Vec<HistoryEvent>, slices: Vec<SliceSnapshot>) -> MemorySnapshot {
    MemorySnapshot {
        taken_us: 1_000,
        memories: vec![MemorySnapshotMemory {
            name: "main".to_string(),
            pools: vec![PoolSnapshot {
                pool: "sliced".to_string(),
                index: 0,
                pages: vec![PageSnapshot {
                    id: 0,
                    size: 1024,
                    slices,
                }],
            }],
        }],
        history,
        history_dropped: 0,
        started_unix_us: None,
        budget: None,
        report: MemoryReport { streams: vec![] },
    }
}

#[test]
fn levels_follow_reserves_and_frees_and_end_at_the_live_slices() {
    let snap = snapshot(
        vec![
            event(10, EventKind::PageMade, 1024, "a"),
            event(20, EventKind::Reserve, 100, "a"),
            event(30, EventKind::Reserve, 300, "b"),
            event(40, EventKind::Free, 300, "b"),
        ],
        vec![live(0, 100, "a")],
    );
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    assert_eq!(labels.names(), ["b", "a"]);
    let timeline = Timeline::from_snapshot(&snap, &labels, 1000);
    let levels: Vec<(u64, Vec<u64>, u64)> = timeline
        .samples
        .iter()
        .map(|s| (s.time_us, s.in_use.clone(), s.reserved))
        .collect();
    assert_eq!(
        levels,
        vec![
            (10, vec![0, 0, 0], 0),
            (10, vec![0, 0, 0], 1024),
            (20, vec![0, 100, 0], 1024),
            (30, vec![300, 100, 0], 1024),
            (40, vec![0, 100, 0], 1024),
            (1_000, vec![0, 100, 0], 1024),
        ]
    );
    assert_eq!(timeline.peak_in_use, 400);
    assert_eq!(timeline.peak_in_use_us, 30);
    assert_eq!(timeline.peak_reserved, 1024);
    assert_eq!(timeline.markers.len(), 1);
    assert_eq!(timeline.markers[0].kind, EventKind::PageMade);
    assert_eq!(timeline.markers[0].reserved_after, 1024);
}

#[test]
fn a_truncated_history_is_anchored_at_the_live_slices() {
    // The reservation of "old" (200 bytes) fell out of the ring; its slice is still live.
    let snap = snapshot(
        vec![
            event(50, EventKind::Reserve, 100, "new"),
            event(60, EventKind::Free, 100, "new"),
        ],
        vec![live(0, 200, "old")],
    );
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    let timeline = Timeline::from_snapshot(&snap, &labels, 10);
    let old = labels.series(Some("old"));
    assert!(timeline.samples.iter().all(|s| s.in_use[old] == 200));
    // Reserved is anchored at the page too: 1024 all along.
    assert!(timeline.samples.iter().all(|s| s.reserved == 1024));
    assert_eq!(timeline.peak_in_use, 300);
}

/// A column keeps its highest moment and what holds after it: a reservation freed in
/// the same column is not drawn as held until the next sample (which, before an idle
/// tail, is the snapshot).
#[test]
fn a_column_keeps_what_holds_after_its_last_event() {
    let history = vec![
        event(0, EventKind::Reserve, 100, "x"),
        event(1, EventKind::Free, 100, "x"),
    ];
    let snap = snapshot(history, vec![]);
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    let timeline = Timeline::from_snapshot(&snap, &labels, 4);
    let x = labels.series(Some("x"));
    let column = &timeline.samples[1];
    assert_eq!((column.in_use[x], column.in_use_end[x]), (100, 0));
    assert_eq!(column.bands.main_in_use, 100);
    assert_eq!(column.bands_end.main_in_use, 0);
}

#[test]
fn one_sample_per_column_keeps_the_peak() {
    let mut history = Vec::new();
    for step in 0..1000u64 {
        history.push(event(step * 10, EventKind::Reserve, 1 + step % 7, "x"));
        history.push(event(step * 10 + 5, EventKind::Free, 1 + step % 7, "x"));
    }
    let snap = snapshot(history, vec![]);
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    let timeline = Timeline::from_snapshot(&snap, &labels, 50);
    assert!(timeline.samples.len() <= 52, "{}", timeline.samples.len());
    assert_eq!(timeline.series_max(labels.series(Some("x"))), 7);
    assert!(
        timeline
            .samples
            .windows(2)
            .all(|w| w[0].time_us <= w[1].time_us)
    );
}

#[test]
fn markers_in_one_column_are_merged() {
    let history = (0..100)
        .map(|i| event(i, EventKind::PageMade, 10, "p"))
        .chain([event(500, EventKind::OutOfMemory, 5, "p")])
        .collect();
    let snap = snapshot(history, vec![]);
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    // One column: the quiet stretches after the burst are drawn short, so on more
    // columns the burst would spread over them.
    let timeline = Timeline::from_snapshot(&snap, &labels, 1);
    let made: Vec<&TimelineMarker> = timeline
        .markers
        .iter()
        .filter(|m| m.kind == EventKind::PageMade)
        .collect();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].count, 100);
    assert_eq!(made[0].bytes, 1000);
    assert!(
        timeline
            .markers
            .iter()
            .any(|m| m.kind == EventKind::OutOfMemory)
    );
}

/// A window draws only its part of the history: the first sample at its start with the
/// levels the events before it left, no marker or peak outside it, its end the last
/// sample.
#[test]
fn a_window_keeps_only_its_moments_with_the_levels_before_it() {
    let snap = snapshot(
        vec![
            event(10, EventKind::PageMade, 1024, "a"),
            event(20, EventKind::Reserve, 100, "a"),
            event(30, EventKind::Reserve, 600, "b"),
            event(40, EventKind::Free, 600, "b"),
            event(50, EventKind::Reserve, 200, "c"),
            event(60, EventKind::Free, 200, "c"),
        ],
        vec![live(0, 100, "a")],
    );
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    assert_eq!(Timeline::span_of(&snap), (10, 1_000));
    let timeline = Timeline::from_snapshot_window(&snap, &labels, 100, Some((45, 55)));
    assert_eq!((timeline.start_us, timeline.end_us), (45, 55));
    let first = &timeline.samples[0];
    assert_eq!(first.time_us, 45);
    assert_eq!(first.total_in_use(), 100, "a's 100 bytes, b freed before");
    assert_eq!(first.reserved, 1024, "the page made before the window");
    assert!(
        timeline
            .samples
            .iter()
            .all(|s| (45..=55).contains(&s.time_us))
    );
    assert_eq!(timeline.samples.last().unwrap().time_us, 55);
    // b's 700-byte peak lies before the window: the window's own peak is a and c.
    assert_eq!((timeline.peak_in_use, timeline.peak_in_use_us), (300, 50));
    assert!(
        timeline.markers.is_empty(),
        "the page was made before the window"
    );
    // A window past the history is clamped into it.
    let late = Timeline::from_snapshot_window(&snap, &labels, 100, Some((5_000, 6_000)));
    assert!(late.start_us < late.end_us && late.end_us == 1_000);
}

/// Each band knows the pools whose pages it held: the main memory's used and empty
/// pages, by the pool that made them.
#[test]
fn the_bands_name_the_pools_of_their_pages() {
    let in_pool = |mut e: HistoryEvent, pool: &str, page: u64| {
        e.pool = Some(pool.to_string());
        e.page = Some(page);
        e
    };
    let snap = snapshot(
        vec![
            in_pool(event(10, EventKind::PageMade, 2048, "x"), "adaptive", 7),
            in_pool(event(20, EventKind::Reserve, 100, "x"), "adaptive", 7),
            in_pool(event(30, EventKind::Free, 100, "x"), "adaptive", 7),
            in_pool(event(40, EventKind::PageReleased, 2048, "x"), "adaptive", 7),
        ],
        vec![live(0, 100, "a")],
    );
    let labels = TopLabels::from_snapshot(&snap, 8, None);
    let timeline = Timeline::from_snapshot(&snap, &labels, 100);
    // Stacked order: in use, free inside used pages, empty main pages, ...
    assert_eq!(timeline.band_pools[1], ["adaptive", "sliced"]);
    assert_eq!(timeline.band_pools[2], ["adaptive"]);
    assert!(timeline.band_pools[3..].iter().all(Vec::is_empty));
    // A window after the adaptive page was given back sees only the sliced pool.
    let late = Timeline::from_snapshot_window(&snap, &labels, 100, Some((50, 100)));
    assert_eq!(late.band_pools[1], ["sliced"]);
    assert!(late.band_pools[2].is_empty());
}
