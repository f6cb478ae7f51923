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
                    offset: i * step,
                    size: step - step / 8,
                    padding: step / 16,
                    live: true,
                    id: Some(i),
                    label: Some(labels[(i % 10) as usize].to_string()),
                    age_us: Some(i),
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
