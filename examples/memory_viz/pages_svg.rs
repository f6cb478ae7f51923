//! pages.svg: one bar per page, grouped by memory and pool, every bar on one byte scale
//! with a byte-offset axis; each slice coloured by label, free space light grey, padding
//! dark, a 1-px line between neighbouring slices wide enough to show it. Each pool's
//! heading states its free bytes, free ranges, largest free range and fragmentation, and
//! flags the most fragmented pool. Hovering a slice shows its label, bytes, offset, id, age
//! and backtrace frames (an SVG `<title>`, no script).
//!
//! Every bar has an outline in [`style::PAGE_FRAME`], a colour nothing else uses, so the
//! bars can be counted in the SVG.

use crate::axis;
use crate::legend::{self, Entry, Swatch};
use crate::style::{self, BODY_SIZE, INK, MUTED, SMALL_SIZE, TITLE_SIZE, counted};
use crate::svg::{Anchor, Fill, Rgb, Svg, Weight};
use std::collections::BTreeMap;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::{
    EventKind, MemorySnapshot, PageSnapshot, PoolSnapshot, PoolStats, RunFill, SliceSnapshot,
    TopLabels, backtrace_frames, free_ranges, page_runs,
};

pub const WIDTH: f64 = 880.0;
const MARGIN: f64 = 12.0;
/// The caption column (page id and size), left of the bars.
const CAPTION_WIDTH: f64 = 136.0;
/// Where bars start, and the widest bar (the largest page of the snapshot), in pixels.
pub const BAR_X: f64 = MARGIN + CAPTION_WIDTH + 4.0;
pub const BAR_WIDTH: f64 = WIDTH - 16.0 - BAR_X;
/// Vertical space of one page row, of its bar, of a memory heading and of a pool heading.
const PAGE_ROW: f64 = 22.0;
const BAR_HEIGHT: f64 = 16.0;
const MEMORY_ROW: f64 = 26.0;
/// One line of a pool heading.
const POOL_LINE: f64 = 15.0;
/// A slice this many pixels wide gets its own hover area; narrower ones are gathered into
/// areas of at least [`CLUSTER_PX`] pixels, so a page of 1000 slices stays a small file.
const SLICE_PX: f64 = 3.0;
const CLUSTER_PX: f64 = 4.0;
/// The most frames a slice's hover text lists.
const TITLE_FRAMES: usize = 6;

/// The legend entries: each series that some live slice uses, then free and padding.
fn legend_entries(snapshot: &MemorySnapshot, labels: &TopLabels, fills: &[Fill]) -> Vec<Entry> {
    let mut used = vec![false; labels.series_count()];
    for slice in all_slices(snapshot).filter(|s| s.live) {
        used[labels.series(slice.label.as_deref())] = true;
    }
    let mut entries: Vec<Entry> = used
        .iter()
        .enumerate()
        .filter(|&(_, &used)| used)
        .map(|(series, _)| Entry::new(Swatch::Fill(fills[series]), labels.name(series)))
        .collect();
    entries.push(Entry::new(Swatch::Fill(Fill::Solid(style::FREE)), "free"));
    entries.push(Entry::new(
        Swatch::Fill(Fill::Solid(style::PADDING)),
        "padding (dark band, height = its share)",
    ));
    entries
}

fn all_slices(snapshot: &MemorySnapshot) -> impl Iterator<Item = &SliceSnapshot> {
    snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .flat_map(|p| &p.pages)
        .flat_map(|p| &p.slices)
}

/// The pool flagged as the most fragmented: (memory index, pool index in it) of the highest
/// [`PoolStats::fragmentation`] above 0, if any.
fn worst_pool(snapshot: &MemorySnapshot) -> Option<(usize, usize)> {
    let mut worst: Option<((usize, usize), f64)> = None;
    for (m, memory) in snapshot.memories.iter().enumerate() {
        for (p, pool) in memory.pools.iter().enumerate() {
            let fragmentation = PoolStats::of(pool).fragmentation();
            if fragmentation > 0.0 && worst.is_none_or(|(_, f)| fragmentation > f) {
                worst = Some(((m, p), fragmentation));
            }
        }
    }
    worst.map(|(at, _)| at)
}

/// What the pictures need besides the snapshot: fills, backtraces, the scale.
struct Context<'a> {
    labels: &'a TopLabels,
    fills: Vec<Fill>,
    backtraces: BTreeMap<u64, &'a str>,
    /// Pixels per byte, the same for every bar.
    scale: f64,
    taken_us: u64,
}

/// Draws the page map of `snapshot` with the series of `labels`; `at` says the moment it
/// was rebuilt for, when not the end. Returns the SVG text.
pub fn render(snapshot: &MemorySnapshot, labels: &TopLabels, at: Option<u64>) -> String {
    let largest = snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .flat_map(|p| &p.pages)
        .map(|p| p.size)
        .max()
        .unwrap_or(0);
    let context = Context {
        labels,
        fills: style::series_fills(labels),
        backtraces: snapshot
            .history
            .iter()
            .filter(|e| e.kind == EventKind::Reserve)
            .filter_map(|e| Some((e.id?, e.backtrace.as_deref()?)))
            .collect(),
        scale: if largest == 0 {
            0.0
        } else {
            BAR_WIDTH / largest as f64
        },
        taken_us: snapshot.taken_us,
    };
    let entries = legend_entries(snapshot, labels, &context.fills);
    let mut svg = Svg::new(WIDTH, 0.0);
    let mut y = draw_title(&mut svg, snapshot, labels, &context, at);
    y = legend::draw_flow(&mut svg, &entries, (MARGIN, y), WIDTH - 2.0 * MARGIN) + 4.0;

    // The byte axis on top, its grid lines through every row.
    let rows_height: f64 = snapshot
        .memories
        .iter()
        .map(|m| {
            MEMORY_ROW
                + m.pools
                    .iter()
                    .filter(|p| !p.pages.is_empty())
                    .map(|p| pool_height(p, false) + p.pages.len() as f64 * PAGE_ROW)
                    .sum::<f64>()
        })
        .sum();
    y = draw_axis(&mut svg, largest, &context, y, rows_height);

    let worst = worst_pool(snapshot);
    for (m, memory) in snapshot.memories.iter().enumerate() {
        let t = memory.totals();
        let mut heading = format!(
            "{} memory · {} · {} in use of {} reserved",
            memory.name,
            counted(t.pages, "page", "pages"),
            format_bytes(t.bytes_in_use),
            format_bytes(t.bytes_reserved)
        );
        let empty = memory.pools.iter().filter(|p| p.pages.is_empty()).count();
        if empty > 0 {
            heading.push_str(&format!(
                " · {} without pages",
                counted(empty as u64, "pool", "pools")
            ));
        }
        let heading = style::fit(&heading, 13.0 * style::BOLD, WIDTH - 2.0 * MARGIN);
        svg.text(
            (MARGIN, y + MEMORY_ROW / 2.0 + 2.0),
            13.0,
            Weight::Bold,
            Anchor::Start,
            INK,
            &heading,
            "",
        );
        y += MEMORY_ROW;
        for (p, pool) in memory.pools.iter().enumerate() {
            if pool.pages.is_empty() {
                continue;
            }
            let flagged = worst == Some((m, p));
            draw_pool_heading(&mut svg, pool, flagged, y);
            y += pool_height(pool, flagged);
            for page in &pool.pages {
                draw_page(&mut svg, page, &context, y);
                y += PAGE_ROW;
            }
        }
    }
    svg.set_height(y + MARGIN);
    svg.finish()
}

fn draw_title(
    svg: &mut Svg,
    snapshot: &MemorySnapshot,
    labels: &TopLabels,
    context: &Context<'_>,
    at: Option<u64>,
) -> f64 {
    let title = match at {
        Some(time_us) => format!(
            "Pages at {:.1} ms: where every byte is, one scale for every bar",
            time_us as f64 / 1000.0
        ),
        None => "Pages: where every byte is, one scale for every bar".to_string(),
    };
    svg.text(
        (MARGIN, 18.0),
        TITLE_SIZE,
        Weight::Bold,
        Anchor::Start,
        INK,
        &title,
        "",
    );
    let totals = snapshot.totals();
    let pools: usize = snapshot.memories.iter().map(|m| m.pools.len()).sum();
    let mut lines = vec![format!(
        "{} in {} · {} in use + {} padding of {} reserved · {} live slices",
        counted(totals.pages, "page", "pages"),
        counted(pools as u64, "pool", "pools"),
        format_bytes(totals.bytes_in_use),
        format_bytes(totals.bytes_padding),
        format_bytes(totals.bytes_reserved),
        totals.slices,
    )];
    if let Some(depth) = labels.depth() {
        lines[0].push_str(&style::grouping(depth));
    }
    let per_pixel = if context.scale > 0.0 {
        1.0 / context.scale
    } else {
        0.0
    };
    lines.push(format!(
        "A bar's width is its page's size: 1 px = {}. Where slices are narrower than a pixel, \
         the pixel shows the label holding most of its bytes. Hover a slice for its label, bytes, \
         offset, id, age and backtrace.",
        format_bytes(per_pixel.round() as u64)
    ));
    if at.is_some() {
        lines.push(
            "Rebuilt from the history: slices freed since have no recorded padding (drawn as none); \
             staging slices are shown as at the end."
                .to_string(),
        );
    }
    let mut y = 38.0;
    for line in lines {
        for part in style::wrap(&line, SMALL_SIZE, WIDTH - 2.0 * MARGIN) {
            svg.text(
                (MARGIN, y),
                SMALL_SIZE,
                Weight::Normal,
                Anchor::Start,
                MUTED,
                &part,
                "",
            );
            y += 15.0;
        }
    }
    y + 6.0
}

/// The byte-offset axis above the rows, with grid lines `rows_height` down; returns the y
/// below it.
fn draw_axis(svg: &mut Svg, largest: u64, context: &Context<'_>, y: f64, rows_height: f64) -> f64 {
    let axis_y = y + 14.0;
    svg.text(
        (MARGIN, axis_y - 6.0),
        SMALL_SIZE,
        Weight::Normal,
        Anchor::Start,
        MUTED,
        "offset in page",
        "",
    );
    for (bytes, label) in axis::byte_ticks(largest, 7) {
        let x = BAR_X + bytes * context.scale;
        svg.polyline(
            &[(x, axis_y), (x, axis_y + 4.0 + rows_height)],
            style::GRID,
            1.0,
            None,
            r#"class="offset-tick""#,
            None,
        );
        // The first label starts at the bar's left end, a label at the right edge ends there.
        let anchor = if bytes == 0.0 {
            Anchor::Start
        } else if x + style::text_width(&label, SMALL_SIZE) / 2.0 > WIDTH - 4.0 {
            Anchor::End
        } else {
            Anchor::Middle
        };
        svg.text(
            (x, axis_y - 6.0),
            SMALL_SIZE,
            Weight::Normal,
            anchor,
            MUTED,
            &label,
            "",
        );
    }
    axis_y + 4.0
}

/// A pool heading's lines: (text, bold), wrapped to the picture's width.
fn pool_heading(pool: &PoolSnapshot, worst: bool) -> Vec<(String, bool)> {
    let t = pool.totals();
    let stats = PoolStats::of(pool);
    let first = format!(
        "pool {} · {} · {} · {} reserved",
        pool.index,
        pool.pool,
        counted(t.pages, "page", "pages"),
        format_bytes(t.bytes_reserved)
    );
    let mut second = format!(
        "{} in use + {} padding · free {} in {}, largest {} · fragmentation {:.0}% (between slices)",
        format_bytes(t.bytes_in_use),
        format_bytes(t.bytes_padding),
        format_bytes(stats.bytes_free),
        counted(stats.free_ranges, "range", "ranges"),
        format_bytes(stats.largest_free),
        stats.fragmentation() * 100.0
    );
    if stats.empty_pages > 0 {
        second.push_str(&format!(
            " · {} empty",
            counted(stats.empty_pages, "page", "pages")
        ));
    }
    if worst {
        second.push_str(" · ⚠ the most fragmented pool");
    }
    let width = WIDTH - 2.0 * MARGIN - 8.0;
    let mut lines: Vec<(String, bool)> = style::wrap(&first, BODY_SIZE * style::BOLD, width)
        .into_iter()
        .map(|line| (line, true))
        .collect();
    lines.extend(
        style::wrap(&second, SMALL_SIZE, width)
            .into_iter()
            .map(|line| (line, false)),
    );
    lines
}

/// The height of a pool heading.
fn pool_height(pool: &PoolSnapshot, worst: bool) -> f64 {
    pool_heading(pool, worst).len() as f64 * POOL_LINE + 6.0
}

fn draw_pool_heading(svg: &mut Svg, pool: &PoolSnapshot, worst: bool, y: f64) {
    let stats = PoolStats::of(pool);
    let attrs = format!(
        r#"class="pool-stats" data-pool="{}" data-free="{}" data-ranges="{}" data-largest="{}" data-worst="{worst}""#,
        pool.pool, stats.bytes_free, stats.free_ranges, stats.largest_free
    );
    for (i, (line, bold)) in pool_heading(pool, worst).into_iter().enumerate() {
        let at = (MARGIN + 8.0, y + 9.0 + i as f64 * POOL_LINE);
        let (size, weight, color) = if bold {
            (BODY_SIZE, Weight::Bold, INK)
        } else {
            (
                SMALL_SIZE,
                Weight::Normal,
                if worst { style::PEAK } else { MUTED },
            )
        };
        svg.text(
            at,
            size,
            weight,
            Anchor::Start,
            color,
            &line,
            if i == 0 { &attrs } else { "" },
        );
    }
}

/// Bytes without trailing ".00" ("64 MiB", "1.50 KiB"), for captions.
fn compact_bytes(bytes: u64) -> String {
    format_bytes(bytes).replace(".00 ", " ")
}

fn draw_page(svg: &mut Svg, page: &PageSnapshot, context: &Context<'_>, y: f64) {
    let centre = y + PAGE_ROW / 2.0;
    let caption = format!("page {} · {}", page.id, compact_bytes(page.size));
    svg.text(
        (MARGIN + 8.0, centre),
        SMALL_SIZE,
        Weight::Normal,
        Anchor::Start,
        INK,
        &style::fit(&caption, SMALL_SIZE, CAPTION_WIDTH - 12.0),
        "",
    );
    let width = page.size as f64 * context.scale;
    let (top, bottom) = (centre - BAR_HEIGHT / 2.0, centre + BAR_HEIGHT / 2.0);
    svg.rect(
        BAR_X,
        top,
        width,
        BAR_HEIGHT,
        Fill::Solid(style::FREE),
        "",
        None,
    );
    let columns = width.ceil().max(1.0) as u32;
    let column = width / f64::from(columns);
    for run in page_runs(page, context.labels, columns) {
        let x0 = BAR_X + f64::from(run.columns.start) * column;
        let x1 = BAR_X + f64::from(run.columns.end) * column;
        let fill = match run.fill {
            RunFill::Series(series) => context.fills[series],
            RunFill::Free => Fill::Solid(style::FREE),
        };
        svg.rect(x0, top, x1 - x0, BAR_HEIGHT, fill, r#"class="run""#, None);
        if run.padding_quarters > 0 {
            let band = BAR_HEIGHT * f64::from(run.padding_quarters) / 4.0;
            svg.rect(
                x0,
                bottom - band,
                x1 - x0,
                band,
                Fill::Solid(style::PADDING),
                "",
                None,
            );
        }
        if run.boundary {
            svg.rect(
                x0,
                top,
                1.0,
                BAR_HEIGHT,
                Fill::Solid(Rgb(0xFF, 0xFF, 0xFF)),
                r#"class="boundary""#,
                None,
            );
        }
    }
    draw_hover_areas(svg, page, context, (top, BAR_HEIGHT));
    svg.frame(
        BAR_X,
        top,
        width,
        BAR_HEIGHT,
        style::PAGE_FRAME,
        &format!(r#"class="page-bar" data-page-size="{}""#, page.size),
    );
}

/// One slice's hover text.
fn slice_title(slice: &SliceSnapshot, context: &Context<'_>) -> String {
    let label = slice
        .label
        .as_deref()
        .unwrap_or(wgpu_memory::report::NO_LABEL);
    let mut text = format!(
        "{label}\n{} ({} bytes) + {} padding\noffset {} ({} bytes)",
        format_bytes(slice.size),
        slice.size,
        format_bytes(slice.padding),
        format_bytes(slice.offset),
        slice.offset
    );
    match slice.id {
        Some(id) => text.push_str(&format!("\nid {id}")),
        None => text.push_str("\nid not recorded"),
    }
    if let Some(age) = slice.age_us {
        text.push_str(&format!(
            " · age {:.1} ms (reserved at {:.1} ms)",
            age as f64 / 1000.0,
            context.taken_us.saturating_sub(age) as f64 / 1000.0
        ));
    }
    if let Some(backtrace) = slice.id.and_then(|id| context.backtraces.get(&id)) {
        for frame in backtrace_frames(backtrace).iter().take(TITLE_FRAMES) {
            text.push_str(&format!("\nat {}", frame.describe()));
        }
    }
    text
}

/// Transparent areas carrying the hover texts: one per slice wide enough, one per group of
/// narrow neighbours, one per free range.
fn draw_hover_areas(
    svg: &mut Svg,
    page: &PageSnapshot,
    context: &Context<'_>,
    (top, height): (f64, f64),
) {
    let x = |bytes: u64| BAR_X + bytes as f64 * context.scale;
    let hidden = r#"fill-opacity="0""#;
    let mut live: Vec<&SliceSnapshot> = page.slices.iter().filter(|s| s.live).collect();
    live.sort_by_key(|s| s.offset);
    let mut cluster: Vec<&SliceSnapshot> = Vec::new();
    let flush = |svg: &mut Svg, cluster: &mut Vec<&SliceSnapshot>| {
        let (Some(first), Some(last)) = (cluster.first(), cluster.last()) else {
            return;
        };
        let end = last.end().unwrap_or(page.size).min(page.size);
        let mut by_label: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for slice in cluster.iter() {
            let entry = by_label
                .entry(
                    slice
                        .label
                        .as_deref()
                        .unwrap_or(wgpu_memory::report::NO_LABEL),
                )
                .or_default();
            entry.0 += 1;
            entry.1 += slice.size;
        }
        let mut title = format!(
            "{} narrow slices at offsets {} .. {}",
            cluster.len(),
            format_bytes(first.offset),
            format_bytes(end)
        );
        for (label, (count, bytes)) in by_label.iter().take(4) {
            title.push_str(&format!(
                "\n{label}: {count} × {}",
                format_bytes(*bytes / count)
            ));
        }
        if by_label.len() > 4 {
            title.push_str(&format!("\n… {} more labels", by_label.len() - 4));
        }
        svg.rect(
            x(first.offset),
            top,
            x(end) - x(first.offset),
            height,
            Fill::Solid(INK),
            &format!(r#"{hidden} class="slice" data-slices="{}""#, cluster.len()),
            Some(&title),
        );
        cluster.clear();
    };
    for slice in live {
        let end = slice.end().unwrap_or(page.size).min(page.size);
        let span = x(end) - x(slice.offset.min(page.size));
        if span >= SLICE_PX {
            flush(svg, &mut cluster);
            svg.rect(
                x(slice.offset),
                top,
                span,
                height,
                Fill::Solid(INK),
                &format!(r#"{hidden} class="slice" data-slices="1""#),
                Some(&slice_title(slice, context)),
            );
        } else {
            cluster.push(slice);
            let start = cluster[0].offset;
            if x(end) - x(start) >= CLUSTER_PX {
                flush(svg, &mut cluster);
            }
        }
    }
    flush(svg, &mut cluster);
    for range in free_ranges(page) {
        if x(range.end) - x(range.start) < 1.0 {
            continue;
        }
        let title = format!(
            "free {} ({} bytes) at offset {}",
            format_bytes(range.end - range.start),
            range.end - range.start,
            format_bytes(range.start)
        );
        svg.rect(
            x(range.start),
            top,
            x(range.end) - x(range.start),
            height,
            Fill::Solid(INK),
            &format!(r#"{hidden} class="free""#),
            Some(&title),
        );
    }
}
