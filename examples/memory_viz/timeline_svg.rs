//! timeline.svg: bytes in use over time stacked by label, bytes reserved as a line, and
//! markers for pages made and given back, cleanups and out-of-memory.

use crate::legend::{self, Entry, Swatch};
use crate::style::{self, INK, MUTED, counted};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::error::Error;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::{EventKind, MemorySnapshot, Timeline, TopLabels};

/// Picture size, in pixels: the least height (a long legend makes it taller).
pub const WIDTH: u32 = 1400;
const HEIGHT: u32 = 780;
/// Width of the legend column on the right, in pixels.
pub const LEGEND: u32 = 380;
/// Height of the title band, in pixels.
const TITLE: u32 = 84;
/// Timeline samples (about one per pixel of the plot).
const COLUMNS: usize = 1000;
/// Where the legend's first heading sits, and the gap before the second, in pixels.
const LEGEND_TOP: i32 = 24;
const LEGEND_GAP: i32 = 14;

const MIB: f64 = (1u64 << 20) as f64;

/// `(time, value)` points that hold each value until the next sample's time.
fn steps(times: &[f64], values: &[f64]) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(times.len() * 2);
    for (i, (&t, &v)) in times.iter().zip(values).enumerate() {
        points.push((t, v));
        if let Some(&next) = times.get(i + 1) {
            points.push((next, v));
        }
    }
    points
}

/// Draws the timeline of `snapshot` with the series of `labels`; returns the SVG text.
pub fn render(snapshot: &MemorySnapshot, labels: &TopLabels) -> Result<String, Box<dyn Error>> {
    let timeline = Timeline::from_snapshot(snapshot, labels, COLUMNS);
    let (series, marks) = legend_entries(&timeline);
    let rows = legend::column_rows(&series, LEGEND_TEXT) + legend::column_rows(&marks, LEGEND_TEXT);
    // Two headings and the rows, below the title band, and a margin.
    let legend_height = LEGEND_TOP + 2 * legend::ROW + LEGEND_GAP + rows * legend::ROW + 16;
    let height = HEIGHT.max(TITLE + legend_height.max(0) as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (title, body) = root.split_vertically(TITLE);
        draw_title(&title, snapshot, &timeline)?;
        let (plot, side) = body.split_horizontally(WIDTH - LEGEND);
        draw_plot(&plot, &timeline)?;
        draw_legend(&side, &series, &marks)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_title(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    snapshot: &MemorySnapshot,
    timeline: &Timeline,
) -> Result<(), Box<dyn Error>> {
    area.draw(&Text::new(
        "Bytes in use by label over time, and bytes reserved",
        (20, 20),
        style::bold(22.0, &INK),
    ))?;
    let peaks = format!(
        "peak in use {} at {:.1} ms · peak reserved {}",
        format_bytes(timeline.peak_in_use),
        timeline.peak_in_use_us as f64 / 1000.0,
        format_bytes(timeline.peak_reserved),
    );
    let mut notes = format!("{} events", snapshot.history.len());
    if snapshot.history_dropped > 0 {
        notes.push_str(&format!(
            " kept, {} older ones dropped: the levels before the first come from the live slices",
            snapshot.history_dropped
        ));
    }
    if let Some(depth) = timeline.labels.depth() {
        notes.push_str(&style::grouping(depth));
    }
    let width = f64::from(WIDTH) - 40.0;
    for (line, y) in [(peaks, 46), (notes, 68)] {
        area.draw(&Text::new(
            style::fit(&line, 16.0, width),
            (20, y),
            style::text(16.0, &MUTED),
        ))?;
    }
    Ok(())
}

fn draw_plot(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    timeline: &Timeline,
) -> Result<(), Box<dyn Error>> {
    let labels = &timeline.labels;
    let times: Vec<f64> = timeline
        .samples
        .iter()
        .map(|s| s.time_us as f64 / 1000.0)
        .collect();
    let x_range = timeline.start_us as f64 / 1000.0..timeline.end_us as f64 / 1000.0;
    let top = timeline.peak_in_use.max(timeline.peak_reserved) as f64 / MIB;
    let y_max = if top > 0.0 { top * 1.08 } else { 1.0 };

    let mut chart = ChartBuilder::on(area)
        .margin_left(10)
        .margin_right(20)
        .margin_top(10)
        .margin_bottom(10)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range.clone(), 0.0..y_max)?;
    let y_format = |v: &f64| style::mib_label(*v, y_max);
    let x_format = |v: &f64| format!("{v:.0}");
    chart
        .configure_mesh()
        .x_desc("time (ms since the client started)")
        .y_desc("MiB")
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style((style::FAMILY, 15.0))
        .axis_desc_style((style::FAMILY, 16.0))
        .light_line_style(RGBColor(0xF2, 0xF2, 0xF2))
        .bold_line_style(RGBColor(0xDD, 0xDD, 0xDD))
        .draw()?;

    // Stacked areas: the cumulative sum of the visible series, the top one drawn first so
    // each lower one covers the bottom of those above it.
    let visible: Vec<usize> = (0..labels.series_count())
        .filter(|&series| timeline.series_max(series) > 0)
        .collect();
    let mut cumulative = vec![vec![0.0f64; times.len()]; visible.len()];
    for (i, sample) in timeline.samples.iter().enumerate() {
        let mut sum = 0.0;
        for (row, &series) in visible.iter().enumerate() {
            sum += sample.in_use[series] as f64 / MIB;
            cumulative[row][i] = sum;
        }
    }
    for (row, &series) in visible.iter().enumerate().rev() {
        let color = style::series_color(series, labels.other());
        chart.draw_series(AreaSeries::new(
            steps(&times, &cumulative[row]),
            0.0,
            color.filled(),
        ))?;
    }

    // Markers that span the plot: cleanups (dashed) and out-of-memory (solid).
    for marker in &timeline.markers {
        let t = marker.time_us as f64 / 1000.0;
        match marker.kind {
            EventKind::Cleanup => {
                chart.draw_series(std::iter::once(DashedPathElement::new(
                    vec![(t, 0.0), (t, y_max)],
                    6,
                    4,
                    style::CLEANUP.stroke_width(2),
                )))?;
            }
            EventKind::OutOfMemory => {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(t, 0.0), (t, y_max)],
                    style::OUT_OF_MEMORY.stroke_width(2),
                )))?;
            }
            _ => {}
        }
    }

    let reserved: Vec<f64> = timeline
        .samples
        .iter()
        .map(|s| s.reserved as f64 / MIB)
        .collect();
    chart.draw_series(LineSeries::new(
        steps(&times, &reserved),
        style::RESERVED.stroke_width(2),
    ))?;

    // Page markers sit on the reserved line.
    for marker in &timeline.markers {
        let at = (
            marker.time_us as f64 / 1000.0,
            marker.reserved_after as f64 / MIB,
        );
        match marker.kind {
            EventKind::PageMade => {
                chart.draw_series(std::iter::once(
                    EmptyElement::at(at) + legend::up(style::PAGE_MADE),
                ))?;
            }
            EventKind::PageReleased => {
                chart.draw_series(std::iter::once(
                    EmptyElement::at(at) + legend::down(style::PAGE_RELEASED),
                ))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The width of the legend's entries (swatch and text), in pixels.
const LEGEND_TEXT: i32 = LEGEND as i32 - 24;

/// The legend's two columns: the label series with bytes in use (top of the stack first),
/// then the reserved line and each kind of marker that occurs (or a "none" line).
fn legend_entries(timeline: &Timeline) -> (Vec<Entry>, Vec<Entry>) {
    let labels = &timeline.labels;
    // Top of the stack first, as the areas are stacked.
    let series: Vec<Entry> = (0..labels.series_count())
        .rev()
        .filter_map(|series| {
            let peak = timeline.series_max(series);
            (peak > 0).then(|| Entry {
                swatch: Swatch::Fill(style::series_color(series, labels.other())),
                text: format!("{} ({})", labels.name(series), style::bytes(peak)),
            })
        })
        .collect();

    let count = |kind: EventKind| -> (u64, u64) {
        timeline
            .markers
            .iter()
            .filter(|m| m.kind == kind)
            .fold((0, 0), |(n, bytes), m| {
                (n + u64::from(m.count), bytes + m.bytes)
            })
    };
    let mut marks = vec![Entry {
        swatch: Swatch::Line(style::RESERVED),
        text: format!("reserved (peak {})", style::bytes(timeline.peak_reserved)),
    }];
    let kinds = [
        (EventKind::PageMade, Swatch::Up(style::PAGE_MADE)),
        (EventKind::PageReleased, Swatch::Down(style::PAGE_RELEASED)),
        (EventKind::Cleanup, Swatch::Dashed(style::CLEANUP)),
        (EventKind::OutOfMemory, Swatch::Line(style::OUT_OF_MEMORY)),
    ];
    for (kind, swatch) in kinds {
        let (n, bytes) = count(kind);
        if n == 0 {
            continue;
        }
        let bytes = style::bytes(bytes);
        let text = match kind {
            EventKind::PageMade => format!("{} made ({bytes})", counted(n, "page", "pages")),
            EventKind::PageReleased => {
                format!("{} given back ({bytes})", counted(n, "page", "pages"))
            }
            EventKind::Cleanup => {
                format!("{} ({bytes} released)", counted(n, "cleanup", "cleanups"))
            }
            _ => format!(
                "{} ({bytes} asked)",
                counted(n, "out-of-memory failure", "out-of-memory failures")
            ),
        };
        marks.push(Entry { swatch, text });
    }
    if marks.len() == 1 {
        marks.push(Entry {
            swatch: Swatch::Blank,
            text: "no pages made or given back, cleanups or out-of-memory failures recorded"
                .to_string(),
        });
    }
    (series, marks)
}

fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    series: &[Entry],
    marks: &[Entry],
) -> Result<(), Box<dyn Error>> {
    area.draw(&Text::new(
        "in use, by label (peak)",
        (10, LEGEND_TOP),
        style::bold(16.0, &INK),
    ))?;
    let y = legend::draw_column(area, series, (10, LEGEND_TOP + legend::ROW), LEGEND_TEXT)?;
    area.draw(&Text::new(
        "reserved and events",
        (10, y + LEGEND_GAP),
        style::bold(16.0, &INK),
    ))?;
    legend::draw_column(area, marks, (10, y + LEGEND_GAP + legend::ROW), LEGEND_TEXT)?;
    Ok(())
}
