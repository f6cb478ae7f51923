//! Bytes in use and bytes reserved over time, rebuilt from a snapshot's history: the data
//! behind a timeline picture, with no drawing in it.
//!
//! The ring keeps only the newest events, so the levels are anchored at the end rather than
//! the start:
//!
//! 1. The snapshot's live slices give each label's bytes in use at `taken_us`, and its pages
//!    the bytes reserved then.
//! 2. Walking the history forward from 0 gives each label's net change; the level before the
//!    first event is the anchor minus that change (what older, dropped events left behind).
//! 3. Walking forward again from those levels gives every level at every event, ending at the
//!    anchors.
//!
//! The history must record the reservations and frees of every memory the snapshot lists;
//! a memory whose slices have no events shows as a constant level. Levels below zero (a
//! history that disagrees with the slices) are drawn as zero.

use super::history::{EventKind, HistoryEvent};
use super::levels::{clamp, deltas, initial_levels, ordered};
use super::peak::peak_holders;
use super::reserved_bands::{PageLevels, ReservedBands};
use super::snapshot::MemorySnapshot;
#[cfg(doc)]
use super::snapshot::PoolSnapshot;
use super::time_axis::TimeAxis;
use super::top_labels::TopLabels;
use std::collections::BTreeMap;

/// The levels at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineSample {
    /// When, in µs since the client started.
    pub time_us: u64,
    /// Bytes in use in the main memory per series (index as in [`TopLabels::series`]), never
    /// below 0.
    pub in_use: Vec<u64>,
    /// Bytes reserved (all pages of all memories) at `time_us`, never below 0.
    pub reserved: u64,
    /// `reserved` split by what holds it, at `time_us`.
    pub bands: ReservedBands,
    /// The bands after the column's last event (what holds until the next sample).
    pub bands_end: ReservedBands,
    /// The least bytes reserved within this sample's column (the level carried into it
    /// included), so that a dip between two samples is not lost.
    pub reserved_min: u64,
    /// The most bytes reserved within this sample's column.
    pub reserved_max: u64,
    /// Bytes reserved after the column's last event: where the line leaves the column.
    pub reserved_end: u64,
    /// Bytes in use per series after the column's last event: what holds until the next
    /// sample (`in_use` is the column's highest moment).
    pub in_use_end: Vec<u64>,
}

impl TimelineSample {
    /// Bytes in use, all series together.
    pub fn total_in_use(&self) -> u64 {
        self.in_use
            .iter()
            .fold(0u64, |sum, &b| sum.saturating_add(b))
    }
}

/// A page made or released, a cleanup or an out-of-memory, to mark on a timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineMarker {
    /// When, in µs since the client started (the first event it stands for).
    pub time_us: u64,
    /// [`EventKind::PageMade`], [`EventKind::PageReleased`], [`EventKind::Cleanup`] or
    /// [`EventKind::OutOfMemory`].
    pub kind: EventKind,
    /// The event's bytes (summed over the events it stands for).
    pub bytes: u64,
    /// Bytes reserved just after the event, never below 0: where a page marker sits. It lies
    /// within its column's [`reserved_min`](TimelineSample::reserved_min) ..=
    /// [`reserved_max`](TimelineSample::reserved_max), so on the reserved line.
    pub reserved_after: u64,
    /// How many events of this kind, in one column of the timeline, it stands for (≥ 1).
    pub count: u32,
}

/// Bytes in use per label and bytes reserved over time, reduced to at most one sample per
/// column of the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// The series, as [`TopLabels`] names them.
    pub labels: TopLabels,
    /// The samples, in time order: the levels before the first event, then for each column
    /// the moment of its highest total in use, then the levels at `end_us`.
    pub samples: Vec<TimelineSample>,
    /// Markers, in time order, at most one per kind and column.
    pub markers: Vec<TimelineMarker>,
    /// The first event's time (or `taken_us` with no history), in µs; a window's start
    /// when one was asked ([`from_snapshot_window`](Self::from_snapshot_window)).
    pub start_us: u64,
    /// `taken_us`, or the last event's time if later, in µs; a window's end when one was
    /// asked; always > `start_us`.
    pub end_us: u64,
    /// The number of columns the samples were reduced to (at least 1).
    pub columns: usize,
    /// How times spread over the columns: to scale, with quiet stretches drawn short (see
    /// [`TimeAxis`]). Columns are equal slices of its positions.
    pub axis: TimeAxis,
    /// The highest total bytes in use at any event from `start_us` to `end_us` (not only
    /// at the samples kept).
    pub peak_in_use: u64,
    /// When bytes in use first reached `peak_in_use`, in µs.
    pub peak_in_use_us: u64,
    /// What held the memory at the peak: each whole label's bytes in use at
    /// `peak_in_use_us`, largest first (see [`peak_holders`]). They add up to `peak_in_use`
    /// when the history agrees with the slices.
    pub peak_holders: Vec<(String, u64)>,
    /// The highest bytes reserved (every page of every memory) at any event from
    /// `start_us` to `end_us`. A client's `budget().peak_held` can be larger: it counts
    /// since the client started, and keeps given-back pages until the device is done
    /// with them.
    pub peak_reserved: u64,
    /// For each band of [`ReservedBands::stacked`] (same order), the names of the pools
    /// whose pages it held from `start_us` to `end_us` (as [`PoolSnapshot::pool`] and the
    /// events' `pool` name them), sorted; the in-use band and the free bytes inside used
    /// pages both name the pools of the used main pages. At most one name per pool of
    /// the snapshot's memories.
    ///
    /// [`PoolSnapshot::pool`]: super::PoolSnapshot::pool
    pub band_pools: [Vec<String>; 8],
}

/// The kinds a timeline marks.
pub const MARKED_KINDS: [EventKind; 4] = [
    EventKind::PageMade,
    EventKind::PageReleased,
    EventKind::Cleanup,
    EventKind::OutOfMemory,
];

/// The levels as events are applied, and the samples kept so far.
struct Walk<'a> {
    labels: &'a TopLabels,
    levels: Vec<i128>,
    pages: PageLevels,
}

impl Walk<'_> {
    fn reserved(&self) -> u64 {
        self.pages.bands(0).total()
    }

    fn sample(&self, time_us: u64, range: (u64, u64)) -> TimelineSample {
        let in_use: Vec<u64> = self.levels.iter().map(|&level| clamp(level)).collect();
        let total = in_use.iter().fold(0u64, |sum, &b| sum.saturating_add(b));
        let bands = self.pages.bands(total);
        let reserved = bands.total();
        TimelineSample {
            time_us,
            in_use_end: in_use.clone(),
            in_use,
            reserved,
            bands_end: bands,
            bands,
            reserved_min: range.0.min(reserved),
            reserved_max: range.1.max(reserved),
            reserved_end: reserved,
        }
    }

    fn apply(&mut self, event: &HistoryEvent) {
        let (in_use, _) = deltas(event);
        if in_use != 0 {
            self.levels[self.labels.series(event.label.as_deref())] += in_use;
        }
        self.pages.apply(event);
    }
}

/// The span of a timeline of `snapshot` whose events are `events` (time-ordered): see
/// [`Timeline::span_of`]. A snapshot is input (a file): one stamped at the end of time
/// still gets a span.
fn span(snapshot: &MemorySnapshot, events: &[&HistoryEvent]) -> (u64, u64) {
    let start_us = events
        .first()
        .map_or(snapshot.taken_us, |e| e.time_us.min(snapshot.taken_us))
        .min(u64::MAX - 1);
    let last_us = events.last().map_or(0, |e| e.time_us);
    (start_us, snapshot.taken_us.max(last_us).max(start_us + 1))
}

/// The column (of `columns`) a time falls in along `axis`.
fn column_of(time: u64, axis: &TimeAxis, columns: usize) -> usize {
    // The drawn µs, one more than the axis's length, split in `columns`: so the end falls
    // in the last column.
    let drawn = axis.drawn_us() as f64;
    let column = (axis.position(time) * drawn * columns as f64 / (drawn + 1.0)).floor();
    (column as usize).min(columns - 1)
}

impl Timeline {
    /// Rebuilds the levels of `snapshot` for the series of `labels`, keeping at most one
    /// sample per column out of `columns` (at least 1) between the first event and the end.
    ///
    /// # Complexity
    /// O(e log e + e · (t + log p)) for e events, t top labels and p pages.
    pub fn from_snapshot(snapshot: &MemorySnapshot, labels: &TopLabels, columns: usize) -> Self {
        Self::from_snapshot_window(snapshot, labels, columns, None)
    }

    /// The whole span a timeline of `snapshot` covers, `(start_us, end_us)` in µs since
    /// the client started: the first event's time (or `taken_us` with no history) to
    /// `taken_us` or the last event's time if later; `end_us > start_us`.
    ///
    /// # Complexity
    /// O(e log e) for e events.
    pub fn span_of(snapshot: &MemorySnapshot) -> (u64, u64) {
        span(snapshot, &ordered(snapshot))
    }

    /// [`from_snapshot`](Self::from_snapshot) drawn over `window` only, `(from_us, to_us)`
    /// in µs since the client started (the steady part of a run, say): its samples,
    /// markers, peaks and pools lie in it, and its first sample holds the levels the
    /// events before it left. The window is clamped into [`span_of`](Self::span_of) (at
    /// least 1 µs long); `None` draws the whole span.
    ///
    /// # Complexity
    /// O(e log e + e · (t + log p)) for e events, t top labels and p pages.
    pub fn from_snapshot_window(
        snapshot: &MemorySnapshot,
        labels: &TopLabels,
        columns: usize,
        window: Option<(u64, u64)>,
    ) -> Self {
        let columns = columns.max(1);
        let events = ordered(snapshot);
        let (initial, _) = initial_levels(snapshot, &events, None);
        let mut walk = Walk {
            labels,
            levels: vec![0i128; labels.series_count()],
            pages: PageLevels::before(snapshot, &events),
        };
        for (label, level) in &initial {
            walk.levels[labels.series(Some(label.as_str()))] += level;
        }

        let (first_us, last_us) = span(snapshot, &events);
        let (start_us, end_us) = match window {
            None => (first_us, last_us),
            Some((from, to)) => {
                let start = from.clamp(first_us, last_us - 1);
                (start, to.clamp(start + 1, last_us))
            }
        };
        // The events before the window only set the levels it starts with.
        let mut index = events.partition_point(|e| e.time_us < start_us);
        for event in &events[..index] {
            walk.apply(event);
        }
        walk.pages.watch();
        let inside = events.partition_point(|e| e.time_us <= end_us);
        let events = &events[..inside];
        let times: Vec<u64> = events[index..].iter().map(|e| e.time_us).collect();
        let axis = TimeAxis::compressing(&times, start_us, end_us);

        let first = walk.reserved();
        let mut samples = vec![walk.sample(start_us, (first, first))];
        let mut peak_in_use = samples[0].total_in_use();
        let mut peak_in_use_us = start_us;
        let mut peak_reserved = samples[0].reserved;
        // The best (highest total in use) sample of the current column, and its column.
        let mut column_best: Option<(usize, TimelineSample)> = None;
        // The least and most reserved in the current column so far.
        let mut range = (first, first);
        let mut markers: Vec<TimelineMarker> = Vec::new();
        // For each marked kind, the column and index of its latest marker.
        let mut last_marker: BTreeMap<EventKind, (usize, usize)> = BTreeMap::new();

        while index < events.len() {
            let time_us = events[index].time_us;
            let column = column_of(time_us, &axis, columns);
            if column_best.as_ref().is_some_and(|(c, _)| *c != column) {
                let carried = walk.reserved();
                range = (carried, carried);
            }
            while index < events.len() && events[index].time_us == time_us {
                let event = events[index];
                walk.apply(event);
                let reserved = walk.reserved();
                range = (range.0.min(reserved), range.1.max(reserved));
                if MARKED_KINDS.contains(&event.kind) {
                    match last_marker.get(&event.kind) {
                        Some(&(marker_column, at)) if marker_column == column => {
                            let marker = &mut markers[at];
                            marker.count = marker.count.saturating_add(1);
                            marker.bytes = marker.bytes.saturating_add(event.bytes);
                            marker.reserved_after = reserved;
                        }
                        _ => {
                            last_marker.insert(event.kind, (column, markers.len()));
                            markers.push(TimelineMarker {
                                time_us,
                                kind: event.kind,
                                bytes: event.bytes,
                                reserved_after: reserved,
                                count: 1,
                            });
                        }
                    }
                }
                index += 1;
            }
            let now = walk.sample(time_us, range);
            let (end_levels, end_bands) = (now.in_use.clone(), now.bands);
            let total = now.total_in_use();
            if total > peak_in_use {
                peak_in_use = total;
                peak_in_use_us = time_us;
            }
            peak_reserved = peak_reserved.max(now.reserved);
            match &mut column_best {
                Some((best_column, best)) if *best_column == column => {
                    if total > best.total_in_use() {
                        *best = now;
                    }
                    best.reserved_min = range.0;
                    best.reserved_max = range.1;
                    best.reserved_end = walk.reserved();
                    best.in_use_end = end_levels;
                    best.bands_end = end_bands;
                }
                _ => {
                    if let Some((_, best)) = column_best.take() {
                        samples.push(best);
                    }
                    column_best = Some((column, now));
                }
            }
        }
        if let Some((_, best)) = column_best {
            samples.push(best);
        }
        let end = walk.reserved();
        let last = walk.sample(end_us, (end, end));
        if last.total_in_use() > peak_in_use {
            peak_in_use = last.total_in_use();
            peak_in_use_us = end_us;
        }
        peak_reserved = peak_reserved.max(last.reserved);
        samples.push(last);

        Timeline {
            labels: labels.clone(),
            samples,
            markers,
            start_us,
            end_us,
            columns,
            axis,
            peak_in_use,
            peak_in_use_us,
            peak_holders: peak_holders(snapshot, peak_in_use_us),
            peak_reserved,
            band_pools: walk.pages.band_pools(),
        }
    }

    /// The highest bytes in use of one series over the samples kept.
    pub fn series_max(&self, series: usize) -> u64 {
        self.samples
            .iter()
            .filter_map(|sample| sample.in_use.get(series).copied())
            .max()
            .unwrap_or(0)
    }

    /// The column a time falls in (`0 .. columns`), as the samples were reduced.
    pub fn column_of(&self, time_us: u64) -> usize {
        column_of(time_us, &self.axis, self.columns)
    }
}
