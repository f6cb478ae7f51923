//! timeline.svg: what held the memory over time. Bytes in use of the main memory stacked
//! by label, and above them the rest of reserved as bands (free bytes inside used main
//! pages, empty main pages, readback staging, upload staging), so the top of the stack is
//! the reserved line. The peak is marked with what held it; pages made and given back sit
//! on the reserved line, which shows the least and the most reserved of every column.

use crate::axis;
use crate::legend::{DOWN, UP};
use crate::peak_svg;
use crate::style::{self, BODY_SIZE, INK, MUTED, SMALL_SIZE, TITLE_SIZE, counted};
use crate::svg::{Anchor, Fill, Svg, Weight};
use crate::time_axis_svg;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::{
    EventKind, MemorySnapshot, ReservedBands, TimeAxis, Timeline, TopLabels,
};

/// Picture width, in pixels: a README column.
pub const WIDTH: f64 = 880.0;
pub const MARGIN: f64 = 12.0;
/// The plot's left edge (room for byte labels), right edge and height, in pixels.
pub const PLOT_X: f64 = 74.0;
const PLOT_RIGHT: f64 = WIDTH - 16.0;
pub const PLOT_HEIGHT: f64 = 300.0;
/// The plot's width in pixels, and so its number of columns: one sample per pixel.
pub const PLOT_WIDTH: f64 = PLOT_RIGHT - PLOT_X;
/// The number of columns the timeline is reduced to.
const COLUMNS: f64 = PLOT_WIDTH;
/// Room above the plot for the peak's text.
const PEAK_ROOM: f64 = 22.0;

/// One layer of the stack: its fill, its bytes at each sample, and its hover text.
pub struct Layer {
    pub fill: Fill,
    pub name: String,
    /// Its bytes at each sample's moment (the column's highest in use).
    pub values: Vec<u64>,
    /// Its bytes after each sample's column: what holds until the next sample.
    pub ends: Vec<u64>,
    pub class: &'static str,
    /// The pools whose pages a band held (empty for a label's series).
    pub pools: Vec<String>,
}

/// Maps times and bytes to pixels.
pub struct Scale {
    /// Time along the plot's width: quiet stretches drawn short (see `TimeAxis`).
    pub axis: TimeAxis,
    pub top: f64,
    y_max: f64,
}

impl Scale {
    pub fn x(&self, time_us: u64) -> f64 {
        PLOT_X + self.axis.position(time_us) * PLOT_WIDTH
    }

    pub fn y(&self, bytes: f64) -> f64 {
        self.top + PLOT_HEIGHT - bytes / self.y_max * PLOT_HEIGHT
    }
}

pub fn ms(time_us: u64) -> String {
    format!("{:.1} ms", time_us as f64 / 1000.0)
}

/// One band's bytes in a set of bands.
type BandValue = fn(&ReservedBands) -> u64;

/// The layers bottom up: each label series with bytes, then the bands of reserved.
fn layers(timeline: &Timeline) -> Vec<Layer> {
    let labels = &timeline.labels;
    let mut fills = style::series_fills(labels);
    let visible: Vec<usize> = (0..labels.series_count())
        .filter(|&series| timeline.series_max(series) > 0)
        .collect();
    style::keep_apart(&mut fills, &visible);
    let mut layers: Vec<Layer> = visible
        .iter()
        .map(|&series| Layer {
            fill: fills[series],
            name: labels.name(series).to_string(),
            values: timeline.samples.iter().map(|s| s.in_use[series]).collect(),
            ends: timeline
                .samples
                .iter()
                .map(|s| s.in_use_end[series])
                .collect(),
            class: "series",
            pools: Vec::new(),
        })
        .collect();
    // Each band with its index in `ReservedBands::stacked` order (1..=7; 0 is in use).
    let bands: [(Fill, BandValue, &str); 7] = [
        (
            Fill::Solid(style::FREE),
            |b| b.main_free_in_used_pages,
            "main memory free inside used pages (padding and free ranges)",
        ),
        (
            style::EMPTY_PAGES,
            |b| b.main_empty_pages,
            "empty main pages (a cleanup gives them back)",
        ),
        (
            Fill::Solid(style::STAGING),
            |b| b.staging,
            "readback staging pages in use",
        ),
        (
            style::idle(style::STAGING),
            |b| b.staging_idle,
            "idle readback staging pages (holding no slice)",
        ),
        (
            Fill::Solid(style::UPLOAD),
            |b| b.upload,
            "upload staging pages in use",
        ),
        (
            style::idle(style::UPLOAD),
            |b| b.upload_idle,
            "idle upload staging pages (holding no slice)",
        ),
        (
            Fill::Hatch {
                base: style::FREE,
                ink: style::OTHER,
                angle: 135,
            },
            |b| b.other_memories,
            "pages of other memories",
        ),
    ];
    for (band, (fill, value, name)) in bands.into_iter().enumerate() {
        let values: Vec<u64> = timeline.samples.iter().map(|s| value(&s.bands)).collect();
        let ends: Vec<u64> = timeline
            .samples
            .iter()
            .map(|s| value(&s.bands_end))
            .collect();
        if values.iter().chain(&ends).any(|&v| v > 0) {
            layers.push(Layer {
                fill,
                name: name.to_string(),
                values,
                ends,
                class: "band",
                pools: timeline.band_pools[band + 1].clone(),
            });
        }
    }
    layers
}

/// Draws the timeline of `snapshot` with the series of `labels`, over `window` (µs since
/// the client started, within the history) when given; returns the SVG text.
pub fn render(snapshot: &MemorySnapshot, labels: &TopLabels, window: Option<(u64, u64)>) -> String {
    let timeline = Timeline::from_snapshot_window(snapshot, labels, COLUMNS as usize, window);
    let mut svg = Svg::new(WIDTH, 0.0);
    let mut y = draw_title(&mut svg, snapshot, &timeline, window.is_some());
    let top = y + PEAK_ROOM;
    let peak = timeline.peak_in_use.max(timeline.peak_reserved).max(1);
    let scale = Scale {
        axis: timeline.axis.clone(),
        top,
        y_max: peak as f64 * 1.05,
    };
    let layers = layers(&timeline);
    // Without events there is no time to spread: only the moment it was taken is known.
    let history = !snapshot.history.is_empty();
    draw_axes(&mut svg, &scale, &timeline, history);
    draw_layers(&mut svg, &scale, &timeline, &layers);
    // Over the layers and the axis line: a break's mark interrupts both.
    time_axis_svg::draw_breaks(&mut svg, &scale, top + PLOT_HEIGHT);
    if !history {
        draw_no_history(&mut svg, &scale);
    }
    draw_event_lines(&mut svg, &scale, &timeline);
    draw_reserved(&mut svg, &scale, &timeline);
    draw_page_markers(&mut svg, &scale, &timeline);
    peak_svg::draw_peak(&mut svg, &scale, &timeline);
    y = top + PLOT_HEIGHT + 40.0;
    y = peak_svg::draw_holders(&mut svg, &timeline, &layers, y);
    y = crate::timeline_key::draw_legend(&mut svg, &timeline, &layers, y + 8.0);
    svg.set_height(y + MARGIN);
    svg.finish()
}

/// The title and notes; returns the y below them.
fn draw_title(svg: &mut Svg, snapshot: &MemorySnapshot, timeline: &Timeline, window: bool) -> f64 {
    svg.text(
        (MARGIN, 18.0),
        TITLE_SIZE,
        Weight::Bold,
        Anchor::Start,
        INK,
        "Memory over time: what held it, and why reserved is larger than in use",
        "",
    );
    let mut notes = vec![
        "In use: requested bytes of live slices in the main memory, stacked by label. Above it, the rest of \
         reserved: free bytes inside used main pages, empty main pages, readback and upload staging \
         (hatched where idle). \
         The black line is reserved (every page of every memory); where it is vertical, it spans the least \
         and the most reserved of that pixel."
            .to_string(),
        PEAK_RESERVED.to_string(),
    ];
    let mut counts = format!(
        "{} events · peak in use {} at {} · peak reserved {}",
        snapshot.history.len(),
        format_bytes(timeline.peak_in_use),
        ms(timeline.peak_in_use_us),
        format_bytes(timeline.peak_reserved),
    );
    if window {
        let (start, end) = Timeline::span_of(snapshot);
        counts.push_str(&format!(
            " · window {} to {} of the history's {} to {}",
            ms(timeline.start_us),
            ms(timeline.end_us),
            ms(start),
            ms(end)
        ));
    }
    if snapshot.history_dropped > 0 {
        counts.push_str(&format!(
            " · {} older events dropped: the levels before the first come from the live slices",
            snapshot.history_dropped
        ));
    }
    if let Some(depth) = timeline.labels.depth() {
        counts.push_str(&style::grouping(depth));
    }
    notes.push(counts);
    let mut y = 38.0;
    for note in notes {
        for line in style::wrap(&note, SMALL_SIZE, WIDTH - 2.0 * MARGIN) {
            svg.text(
                (MARGIN, y),
                SMALL_SIZE,
                Weight::Normal,
                Anchor::Start,
                MUTED,
                &line,
                "",
            );
            y += 15.0;
        }
    }
    y
}

/// What the title's "peak reserved" counts, and why a memory summary's "peak held" of the
/// same run can be larger.
pub const PEAK_RESERVED: &str = "Peak reserved: the most bytes of pages of every memory at the events drawn. \
     A memory summary's \"peak held\" (the budget's) counts since the client started and keeps \
     given-back pages until the device is done with them, so it can be larger.";

/// What a snapshot with no events says across its plot: history was off, and how to turn
/// it on (the text the tests look for is "history was off" and both ways).
pub const NO_HISTORY: [&str; 2] = [
    "No history in this snapshot: history was off, so only the moment it was taken is drawn.",
    "Turn it on before the work: client.record_history(10_000), or [memory] history = 10000 in the config.",
];

/// The note of [`NO_HISTORY`], centred in the plot on a white box.
fn draw_no_history(svg: &mut Svg, scale: &Scale) {
    let width = PLOT_WIDTH - 40.0;
    let lines: Vec<String> = NO_HISTORY
        .iter()
        .flat_map(|line| style::wrap(line, BODY_SIZE, width - 16.0))
        .collect();
    let height = lines.len() as f64 * 17.0 + 10.0;
    let top = scale.top + (PLOT_HEIGHT - height) / 2.0;
    svg.open_group(r#"class="no-history""#, None);
    svg.rect(
        PLOT_X + 20.0,
        top,
        width,
        height,
        Fill::Solid(crate::svg::Rgb(0xFF, 0xFF, 0xFF)),
        "",
        None,
    );
    svg.frame(PLOT_X + 20.0, top, width, height, MUTED, "");
    for (row, line) in lines.iter().enumerate() {
        svg.text(
            (PLOT_X + PLOT_WIDTH / 2.0, top + 13.5 + row as f64 * 17.0),
            BODY_SIZE,
            Weight::Normal,
            Anchor::Middle,
            INK,
            line,
            "",
        );
    }
    svg.close_group();
}

/// The plot's frame, byte ticks and (when there is `history` to spread over time) time
/// ticks.
fn draw_axes(svg: &mut Svg, scale: &Scale, timeline: &Timeline, history: bool) {
    let bottom = scale.top + PLOT_HEIGHT;
    svg.rect(
        PLOT_X,
        scale.top,
        PLOT_WIDTH,
        PLOT_HEIGHT,
        Fill::Solid(crate::svg::Rgb(0xFF, 0xFF, 0xFF)),
        &format!(
            r#"class="plot" data-start-us="{}" data-end-us="{}" data-columns="{}""#,
            timeline.start_us, timeline.end_us, timeline.columns
        ),
        None,
    );
    for (bytes, label) in axis::byte_ticks(scale.y_max as u64, 6) {
        let y = scale.y(bytes);
        svg.polyline(
            &[(PLOT_X, y), (PLOT_RIGHT, y)],
            style::GRID,
            1.0,
            None,
            "",
            None,
        );
        svg.text(
            (PLOT_X - 6.0, y),
            SMALL_SIZE,
            Weight::Normal,
            Anchor::End,
            MUTED,
            &label,
            "",
        );
    }
    if history {
        time_axis_svg::draw_time_ticks(svg, scale, bottom);
    }
    svg.polyline(
        &[(PLOT_X, bottom), (PLOT_RIGHT, bottom)],
        MUTED,
        1.0,
        None,
        "",
        None,
    );
    svg.polyline(
        &[(PLOT_X, scale.top), (PLOT_X, bottom)],
        MUTED,
        1.0,
        None,
        "",
        None,
    );
    svg.text(
        ((PLOT_X + PLOT_RIGHT) / 2.0, bottom + 28.0),
        SMALL_SIZE,
        Weight::Normal,
        Anchor::Middle,
        MUTED,
        if history && !scale.axis.breaks.is_empty() {
            "time since the client started; ≈ marks a quiet stretch (no event) drawn short"
        } else if history {
            "time since the client started"
        } else {
            "no time axis: the snapshot holds no history events"
        },
        "",
    );
}

/// Step outlines: each sample's value (`ys`) across its column, then its column's end
/// value (`ends`) held until the next sample.
fn steps(xs: &[f64], ys: &[f64], ends: &[f64], right: f64) -> Vec<(f64, f64)> {
    let column = PLOT_WIDTH / COLUMNS;
    let mut points = Vec::with_capacity(xs.len() * 4);
    for (i, ((&x, &y), &end)) in xs.iter().zip(ys).zip(ends).enumerate() {
        let next = xs.get(i + 1).copied().unwrap_or(right);
        let edge = (x + column).min(next).max(x);
        points.push((x, y));
        points.push((edge, y));
        points.push((edge, end));
        points.push((next, end));
    }
    points.dedup();
    points
}

fn draw_layers(svg: &mut Svg, scale: &Scale, timeline: &Timeline, layers: &[Layer]) {
    let xs: Vec<f64> = timeline
        .samples
        .iter()
        .map(|s| scale.x(s.time_us))
        .collect();
    let right = xs.last().copied().unwrap_or(PLOT_RIGHT);
    let mut below = vec![0.0f64; xs.len()];
    let mut below_end = vec![0.0f64; xs.len()];
    for (stack, layer) in layers.iter().enumerate() {
        let stack_on = |base: &[f64], values: &[u64]| -> Vec<f64> {
            base.iter()
                .zip(values)
                .map(|(b, &v)| b + v as f64)
                .collect()
        };
        let above = stack_on(&below, &layer.values);
        let above_end = stack_on(&below_end, &layer.ends);
        let y = |levels: &[f64]| -> Vec<f64> { levels.iter().map(|&b| scale.y(b)).collect() };
        let mut outline = steps(&xs, &y(&above), &y(&above_end), right);
        let mut lower = steps(&xs, &y(&below), &y(&below_end), right);
        lower.reverse();
        outline.extend(lower);
        let peak = layer.values.iter().copied().max().unwrap_or(0);
        let title = format!(
            "{}\nup to {} ({} bytes)",
            layer.name,
            format_bytes(peak),
            peak
        );
        svg.area(
            &outline,
            layer.fill,
            &format!(r#"class="{}" data-stack="{stack}""#, layer.class),
            Some(&title),
        );
        below = above;
        below_end = above_end;
    }
}

/// Cleanups (dashed) and out-of-memory failures (solid) across the plot.
fn draw_event_lines(svg: &mut Svg, scale: &Scale, timeline: &Timeline) {
    let bottom = scale.top + PLOT_HEIGHT;
    for marker in &timeline.markers {
        let x = scale.x(marker.time_us);
        let (color, dash, what) = match marker.kind {
            EventKind::Cleanup => (
                style::CLEANUP,
                Some("5 3"),
                format!(
                    "{} at {}: {} released",
                    counted(marker.count, "cleanup", "cleanups"),
                    ms(marker.time_us),
                    format_bytes(marker.bytes)
                ),
            ),
            EventKind::OutOfMemory => (
                style::OUT_OF_MEMORY,
                None,
                format!(
                    "{} at {}: {} asked",
                    counted(
                        marker.count,
                        "out-of-memory failure",
                        "out-of-memory failures"
                    ),
                    ms(marker.time_us),
                    format_bytes(marker.bytes)
                ),
            ),
            _ => continue,
        };
        svg.polyline(
            &[(x, scale.top), (x, bottom)],
            color,
            2.0,
            dash,
            r#"class="event-line""#,
            Some(&what),
        );
    }
}

/// The reserved line: per column, from the level carried in down or up to the least and the
/// most reserved within it, then to where it leaves the column.
fn draw_reserved(svg: &mut Svg, scale: &Scale, timeline: &Timeline) {
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(timeline.samples.len() * 4);
    let mut carried: Option<u64> = None;
    for sample in &timeline.samples {
        let x = scale.x(sample.time_us);
        if let Some(level) = carried {
            points.push((x, scale.y(level as f64)));
        }
        for level in [
            sample.reserved_min,
            sample.reserved_max,
            sample.reserved_end,
        ] {
            points.push((x, scale.y(level as f64)));
        }
        carried = Some(sample.reserved_end);
    }
    // Consecutive equal points add nothing.
    points.dedup();
    let title = format!(
        "reserved: every page of every memory\npeak {} ({} bytes)",
        format_bytes(timeline.peak_reserved),
        timeline.peak_reserved
    );
    svg.polyline(
        &points,
        style::RESERVED,
        1.5,
        None,
        r#"class="reserved-line""#,
        Some(&title),
    );
}

fn draw_page_markers(svg: &mut Svg, scale: &Scale, timeline: &Timeline) {
    for marker in &timeline.markers {
        let (shape, color, verb): (&[(f64, f64)], _, _) = match marker.kind {
            EventKind::PageMade => (&UP, style::PAGE_MADE, "made"),
            EventKind::PageReleased => (&DOWN, style::PAGE_RELEASED, "given back"),
            _ => continue,
        };
        let title = format!(
            "{} {verb} at {} ({}); reserved after: {}",
            counted(marker.count, "page", "pages"),
            ms(marker.time_us),
            format_bytes(marker.bytes),
            format_bytes(marker.reserved_after)
        );
        svg.marker(
            (
                scale.x(marker.time_us),
                scale.y(marker.reserved_after as f64),
            ),
            shape,
            color,
            r#"class="page-marker""#,
            Some(&title),
        );
    }
}
