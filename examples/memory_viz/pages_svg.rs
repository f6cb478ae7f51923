//! pages.svg: one bar per page, grouped by memory and pool, each slice drawn to scale and
//! coloured by label, free space light grey, padding dark.
//!
//! Each bar is as many pixels wide as its page has columns in
//! [`page_runs`]; a pool's largest page gets the full bar width and smaller pages of the
//! same pool are drawn to the same scale. Every bar has an outline in [`style::PAGE_FRAME`],
//! a colour nothing else uses, so the bars can be counted in the SVG.

use crate::legend::{self, Entry, Swatch};
use crate::style::{self, INK, MUTED, counted};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::error::Error;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::{MemorySnapshot, PageSnapshot, PageStats, RunFill, TopLabels, page_runs};

pub const WIDTH: u32 = 1400;
const MARGIN: i32 = 16;
/// The caption column (pool-relative page id and size), left of the bars.
const CAPTION_WIDTH: i32 = 160;
/// Where bars start, and the widest bar, in pixels.
const BAR_X: i32 = MARGIN + CAPTION_WIDTH + 8;
const BAR_WIDTH: i32 = 760;
/// The statistics column, right of the bars.
const STATS_X: i32 = BAR_X + BAR_WIDTH + 12;
const STATS_WIDTH: i32 = WIDTH as i32 - MARGIN - STATS_X;
/// Vertical space of one page row, of its bar, of a memory heading and of a pool heading.
const PAGE_ROW: i32 = 26;
const BAR_HEIGHT: i32 = 18;
const MEMORY_ROW: i32 = 34;
const POOL_ROW: i32 = 28;
/// Where the legend starts.
const LEGEND_Y: i32 = 104;

/// Text sizes (plotters sizes).
const CAPTION_SIZE: f64 = 15.0;

/// The legend entries: each series that some live slice uses, then padding and free.
fn legend_entries(snapshot: &MemorySnapshot, labels: &TopLabels) -> Vec<Entry> {
    let mut used = vec![false; labels.series_count()];
    for memory in &snapshot.memories {
        for pool in &memory.pools {
            for page in &pool.pages {
                for slice in page.slices.iter().filter(|s| s.live) {
                    used[labels.series(slice.label.as_deref())] = true;
                }
            }
        }
    }
    let mut entries: Vec<Entry> = used
        .iter()
        .enumerate()
        .filter(|&(_, &used)| used)
        .map(|(series, _)| Entry {
            swatch: Swatch::Fill(style::series_color(series, labels.other())),
            text: labels.name(series).to_string(),
        })
        .collect();
    // "padding" last: its long text is where the width estimate leaves the widest gap.
    entries.push(Entry {
        swatch: Swatch::Fill(style::FREE),
        text: "free".to_string(),
    });
    entries.push(Entry {
        swatch: Swatch::Fill(style::PADDING),
        text: "padding (dark band, height = its share)".to_string(),
    });
    entries
}

/// The legend's height in pixels (the flow's rows), without drawing it.
fn legend_rows(entries: &[Entry]) -> i32 {
    let width = WIDTH as i32 - 2 * MARGIN;
    let widths: Vec<i32> = entries
        .iter()
        .map(|e| {
            style::text_width(
                &style::fit(&e.text, legend::SIZE, f64::from(width)),
                legend::SIZE,
            )
            .ceil() as i32
        })
        .collect();
    legend::flow_layout(&widths, width)
        .iter()
        .map(|&(_, row)| row + 1)
        .max()
        .unwrap_or(0)
}

/// One line about a page: live slices, how full it is, and its free ranges.
fn stats_line(page: &PageSnapshot) -> String {
    let stats = PageStats::of(page);
    if stats.live_slices == 0 {
        return "empty".to_string();
    }
    let used = if page.size == 0 {
        0.0
    } else {
        stats.bytes_in_use.saturating_add(stats.bytes_padding) as f64 * 100.0 / page.size as f64
    };
    let free = match stats.free_ranges {
        0 => "no free range".to_string(),
        1 => format!("1 free range of {}", format_bytes(stats.largest_free)),
        n => format!(
            "{n} free ranges, largest {}",
            format_bytes(stats.largest_free)
        ),
    };
    format!(
        "{} · {used:.0}% used · {free}",
        counted(stats.live_slices, "slice", "slices"),
    )
}

/// Draws the page map of `snapshot` with the series of `labels`; returns the SVG text.
pub fn render(snapshot: &MemorySnapshot, labels: &TopLabels) -> Result<String, Box<dyn Error>> {
    let entries = legend_entries(snapshot, labels);
    // Saturating: an absurd page count makes a tall picture, never an overflow.
    let rows =
        |count: usize, row: i32| i32::try_from(count).unwrap_or(i32::MAX).saturating_mul(row);
    let mut height = LEGEND_Y + legend_rows(&entries) * legend::ROW + 8;
    for memory in &snapshot.memories {
        height = height.saturating_add(MEMORY_ROW);
        for pool in memory.pools.iter().filter(|pool| !pool.pages.is_empty()) {
            height = height
                .saturating_add(POOL_ROW)
                .saturating_add(rows(pool.pages.len(), PAGE_ROW));
        }
    }
    height = height.saturating_add(MARGIN);

    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, height.max(1) as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let totals = snapshot.totals();
        let pools: usize = snapshot.memories.iter().map(|m| m.pools.len()).sum();
        root.draw(&Text::new(
            "Pages: each slice to scale, coloured by label",
            (MARGIN, 24),
            style::bold(22.0, &INK),
        ))?;
        let mut totals_line = format!(
            "{} in {} · {} in use + {} padding of {} reserved · {} live slices",
            counted(totals.pages, "page", "pages"),
            counted(pools as u64, "pool", "pools"),
            format_bytes(totals.bytes_in_use),
            format_bytes(totals.bytes_padding),
            format_bytes(totals.bytes_reserved),
            totals.slices,
        );
        if let Some(depth) = labels.depth() {
            totals_line.push_str(&style::grouping(depth));
        }
        let full = f64::from(WIDTH) - 2.0 * f64::from(MARGIN);
        for (line, y) in [
            (totals_line.as_str(), 50),
            (
                "Where slices are narrower than a pixel, the pixel shows the label holding most of its bytes; bars of one pool share a scale.",
                72,
            ),
        ] {
            root.draw(&Text::new(
                style::fit(line, 16.0, full),
                (MARGIN, y),
                style::text(16.0, &MUTED),
            ))?;
        }
        let mut y = legend::draw_flow(
            &root,
            &entries,
            (MARGIN, LEGEND_Y),
            WIDTH as i32 - 2 * MARGIN,
        )? + 8;
        for memory in &snapshot.memories {
            let t = memory.totals();
            let mut heading = format!(
                "{} memory · {} · {} in use of {} reserved",
                memory.name,
                counted(t.pages, "page", "pages"),
                format_bytes(t.bytes_in_use),
                format_bytes(t.bytes_reserved)
            );
            // Pools without pages get no heading of their own: only their number is told.
            let empty = memory.pools.iter().filter(|p| p.pages.is_empty()).count();
            if empty > 0 {
                heading.push_str(&format!(
                    " · {} without pages",
                    counted(empty as u64, "pool", "pools")
                ));
            }
            root.draw(&Text::new(
                style::fit(
                    &heading,
                    19.0,
                    (f64::from(WIDTH) - 2.0 * f64::from(MARGIN)) / style::BOLD,
                ),
                (MARGIN, y + MEMORY_ROW / 2 + 2),
                style::bold(19.0, &INK),
            ))?;
            y = y.saturating_add(MEMORY_ROW);
            for pool in memory.pools.iter().filter(|pool| !pool.pages.is_empty()) {
                let t = pool.totals();
                let heading = format!(
                    "pool {} · {} · {} · {} in use + {} padding of {} reserved",
                    pool.index,
                    pool.pool,
                    counted(t.pages, "page", "pages"),
                    format_bytes(t.bytes_in_use),
                    format_bytes(t.bytes_padding),
                    format_bytes(t.bytes_reserved)
                );
                root.draw(&Text::new(
                    style::fit(
                        &heading,
                        16.0,
                        (f64::from(WIDTH) - 2.0 * f64::from(MARGIN) - 12.0) / style::BOLD,
                    ),
                    (MARGIN + 12, y + POOL_ROW / 2),
                    style::bold(16.0, &MUTED),
                ))?;
                y = y.saturating_add(POOL_ROW);
                let largest = pool.pages.iter().map(|p| p.size).max().unwrap_or(0);
                for page in &pool.pages {
                    draw_page(&root, page, labels, largest, y)?;
                    y = y.saturating_add(PAGE_ROW);
                }
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// The bar width of a page of `size` bytes in a pool whose largest page is `largest`.
fn bar_width(size: u64, largest: u64) -> i32 {
    if largest == 0 {
        return 4;
    }
    let width = u128::from(size) * BAR_WIDTH as u128 / u128::from(largest);
    (width as i32).clamp(4, BAR_WIDTH)
}

fn draw_page(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    page: &PageSnapshot,
    labels: &TopLabels,
    largest: u64,
    y: i32,
) -> Result<(), Box<dyn Error>> {
    let centre = y + PAGE_ROW / 2;
    let caption = format!("page {} · {}", page.id, format_bytes(page.size));
    root.draw(&Text::new(
        style::fit(&caption, CAPTION_SIZE, f64::from(CAPTION_WIDTH) - 12.0),
        (MARGIN + 20, centre),
        style::text(CAPTION_SIZE, &INK),
    ))?;

    let width = bar_width(page.size, largest);
    let (top, bottom) = (centre - BAR_HEIGHT / 2, centre + BAR_HEIGHT / 2);
    root.draw(&Rectangle::new(
        [(BAR_X, top), (BAR_X + width, bottom)],
        style::FREE.filled(),
    ))?;
    for run in page_runs(page, labels, width as u32) {
        let (x0, x1) = (
            BAR_X + run.columns.start as i32,
            BAR_X + run.columns.end as i32,
        );
        if let RunFill::Series(series) = run.fill {
            let color = style::series_color(series, labels.other());
            root.draw(&Rectangle::new([(x0, top), (x1, bottom)], color.filled()))?;
        }
        if run.padding_quarters > 0 {
            let band = BAR_HEIGHT * i32::from(run.padding_quarters) / 4;
            root.draw(&Rectangle::new(
                [(x0, bottom - band), (x1, bottom)],
                style::PADDING.filled(),
            ))?;
        }
    }
    root.draw(&Rectangle::new(
        [(BAR_X, top), (BAR_X + width, bottom)],
        style::PAGE_FRAME.stroke_width(1),
    ))?;

    root.draw(&Text::new(
        style::fit(&stats_line(page), CAPTION_SIZE, f64::from(STATS_WIDTH)),
        (STATS_X, centre),
        style::text(CAPTION_SIZE, &MUTED),
    ))?;
    Ok(())
}
