//! memory_viz on the demo snapshot, on snapshots of known contents, and on a worst case for
//! the page map's size. Every check reads the SVG itself: positions, titles, font sizes
//! and colours are taken from the elements drawn.

use super::*;
use crate::svg::Rgb;
use roxmltree::{Document, Node};
use wgpu_memory::memory_management::MemoryReport;
use wgpu_memory::report::{
    EventKind, HistoryEvent, MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
};

/// The SVGs must stay small enough to commit and open.
const MAX_SVG_BYTES: usize = 2 * 1024 * 1024;

pub(super) fn parse(svg: &str) -> Document<'_> {
    Document::parse(svg).expect("the SVG parses as XML")
}

pub(super) fn number(node: Node<'_, '_>, name: &str) -> f64 {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> without {name}", node.tag_name().name()))
        .parse()
        .unwrap()
}

pub(super) fn with_class<'a, 'input>(
    doc: &'a Document<'input>,
    class: &str,
) -> Vec<Node<'a, 'input>> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .collect()
}

/// The `<title>` text of an element (its own child).
pub(super) fn title_of(node: Node<'_, '_>) -> Option<String> {
    node.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|t| t.text())
        .map(str::to_string)
}

pub(super) fn text_of(node: Node<'_, '_>) -> String {
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<String>()
        .replace('\u{a0}', " ")
        .trim()
        .to_string()
}

/// The number of page bars: rects outlined in the page-frame colour, which nothing else uses.
fn page_bars(svg: &str) -> usize {
    let frame = style::PAGE_FRAME.hex();
    parse(svg)
        .descendants()
        .filter(|node| node.has_tag_name("rect"))
        .filter(|node| {
            node.attribute("stroke")
                .is_some_and(|stroke| stroke.eq_ignore_ascii_case(&frame))
        })
        .count()
}

fn page_count(snapshot: &MemorySnapshot) -> usize {
    snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .map(|p| p.pages.len())
        .sum()
}

fn live_slices(snapshot: &MemorySnapshot) -> usize {
    snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .flat_map(|p| &p.pages)
        .flat_map(|p| &p.slices)
        .filter(|s| s.live)
        .count()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memory-viz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn pictures(snapshot: &MemorySnapshot, depth: Option<usize>) -> (String, String) {
    let labels = TopLabels::from_snapshot(snapshot, DEFAULT_TOP, depth);
    (
        timeline_svg::render(snapshot, &labels, None),
        pages_svg::render(snapshot, &labels, None),
    )
}

pub(super) fn demo_pictures() -> (String, String) {
    let snapshot = demo::snapshot();
    let depth = TopLabels::fitting_depth(&snapshot, DEFAULT_TOP);
    pictures(&snapshot, depth)
}

// ---- a small snapshot of known contents -------------------------------------------------

pub(super) const PAGE: u64 = 1 << 20;

pub(super) fn event(time_us: u64, kind: EventKind, bytes: u64, page: u64) -> HistoryEvent {
    HistoryEvent {
        memory: Some("main".to_string()),
        pool: Some("sliced 1 MiB".to_string()),
        page: Some(page),
        ..HistoryEvent::new(time_us, kind, bytes)
    }
}

pub(super) fn reserve(
    time_us: u64,
    bytes: u64,
    page: u64,
    offset: u64,
    id: u64,
    label: &str,
) -> HistoryEvent {
    HistoryEvent {
        offset: Some(offset),
        id: Some(id),
        label: Some(label.to_string()),
        ..event(time_us, EventKind::Reserve, bytes, page)
    }
}

pub(super) fn free(
    time_us: u64,
    bytes: u64,
    page: u64,
    offset: u64,
    id: u64,
    label: &str,
) -> HistoryEvent {
    HistoryEvent {
        kind: EventKind::Free,
        ..reserve(time_us, bytes, page, offset, id, label)
    }
}

pub(super) fn slice(offset: u64, size: u64, id: u64, label: &str, age_us: u64) -> SliceSnapshot {
    SliceSnapshot {
        id: Some(id),
        age_us: Some(age_us),
        ..SliceSnapshot::live(offset, size, 0).labelled(label)
    }
}

/// Two layers on two pages of 1 MiB. Layer 0's weights (300 KiB) and activations (200 KiB)
/// and layer 1's weights (100 KiB) are all live at 5 ms, the peak (600 KiB); the
/// activations are freed at 6 ms, page 1 is given back at 7 ms and made again at 7.01 ms,
/// and layer 1's activations (50 KiB) are reserved at 8 ms. Taken at 10 ms. Layer 0's
/// weights carry a backtrace.
pub(super) fn layers_snapshot() -> MemorySnapshot {
    const K: u64 = 1024;
    let mut history = vec![
        event(1_000, EventKind::PageMade, PAGE, 0),
        HistoryEvent {
            backtrace: Some(
                "   0: app::load_weights\n             at ./src/app.rs:42:9\n   1: main\n".into(),
            ),
            ..reserve(2_000, 300 * K, 0, 0, 1, "layer 0/weights")
        },
        reserve(3_000, 100 * K, 0, 300 * K, 2, "layer 1/weights"),
        event(4_000, EventKind::PageMade, PAGE, 1),
        reserve(5_000, 200 * K, 1, 0, 3, "layer 0/activations"),
        free(6_000, 200 * K, 1, 0, 3, "layer 0/activations"),
        event(7_000, EventKind::PageReleased, PAGE, 1),
        event(7_010, EventKind::PageMade, PAGE, 2),
        reserve(8_000, 50 * K, 2, 0, 4, "layer 1/activations"),
    ];
    history.sort_by_key(|e| e.time_us);
    let pages = vec![
        PageSnapshot {
            id: 0,
            size: PAGE,
            slices: vec![
                slice(0, 300 * K, 1, "layer 0/weights", 8_000),
                slice(300 * K, 100 * K, 2, "layer 1/weights", 7_000),
                SliceSnapshot::free(400 * K, PAGE - 400 * K),
            ],
        },
        PageSnapshot {
            id: 2,
            size: PAGE,
            slices: vec![
                slice(0, 50 * K, 4, "layer 1/activations", 2_000),
                SliceSnapshot::free(50 * K, PAGE - 50 * K),
            ],
        },
    ];
    MemorySnapshot {
        taken_us: 10_000,
        memories: vec![
            MemorySnapshotMemory {
                name: "main".to_string(),
                pools: vec![PoolSnapshot {
                    pool: "sliced 1 MiB".to_string(),
                    index: 0,
                    pages,
                }],
            },
            MemorySnapshotMemory {
                name: "staging".to_string(),
                pools: vec![PoolSnapshot {
                    pool: "sliced 64 KiB".to_string(),
                    index: 0,
                    pages: vec![PageSnapshot {
                        id: 0,
                        size: 64 * K,
                        slices: vec![],
                    }],
                }],
            },
        ],
        history,
        history_dropped: 0,
        started_unix_us: None,
        budget: None,
        report: MemoryReport { streams: vec![] },
    }
}

// ---- the demo and the command line ------------------------------------------------------

#[test]
fn the_demo_has_3_pools_20_pages_and_a_page_of_1000_slices() {
    let snapshot = demo::snapshot();
    let pools: usize = snapshot.memories.iter().map(|m| m.pools.len()).sum();
    assert_eq!(pools, 3);
    assert_eq!(page_count(&snapshot), 20);
    let densest = snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .flat_map(|p| &p.pages)
        .map(|page| page.slices.iter().filter(|s| s.live).count())
        .max();
    assert_eq!(densest, Some(demo::DENSE_SLICES));
    snapshot.check().unwrap();
    snapshot.check_report().unwrap();
    let back = MemorySnapshot::from_json(&snapshot.to_json().unwrap()).unwrap();
    assert_eq!(back, snapshot);
}

#[test]
fn memory_viz_on_the_demo_writes_two_small_svgs_with_one_bar_per_page() {
    let dir = temp_dir("demo");
    let json = dir.join("snapshot.json");
    let arg = |s: &str| s.to_string();
    run(&[arg("--demo"), json.display().to_string()]).unwrap();
    let out = dir.join("out");
    run(&[
        json.display().to_string(),
        arg("--out"),
        out.display().to_string(),
    ])
    .unwrap();
    let timeline = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    let pages = std::fs::read_to_string(out.join("pages.svg")).unwrap();
    assert!(
        timeline.len() < MAX_SVG_BYTES,
        "timeline.svg: {} bytes",
        timeline.len()
    );
    assert!(
        pages.len() < MAX_SVG_BYTES,
        "pages.svg: {} bytes",
        pages.len()
    );
    parse(&timeline);
    assert_eq!(page_bars(&pages), 20);
    assert_eq!(page_bars(&timeline), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn twenty_pages_of_1000_alternating_slices_stay_under_2_mb() {
    // The worst case for the page map: every neighbour has another label.
    let mut snapshot = demo::snapshot();
    let labels = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    for page in snapshot
        .memories
        .iter_mut()
        .flat_map(|m| &mut m.pools)
        .flat_map(|p| &mut p.pages)
    {
        let step = page.size / 1000;
        *page = PageSnapshot {
            id: page.id,
            size: page.size,
            slices: (0..1000u64)
                .map(|i| SliceSnapshot {
                    id: Some(i),
                    age_us: Some(i),
                    ..SliceSnapshot::live(i * step, step - step / 8, step / 16)
                        .labelled(labels[(i % 10) as usize])
                })
                .collect(),
        };
    }
    let (timeline, pages) = pictures(&snapshot, None);
    assert!(
        pages.len() < MAX_SVG_BYTES,
        "pages.svg: {} bytes",
        pages.len()
    );
    assert_eq!(page_bars(&pages), 20);
    assert!(
        timeline.len() < MAX_SVG_BYTES,
        "timeline.svg: {} bytes",
        timeline.len()
    );
}

#[test]
fn bad_input_is_an_input_failure() {
    let dir = temp_dir("bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let out = dir.join("out").display().to_string();
    let args = [bad.display().to_string(), "--out".to_string(), out.clone()];
    assert!(matches!(run(&args), Err(Failure::Input(m)) if m.contains("not a memory snapshot")));
    let missing = [
        dir.join("missing.json").display().to_string(),
        "--out".to_string(),
        out.clone(),
    ];
    assert!(matches!(run(&missing), Err(Failure::Input(_))));
    assert!(matches!(
        run(&["--top".to_string(), "x".to_string()]),
        Err(Failure::Input(_))
    ));
    assert!(matches!(run(&[]), Err(Failure::Input(_))));
    let json = dir.join("layers.json");
    std::fs::write(&json, layers_snapshot().to_json().unwrap()).unwrap();
    for at in ["soon", "-3", "11ms"] {
        let args = [
            json.display().to_string(),
            "--out".to_string(),
            out.clone(),
            "--at".to_string(),
            at.to_string(),
        ];
        assert!(matches!(run(&args), Err(Failure::Input(_))), "--at {at}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_snapshot_draws() {
    let mut snapshot = demo::snapshot();
    snapshot.memories.clear();
    snapshot.history.clear();
    let (timeline, pages) = pictures(&snapshot, None);
    parse(&timeline);
    assert_eq!(page_bars(&pages), 0);
}

#[test]
fn times_parse_in_ms_by_default() {
    assert_eq!(parse_time("12.5"), Some(12_500));
    assert_eq!(parse_time("12500us"), Some(12_500));
    assert_eq!(parse_time("3ms"), Some(3_000));
    assert_eq!(parse_time("0.5s"), Some(500_000));
    assert_eq!(parse_time("x"), None);
    assert_eq!(parse_time("-1"), None);
}

// ---- item 1: the peak, the bands, the markers -------------------------------------------

/// The plot's left x, width and time span, from the plot rect.
pub(super) fn plot(doc: &Document<'_>) -> (f64, f64, u64, u64, f64) {
    let rect = with_class(doc, "plot")[0];
    let int = |name: &str| rect.attribute(name).unwrap().parse::<u64>().unwrap();
    (
        number(rect, "x"),
        number(rect, "width"),
        int("data-start-us"),
        int("data-end-us"),
        int("data-columns") as f64,
    )
}

#[test]
fn the_peak_is_marked_at_its_time_with_what_held_it_down_to_weights_and_activations() {
    let snapshot = layers_snapshot();
    // Grouped by first scope, "layer 0" merges its weights and activations in the stack;
    // the peak still names them apart.
    let (timeline, _) = pictures(&snapshot, Some(1));
    let doc = parse(&timeline);
    let peak = with_class(&doc, "peak");
    assert_eq!(peak.len(), 1, "one peak text");
    let text = text_of(peak[0]);
    assert!(
        text.contains("600.00 KiB") && text.contains("5.0 ms"),
        "{text}"
    );
    let (x0, width, start, end, columns) = plot(&doc);
    let expected = x0 + (5_000 - start) as f64 / (end - start) as f64 * width;
    let column = width / columns;
    assert!(
        (number(peak[0], "x") - expected).abs() <= column,
        "peak text at {} px, its time at {expected:.2} px",
        number(peak[0], "x")
    );
    let entries: Vec<(String, u64)> = with_class(&doc, "peak-entry")
        .iter()
        .map(|n| {
            (
                text_of(*n),
                n.attribute("data-bytes").unwrap().parse().unwrap(),
            )
        })
        .collect();
    let sum: u64 = entries.iter().map(|(_, b)| b).sum();
    assert_eq!(sum, 600 * 1024, "{entries:?}");
    for (label, bytes) in [
        ("layer 0/weights", 300 * 1024),
        ("layer 0/activations", 200 * 1024),
        ("layer 1/weights", 100 * 1024),
    ] {
        assert!(
            entries
                .iter()
                .any(|(text, b)| text.starts_with(label) && *b == bytes),
            "{label} missing from {entries:?}"
        );
    }
}

/// The reserved line's points, from its path.
fn reserved_line(doc: &Document<'_>) -> Vec<(f64, f64)> {
    let d = with_class(doc, "reserved-line")[0].attribute("d").unwrap();
    d.split(['M', 'L'])
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            let mut xy = part.split_whitespace().map(|v| v.parse::<f64>().unwrap());
            (xy.next().unwrap(), xy.next().unwrap())
        })
        .collect()
}

fn distance_to_segment(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len = dx * dx + dy * dy;
    let t = if len == 0.0 {
        0.0
    } else {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len).clamp(0.0, 1.0)
    };
    ((p.0 - a.0 - t * dx).powi(2) + (p.1 - a.1 - t * dy).powi(2)).sqrt()
}

fn translate(node: Node<'_, '_>) -> (f64, f64) {
    let t = node.attribute("transform").unwrap();
    let inner = t.trim_start_matches("translate(").trim_end_matches(')');
    let (x, y) = inner.split_once(',').unwrap();
    (x.parse().unwrap(), y.parse().unwrap())
}

/// The layers with a page of 1 MiB made at 7.996 ms and given back at 7.998 ms, in the
/// column of the 8 ms reservation, whose sample (the most in use) sees it gone: only the
/// column's range of reserved shows it.
fn hidden_dip() -> MemorySnapshot {
    let mut snapshot = layers_snapshot();
    snapshot
        .history
        .push(event(7_996, EventKind::PageMade, PAGE, 5));
    snapshot
        .history
        .push(event(7_998, EventKind::PageReleased, PAGE, 5));
    snapshot.history.sort_by_key(|e| e.time_us);
    snapshot
}

#[test]
fn every_page_marker_sits_within_2_px_of_the_reserved_line() {
    for (name, svg) in [
        ("demo", demo_pictures().0),
        ("layers", pictures(&layers_snapshot(), None).0),
        ("hidden dip", pictures(&hidden_dip(), None).0),
    ] {
        let doc = parse(&svg);
        let line = reserved_line(&doc);
        let markers = with_class(&doc, "page-marker");
        assert!(!markers.is_empty(), "{name}: no page markers");
        for marker in markers {
            let at = translate(marker);
            let distance = line
                .windows(2)
                .map(|w| distance_to_segment(at, w[0], w[1]))
                .fold(f64::INFINITY, f64::min);
            assert!(
                distance <= 2.0,
                "{name}: {:?} is {distance:.1} px from the reserved line",
                title_of(marker)
            );
        }
    }
}

#[test]
fn reserved_is_drawn_as_bands_stacked_on_in_use() {
    let (timeline, _) = pictures(&layers_snapshot(), None);
    let doc = parse(&timeline);
    let bands: Vec<String> = with_class(&doc, "band")
        .iter()
        .map(|n| title_of(*n).unwrap())
        .collect();
    for wanted in [
        "main memory free inside used pages",
        "empty main pages",
        "idle readback staging pages",
    ] {
        assert!(
            bands.iter().any(|b| b.starts_with(wanted)),
            "{wanted} not in {bands:?}"
        );
    }
    // The staging page (64 KiB) is the top band all along.
    let staging = bands
        .iter()
        .find(|b| b.starts_with("idle readback"))
        .unwrap();
    assert!(staging.contains("65536 bytes"), "{staging}");
}

// ---- item 2: the page map ---------------------------------------------------------------

#[test]
fn every_bar_has_the_same_width_per_byte_and_an_offset_axis() {
    for (name, svg) in [
        ("demo", demo_pictures().1),
        ("layers", pictures(&layers_snapshot(), None).1),
    ] {
        let doc = parse(&svg);
        let bars = with_class(&doc, "page-bar");
        assert!(bars.len() >= 3, "{name}");
        let per_byte: Vec<f64> = bars
            .iter()
            .map(|bar| {
                let size: f64 = bar.attribute("data-page-size").unwrap().parse().unwrap();
                number(*bar, "width") / size
            })
            .collect();
        let largest = bars.iter().map(|b| number(*b, "width")).fold(0.0, f64::max);
        for (bar, ratio) in bars.iter().zip(&per_byte) {
            let size: f64 = bar.attribute("data-page-size").unwrap().parse().unwrap();
            // Widths are written to 0.01 px.
            assert!(
                (ratio - per_byte[0]).abs() * size <= 0.011,
                "{name}: {size} bytes drawn {} px wide, not at the scale of the others",
                number(*bar, "width")
            );
        }
        assert!((largest - pages_svg::BAR_WIDTH).abs() < 0.011);
        assert!(
            with_class(&doc, "offset-tick").len() >= 3,
            "{name}: no offset axis"
        );
    }
}

#[test]
fn neighbouring_slices_of_one_label_have_a_boundary() {
    let mut snapshot = layers_snapshot();
    // Two more weights right after layer 1's: three neighbours, two of one label.
    let page = &mut snapshot.memories[0].pools[0].pages[0];
    page.slices.retain(|s| s.live);
    page.slices
        .push(slice(400 * 1024, 100 * 1024, 9, "layer 1/weights", 10));
    let (_, pages) = pictures(&snapshot, None);
    let doc = parse(&pages);
    let boundaries = with_class(&doc, "boundary");
    let scale = pages_svg::BAR_WIDTH / PAGE as f64;
    for offset in [300 * 1024u64, 400 * 1024] {
        let x = pages_svg::BAR_X + offset as f64 * scale;
        assert!(
            boundaries
                .iter()
                .any(|b| (number(*b, "x") - x).abs() <= 1.0 && number(*b, "width") == 1.0),
            "no 1-px boundary at offset {offset}"
        );
    }
}

#[test]
fn each_pool_heading_states_its_free_space_and_the_worst_pool_is_flagged() {
    let (_, pages) = demo_pictures();
    let doc = parse(&pages);
    let headings = with_class(&doc, "pool-stats");
    let snapshot = demo::snapshot();
    let pools: Vec<&PoolSnapshot> = snapshot
        .memories
        .iter()
        .flat_map(|m| &m.pools)
        .filter(|p| !p.pages.is_empty())
        .collect();
    assert_eq!(headings.len(), pools.len());
    let mut worst = (0.0, String::new());
    for (heading, pool) in headings.iter().zip(&pools) {
        let stats = wgpu_memory::report::PoolStats::of(pool);
        assert_eq!(
            heading.attribute("data-free"),
            Some(stats.bytes_free.to_string().as_str())
        );
        assert_eq!(
            heading.attribute("data-ranges"),
            Some(stats.free_ranges.to_string().as_str())
        );
        assert_eq!(
            heading.attribute("data-largest"),
            Some(stats.largest_free.to_string().as_str())
        );
        if stats.fragmentation() > worst.0 {
            worst = (stats.fragmentation(), pool.pool.clone());
        }
    }
    let flagged: Vec<&str> = headings
        .iter()
        .filter(|h| h.attribute("data-worst") == Some("true"))
        .map(|h| h.attribute("data-pool").unwrap())
        .collect();
    assert_eq!(flagged, [worst.1.as_str()]);
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .collect();
    let texts = texts.join(" ");
    assert!(texts.contains("fragmentation") && texts.contains("the most fragmented pool"));
}

#[test]
fn memory_viz_at_t_draws_the_pages_of_that_moment() {
    let dir = temp_dir("at");
    let json = dir.join("layers.json");
    std::fs::write(&json, layers_snapshot().to_json().unwrap()).unwrap();
    let out = dir.join("out");
    let draw_at = |at: &str| {
        run(&[
            json.display().to_string(),
            "--out".to_string(),
            out.display().to_string(),
            "--at".to_string(),
            at.to_string(),
        ])
        .unwrap();
        std::fs::read_to_string(out.join("pages.svg")).unwrap()
    };
    // At 5.5 ms: pages 0 and 1 (page 2 not made yet) and the staging page; three weights and
    // the activations live.
    let pages = draw_at("5.5");
    let doc = parse(&pages);
    assert_eq!(page_bars(&pages), 3);
    let texts: String = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .collect();
    assert!(texts.contains("Pages at 5.5 ms"), "{texts}");
    assert!(texts.contains("page 1 ·") && !texts.contains("page 2 ·"));
    let titles: Vec<String> = with_class(&doc, "slice")
        .iter()
        .filter_map(|n| title_of(*n))
        .collect();
    assert!(
        titles.iter().any(|t| t.starts_with("layer 0/activations")),
        "{titles:?}"
    );
    assert!(!titles.iter().any(|t| t.starts_with("layer 1/activations")));
    // At the end: page 2 instead of page 1.
    let pages = draw_at("10ms");
    assert!(pages.contains("page 2 ·") && !pages.contains("page 1 ·"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- item 3: identification -------------------------------------------------------------

#[test]
fn titles_cover_every_live_slice_with_its_details_and_frames() {
    for (name, snapshot) in [("demo", demo::snapshot()), ("layers", layers_snapshot())] {
        let (timeline, pages) = pictures(&snapshot, None);
        let doc = parse(&pages);
        let slices = with_class(&doc, "slice");
        let counted: usize = slices
            .iter()
            .map(|n| {
                n.attribute("data-slices")
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        assert_eq!(counted, live_slices(&snapshot), "{name}");
        for node in &slices {
            let title = title_of(*node).unwrap_or_else(|| panic!("{name}: a slice without title"));
            if node.attribute("data-slices") == Some("1") {
                for part in ["bytes)", "offset ", "id ", "age "] {
                    assert!(
                        title.contains(part),
                        "{name}: {part:?} missing from {title:?}"
                    );
                }
            }
        }
        // Every band and series of the timeline has a title.
        let tdoc = parse(&timeline);
        for class in ["series", "band"] {
            for node in with_class(&tdoc, class) {
                assert!(title_of(node).is_some(), "{name}: a {class} without title");
            }
        }
    }
    let (_, pages) = pictures(&layers_snapshot(), None);
    let doc = parse(&pages);
    let weights = with_class(&doc, "slice")
        .iter()
        .filter_map(|n| title_of(*n))
        .find(|t| t.starts_with("layer 0/weights"))
        .unwrap();
    assert!(weights.contains("300.00 KiB (307200 bytes)"), "{weights}");
    assert!(weights.contains("id 1"), "{weights}");
    assert!(
        weights.contains("at app::load_weights (./src/app.rs:42)"),
        "{weights}"
    );
}

// ---- item 4: legible and colour-safe ----------------------------------------------------

#[test]
fn every_text_is_at_least_10_px_at_880_px_and_lies_within_the_picture() {
    let (timeline, pages) = demo_pictures();
    // The layers' largest page is 1 MiB: its last offset tick sits at the right edge.
    let (_, layer_pages) = pictures(&layers_snapshot(), None);
    for (name, svg) in [
        ("timeline", timeline),
        ("pages", pages),
        ("layer pages", layer_pages),
    ] {
        let doc = parse(&svg);
        let width = number(doc.root_element(), "width");
        let texts: Vec<Node<'_, '_>> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .collect();
        assert!(!texts.is_empty());
        for text in texts {
            let size = number(text, "font-size") * 880.0 / width;
            assert!(
                size >= 10.0,
                "{name}: {:?} is {size:.1} px at 880 px",
                text_of(text)
            );
            let mut w = style::text_width(&text_of(text), number(text, "font-size"));
            if text.attribute("font-weight") == Some("bold") {
                w *= style::BOLD;
            }
            let x = number(text, "x");
            let (left, right) = match text.attribute("text-anchor") {
                Some("middle") => (x - w / 2.0, x + w / 2.0),
                Some("end") => (x - w, x),
                _ => (x, x + w),
            };
            assert!(
                left >= 0.0 && right <= width,
                "{name}: {:?} spans {left:.0}..{right:.0}",
                text_of(text)
            );
        }
    }
}

fn solid(fill: &str) -> Option<Rgb> {
    let hex = fill.strip_prefix('#')?;
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some(Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8))
}

#[test]
fn touching_series_stay_apart_under_deuteranopia_and_protanopia() {
    let snapshot = demo::snapshot();
    let (timeline, pages) = pictures(&snapshot, None);
    // The timeline's layers, bottom up: neighbours in the stack touch.
    let doc = parse(&timeline);
    let mut layers: Vec<(usize, String)> = doc
        .descendants()
        .filter(|n| n.attribute("data-stack").is_some())
        .map(|n| {
            (
                n.attribute("data-stack").unwrap().parse().unwrap(),
                n.attribute("fill").unwrap().to_string(),
            )
        })
        .collect();
    layers.sort();
    assert!(layers.len() >= 8);
    let mut pairs = 0;
    for pair in layers.windows(2) {
        if let (Some(a), Some(b)) = (solid(&pair[0].1), solid(&pair[1].1)) {
            let d = cvd::min_delta_e(a, b);
            assert!(
                d >= cvd::MIN_DELTA_E,
                "layers {} and {}: ΔE {d:.1}",
                pair[0].1,
                pair[1].1
            );
            pairs += 1;
        } else {
            // One of them is hatched: the pattern tells them apart.
            assert_ne!(pair[0].1, pair[1].1);
        }
    }
    assert!(pairs >= 6);
    // No colour is used by two series.
    let fills: Vec<&str> = layers.iter().map(|(_, f)| f.as_str()).collect();
    for (i, f) in fills.iter().enumerate() {
        assert!(!fills[i + 1..].contains(f), "{f} repeats");
    }
    // The page map's runs: neighbours in one bar touch.
    let doc = parse(&pages);
    let runs: Vec<(f64, f64, f64, String)> = with_class(&doc, "run")
        .iter()
        .map(|n| {
            (
                number(*n, "y"),
                number(*n, "x"),
                number(*n, "x") + number(*n, "width"),
                n.attribute("fill").unwrap().to_string(),
            )
        })
        .collect();
    let mut checked = 0;
    for pair in runs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.0 != b.0 || (a.2 - b.1).abs() > 0.02 || a.3 == b.3 {
            continue;
        }
        if let (Some(x), Some(y)) = (solid(&a.3), solid(&b.3)) {
            let d = cvd::min_delta_e(x, y);
            assert!(d >= cvd::MIN_DELTA_E, "runs {} and {}: ΔE {d:.1}", a.3, b.3);
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} touching runs");
}

#[test]
fn the_legend_lists_only_marker_kinds_that_occur() {
    let legend = |snapshot: &MemorySnapshot| -> Vec<String> {
        let (timeline, _) = pictures(snapshot, None);
        let doc = parse(&timeline);
        with_class(&doc, "legend-entry")
            .iter()
            .map(|n| text_of(*n))
            .collect()
    };
    let all = legend(&demo::snapshot());
    for wanted in [
        "pages made",
        "pages given back",
        "1 cleanup (",
        "1 out-of-memory failure (",
    ] {
        assert!(
            all.iter().any(|t| t.contains(wanted)),
            "{wanted:?} missing from {all:?}"
        );
    }
    let mut cleanups_only = demo::snapshot();
    cleanups_only.history.retain(|event| {
        !matches!(
            event.kind,
            EventKind::PageMade | EventKind::PageReleased | EventKind::OutOfMemory
        )
    });
    let some = legend(&cleanups_only);
    assert!(some.iter().any(|t| t.starts_with("1 cleanup (")));
    for unwanted in ["made (", "given back (", "out-of-memory"] {
        assert!(
            !some.iter().any(|t| t.contains(unwanted)),
            "{unwanted:?} in {some:?}"
        );
    }
}

#[test]
fn pools_without_pages_get_no_heading_but_are_counted() {
    let mut snapshot = demo::snapshot();
    let memory = &mut snapshot.memories[0];
    let mut empty = memory.pools[0].clone();
    empty.pages.clear();
    empty.index = 9;
    empty.pool = "never used".to_string();
    memory.pools.push(empty);
    let (_, svg) = pictures(&snapshot, None);
    let doc = parse(&svg);
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .collect();
    assert!(!texts.iter().any(|text| text.contains("never used")));
    assert!(
        texts
            .iter()
            .any(|text| text.starts_with("main memory") && text.ends_with("1 pool without pages")),
        "{texts:?}"
    );
    assert_eq!(page_bars(&svg), 20);
}

/// A snapshot taken with history off has no events to spread over time: the timeline
/// draws no time ticks (they would count fractions of a µs past the moment it was
/// taken) and says in the plot that history was off and how to turn it on.
#[test]
fn a_snapshot_without_history_says_so_instead_of_drawing_a_time_axis() {
    let mut snapshot = layers_snapshot();
    snapshot.history.clear();
    snapshot.history_dropped = 0;
    let (timeline, _) = pictures(&snapshot, None);
    let doc = parse(&timeline);
    let ticks: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .filter(|text| {
            text.strip_suffix(" ms")
                .is_some_and(|n| n.parse::<f64>().is_ok())
        })
        .collect();
    assert!(ticks.is_empty(), "time ticks drawn: {ticks:?}");
    let note = with_class(&doc, "no-history");
    assert_eq!(note.len(), 1, "one note in the plot");
    let text = text_of(note[0]);
    assert!(text.contains("history was off"), "{text}");
    assert!(text.contains("record_history"), "{text}");
    assert!(text.contains("[memory] history"), "{text}");
    // Every line of the note lies inside its box.
    let frame = note[0]
        .children()
        .rfind(|n| n.has_tag_name("rect"))
        .unwrap();
    let (left, right) = (
        number(frame, "x"),
        number(frame, "x") + number(frame, "width"),
    );
    for line in note[0].children().filter(|n| n.has_tag_name("text")) {
        let w = style::text_width(&text_of(line), number(line, "font-size"));
        let x = number(line, "x");
        assert!(
            x - w / 2.0 >= left && x + w / 2.0 <= right,
            "{:?}",
            text_of(line)
        );
    }
    // With history, no such note.
    let (with_history, _) = pictures(&layers_snapshot(), None);
    assert!(with_class(&parse(&with_history), "no-history").is_empty());
}

/// Staging pages that hold no slice are drawn as empty main pages are: hatched, and named
/// idle, apart from staging pages in use. The readback page holds nothing all along; the
/// upload page is made at 1.5 ms for a write and holds its slice until the snapshot.
#[test]
fn idle_staging_is_hatched_like_empty_main_pages() {
    let mut snapshot = layers_snapshot();
    snapshot.memories.push(MemorySnapshotMemory {
        name: "upload".to_string(),
        pools: vec![PoolSnapshot {
            pool: "sliced 256 KiB".to_string(),
            index: 0,
            pages: vec![PageSnapshot {
                id: 30,
                size: 256 << 10,
                slices: vec![SliceSnapshot::live(0, 1000, 24)],
            }],
        }],
    });
    snapshot.history.push(HistoryEvent {
        memory: Some("upload".to_string()),
        pool: Some("sliced 256 KiB".to_string()),
        page: Some(30),
        ..HistoryEvent::new(1_500, EventKind::PageMade, 256 << 10)
    });
    snapshot.history.sort_by_key(|e| e.time_us);
    let (timeline, _) = pictures(&snapshot, None);
    let doc = parse(&timeline);
    let bands: Vec<(String, String)> = with_class(&doc, "band")
        .iter()
        .map(|n| {
            (
                title_of(*n).unwrap(),
                n.attribute("fill").unwrap_or("").to_string(),
            )
        })
        .collect();
    let band = |name: &str| bands.iter().find(|(title, _)| title.starts_with(name));
    let idle = band("idle readback staging").unwrap_or_else(|| panic!("no idle band in {bands:?}"));
    assert!(
        idle.1.starts_with("url("),
        "idle staging is hatched: {idle:?}"
    );
    assert!(idle.0.contains("65536 bytes"), "{idle:?}");
    assert!(band("readback staging pages in use").is_none(), "{bands:?}");
    let upload = band("upload staging pages in use").unwrap_or_else(|| panic!("{bands:?}"));
    assert!(
        !upload.1.starts_with("url("),
        "staging in use is solid: {upload:?}"
    );
    let empty = band("empty main pages").unwrap();
    assert!(empty.1.starts_with("url("));
    // The key lists the idle band with a hatched swatch.
    let key = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(key.contains("idle readback staging"), "{key}");
}

/// A release run's shape: one page made at 0.1 ms, nothing until the work at 500 ms (50
/// reservations and frees in 20 ms), then nothing until the snapshot at 1 s. On a
/// wall-clock axis the work would get 2 % of the width; the quiet stretches are drawn
/// short instead, so the work gets most of it, the ticks still read real times in order,
/// and each quiet stretch is marked with its real length.
pub(super) fn warm_up_burst_and_idle_tail() -> MemorySnapshot {
    let mut snapshot = layers_snapshot();
    let mut history = vec![event(100, EventKind::PageMade, PAGE, 0)];
    for i in 0..50u64 {
        let at = 500_000 + i * 400;
        history.push(reserve(at, 1024 * (i + 1), 0, 0, 100 + i, "work"));
        history.push(free(at + 200, 1024 * (i + 1), 0, 0, 100 + i, "work"));
    }
    snapshot.history = history;
    snapshot.memories[0].pools[0].pages.truncate(1);
    snapshot.memories[0].pools[0].pages[0].slices = vec![SliceSnapshot::free(0, PAGE)];
    snapshot.memories.truncate(1);
    snapshot.taken_us = 1_000_000;
    snapshot
}

#[test]
fn quiet_stretches_are_drawn_short_so_the_work_gets_the_width() {
    let (timeline, _) = pictures(&warm_up_burst_and_idle_tail(), None);
    let doc = parse(&timeline);
    let (_, width, _, _, _) = plot(&doc);
    // The work's extent: where the in-use layer's outline rises above the baseline.
    let plot_rect = with_class(&doc, "plot")[0];
    let baseline = number(plot_rect, "y") + number(plot_rect, "height");
    let series = with_class(&doc, "series");
    assert_eq!(series.len(), 1);
    let d = series[0].attribute("d").unwrap();
    let numbers: Vec<f64> = d
        .split([' ', 'M', 'L', 'Z'])
        .filter_map(|n| n.parse::<f64>().ok())
        .collect();
    let raised: Vec<f64> = numbers
        .chunks(2)
        .filter(|p| p.len() == 2 && p[1] < baseline - 0.5)
        .map(|p| p[0])
        .collect();
    let (first, last) = (
        raised.iter().copied().fold(f64::MAX, f64::min),
        raised.iter().copied().fold(f64::MIN, f64::max),
    );
    assert!(
        last - first >= 0.6 * width,
        "the work spans {:.0} of {width:.0} px",
        last - first
    );
    // Each quiet stretch is marked, with its real length in its hover text.
    let breaks = with_class(&doc, "axis-break");
    assert_eq!(breaks.len(), 2, "the warm-up and the idle tail");
    let titles: Vec<String> = breaks.iter().map(|b| title_of(*b).unwrap()).collect();
    assert!(titles[0].contains("499.9 ms"), "{titles:?}");
    assert!(titles[1].contains("480.2 ms"), "{titles:?}");
    // Tick labels read real times, increasing left to right.
    let mut ticks: Vec<(f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| {
            let ms = text_of(n).strip_suffix(" ms")?.parse::<f64>().ok()?;
            Some((number(n, "x"), ms))
        })
        .collect();
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(ticks.len() >= 4, "{ticks:?}");
    assert!(ticks.windows(2).all(|w| w[1].1 > w[0].1), "{ticks:?}");
    assert!(
        ticks.iter().any(|&(_, ms)| (500.0..=520.0).contains(&ms)),
        "{ticks:?}"
    );
    assert!(
        ticks.windows(2).all(|w| w[1].0 - w[0].0 >= 30.0),
        "labels apart: {ticks:?}"
    );
}
