//! memory_viz on the demo snapshot, and on a worst case for the page map's size.

use super::*;
use wgpu_memory::report::{MemorySnapshot, PageSnapshot, SliceSnapshot};

/// The SVGs must stay small enough to commit and open.
const MAX_SVG_BYTES: usize = 2 * 1024 * 1024;

/// The number of page bars: rects outlined in the page-frame colour, which nothing else uses.
fn page_bars(svg: &str) -> usize {
    let frame = format!(
        "#{:02X}{:02X}{:02X}",
        style::PAGE_FRAME.0,
        style::PAGE_FRAME.1,
        style::PAGE_FRAME.2
    );
    let document = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    document
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

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memory-viz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

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
fn the_demo_history_ends_at_its_live_slices() {
    // Walking the history from zero must land on the live slices exactly: the demo's
    // history is complete, so nothing needs the end anchor.
    let snapshot = demo::snapshot();
    let mut in_use: i128 = 0;
    for event in &snapshot.history {
        match event.kind {
            wgpu_memory::report::EventKind::Reserve => in_use += i128::from(event.bytes),
            wgpu_memory::report::EventKind::Free => in_use -= i128::from(event.bytes),
            _ => {}
        }
    }
    assert_eq!(in_use, i128::from(snapshot.totals().bytes_in_use));
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
    roxmltree::Document::parse(&timeline).expect("timeline.svg parses as XML");
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
    let labels = TopLabels::from_snapshot(&snapshot, DEFAULT_TOP, None);
    let pages = pages_svg::render(&snapshot, &labels).unwrap();
    assert!(
        pages.len() < MAX_SVG_BYTES,
        "pages.svg: {} bytes",
        pages.len()
    );
    assert_eq!(page_bars(&pages), 20);
    let timeline = timeline_svg::render(&snapshot, &labels).unwrap();
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
        out,
    ];
    assert!(matches!(run(&missing), Err(Failure::Input(_))));
    assert!(matches!(
        run(&["--top".to_string(), "x".to_string()]),
        Err(Failure::Input(_))
    ));
    assert!(matches!(run(&[]), Err(Failure::Input(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_snapshot_draws() {
    let mut snapshot = demo::snapshot();
    snapshot.memories.clear();
    snapshot.history.clear();
    let labels = TopLabels::from_snapshot(&snapshot, DEFAULT_TOP, None);
    roxmltree::Document::parse(&timeline_svg::render(&snapshot, &labels).unwrap()).unwrap();
    let pages = pages_svg::render(&snapshot, &labels).unwrap();
    assert_eq!(page_bars(&pages), 0);
}

/// Each `<text>` of `svg` as (estimated left edge, estimated right edge, content), the width
/// estimated with [`style::text_width`] from the SVG's font size (plotters' size / 1.24),
/// wider for bold, and placed by the text's anchor.
fn text_extents(svg: &str) -> Vec<(f64, f64, String)> {
    let document = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    document
        .descendants()
        .filter(|node| node.has_tag_name("text"))
        // Rotated texts (the y axis title) run up the left margin, not across.
        .filter(|node| node.attribute("transform").is_none())
        .map(|node| {
            let number = |name: &str| -> f64 {
                node.attribute(name)
                    .unwrap_or_else(|| panic!("a text without {name}"))
                    .parse()
                    .unwrap()
            };
            let content: String = node
                .descendants()
                .filter(|n| n.is_text())
                .filter_map(|n| n.text())
                .collect::<String>()
                .replace('\u{a0}', " ")
                .trim()
                .to_string();
            let mut width = style::text_width(&content, number("font-size") * 1.24);
            if node.attribute("font-weight") == Some("bold") {
                width *= style::BOLD;
            }
            let x = number("x");
            let (left, right) = match node.attribute("text-anchor") {
                Some("middle") => (x - width / 2.0, x + width / 2.0),
                Some("end") => (x - width, x),
                _ => (x, x + width),
            };
            (left, right, content)
        })
        .collect()
}

/// The SVG's width attribute.
fn svg_width(svg: &str) -> f64 {
    let document = roxmltree::Document::parse(svg).unwrap();
    document
        .root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap()
}

/// Asserts that every text of `svg` lies within its width.
fn assert_texts_inside(svg: &str, name: &str) {
    let width = svg_width(svg);
    let texts = text_extents(svg);
    assert!(!texts.is_empty(), "{name}: no text at all");
    for (left, right, content) in texts {
        assert!(
            left >= 0.0 && right <= width,
            "{name}: {content:?} spans {left:.0}..{right:.0}, outside 0..{width}"
        );
    }
}

/// The legend texts of a timeline: those right of the plot.
fn legend_texts(svg: &str) -> Vec<String> {
    let plot_right = f64::from(timeline_svg::WIDTH - timeline_svg::LEGEND);
    text_extents(svg)
        .into_iter()
        .filter(|(left, _, _)| *left >= plot_right)
        .map(|(_, _, content)| content)
        .collect()
}

/// The demo with the label "weights" renamed to `label` in its slices and history.
fn relabelled_demo(label: &str) -> MemorySnapshot {
    let mut snapshot = demo::snapshot();
    let rename = |old: &mut Option<String>| {
        if let Some(text) = old
            && (text == "weights" || text.starts_with("weights/"))
        {
            *old = Some(label.to_string());
        }
    };
    for slice in snapshot
        .memories
        .iter_mut()
        .flat_map(|m| &mut m.pools)
        .flat_map(|p| &mut p.pages)
        .flat_map(|p| &mut p.slices)
    {
        rename(&mut slice.label);
    }
    for event in &mut snapshot.history {
        rename(&mut event.label);
    }
    snapshot
}

const LONG_LABEL: &str =
    "encoder/block 11/self-attention/query-key-value projection weights (bf16, sharded)";

#[test]
fn every_text_of_both_pictures_lies_within_the_svg_width() {
    for (name, snapshot) in [
        ("demo", demo::snapshot()),
        ("long label", relabelled_demo(LONG_LABEL)),
    ] {
        for depth in [None, Some(1)] {
            let labels = TopLabels::from_snapshot(&snapshot, DEFAULT_TOP, depth);
            let timeline = timeline_svg::render(&snapshot, &labels).unwrap();
            assert_texts_inside(&timeline, &format!("{name} timeline, depth {depth:?}"));
            let pages = pages_svg::render(&snapshot, &labels).unwrap();
            assert_texts_inside(&pages, &format!("{name} pages, depth {depth:?}"));
        }
    }
}

#[test]
fn a_long_label_is_wrapped_in_the_timeline_legend_not_cut() {
    let snapshot = relabelled_demo(LONG_LABEL);
    let labels = TopLabels::from_snapshot(&snapshot, DEFAULT_TOP, None);
    let svg = timeline_svg::render(&snapshot, &labels).unwrap();
    let legend = legend_texts(&svg);
    assert!(
        legend.iter().all(|text| !text.contains('…')),
        "a legend text was cut: {legend:?}"
    );
    // The label's lines, joined, give the whole label back.
    let joined = legend.join(" ");
    assert!(
        joined
            .replace(' ', "")
            .contains(&LONG_LABEL.replace(' ', "")),
        "{LONG_LABEL:?} is not whole in {legend:?}"
    );
    assert_texts_inside(&svg, "long label timeline");
}

#[test]
fn the_timeline_legend_lists_only_marker_kinds_that_occur() {
    use wgpu_memory::report::EventKind;
    let all = demo::snapshot();
    let labels = TopLabels::from_snapshot(&all, DEFAULT_TOP, None);
    let legend = legend_texts(&timeline_svg::render(&all, &labels).unwrap());
    for wanted in [
        "pages made",
        "pages given back",
        "1 cleanup (",
        "1 out-of-memory failure (",
    ] {
        assert!(
            legend.iter().any(|text| text.contains(wanted)),
            "{wanted:?} missing from {legend:?}"
        );
    }

    // Only cleanups: no page or out-of-memory entry, and no entry counting 0.
    let mut cleanups_only = demo::snapshot();
    cleanups_only.history.retain(|event| {
        !matches!(
            event.kind,
            EventKind::PageMade | EventKind::PageReleased | EventKind::OutOfMemory
        )
    });
    let legend = legend_texts(&timeline_svg::render(&cleanups_only, &labels).unwrap());
    assert!(legend.iter().any(|text| text.starts_with("1 cleanup (")));
    for unwanted in ["page", "out-of-memory", ": 0", " 0 "] {
        assert!(
            !legend.iter().any(|text| text.contains(unwanted)),
            "{unwanted:?} listed in {legend:?}"
        );
    }

    // No markers at all: the legend says so instead of listing zeros.
    let mut none = demo::snapshot();
    none.history.retain(|event| {
        !matches!(
            event.kind,
            EventKind::PageMade
                | EventKind::PageReleased
                | EventKind::OutOfMemory
                | EventKind::Cleanup
        )
    });
    let legend = legend_texts(&timeline_svg::render(&none, &labels).unwrap());
    assert!(
        legend.iter().any(|text| text.starts_with("no pages made")),
        "{legend:?}"
    );
    assert!(!legend.iter().any(|text| text.contains("cleanup (")));
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
    let labels = TopLabels::from_snapshot(&snapshot, DEFAULT_TOP, None);
    let svg = pages_svg::render(&snapshot, &labels).unwrap();
    let texts: Vec<String> = text_extents(&svg).into_iter().map(|t| t.2).collect();
    assert!(!texts.iter().any(|text| text.contains("never used")));
    assert!(
        texts
            .iter()
            .any(|text| text.starts_with("main memory") && text.ends_with("1 pool without pages")),
        "{texts:?}"
    );
    assert_eq!(page_bars(&svg), 20);
}
