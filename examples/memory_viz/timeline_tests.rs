//! timeline.svg: what its peak counts, a time window (`--from`, `--to`), and the pools
//! named in the band legend.

use super::tests::{
    PAGE, event, free, layers_snapshot, parse, reserve, text_of, warm_up_burst_and_idle_tail,
    with_class,
};
use super::*;
use wgpu_memory::report::{EventKind, HistoryEvent};

fn timeline(snapshot: &MemorySnapshot, window: Option<(u64, u64)>) -> String {
    let labels = TopLabels::from_snapshot(snapshot, DEFAULT_TOP, None);
    timeline_svg::render(snapshot, &labels, window)
}

/// Every text of the picture, joined line by line.
fn texts(svg: &str) -> String {
    let doc = parse(svg);
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(text_of)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The summary's "peak held" and the timeline's "peak reserved" of one run differ with
/// nothing saying why: the timeline says what its peak counts, naming the other.
#[test]
fn the_timeline_says_what_peak_reserved_counts() {
    let text = texts(&timeline(&layers_snapshot(), None))
        .replace('\n', " ")
        .to_lowercase();
    for part in ["peak reserved:", "at the events drawn", "\"peak held\""] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
}

/// 100 training steps were 1-pixel slivers under the axis a 10 ms fill set: a window
/// draws only its part of the history, at full width, with the levels it starts with.
#[test]
fn a_window_draws_only_its_part_at_full_width() {
    let snapshot = warm_up_burst_and_idle_tail();
    // The burst runs from 500 ms to about 520 ms; draw 505 to 510 ms only.
    let (from, to) = (505_000, 510_000);
    let svg = timeline(&snapshot, Some((from, to)));
    let doc = parse(&svg);
    let plot = with_class(&doc, "plot")[0];
    assert_eq!(plot.attribute("data-start-us"), Some("505000"));
    assert_eq!(plot.attribute("data-end-us"), Some("510000"));
    // No quiet stretch inside the window: nothing is drawn short.
    assert!(with_class(&doc, "axis-break").is_empty());
    // The window is named, with the whole history's span.
    let text = texts(&svg).replace('\n', " ");
    assert!(text.contains("window 505.0 ms to 510.0 ms"), "{text}");
    // The page made at 0.1 ms is held in the window: reserved starts at the page.
    let line = with_class(&doc, "reserved-line")[0];
    let title = super::tests::title_of(line).unwrap();
    assert!(title.contains(&format!("{PAGE} bytes")), "{title}");
}

/// A window outside the history, or one that ends before it starts, is refused.
#[test]
fn the_window_options_parse_and_bad_windows_are_refused() {
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match parse_args(&args(&[
        "s.json", "--out", "d", "--from", "5ms", "--to", "7.5ms",
    ])) {
        Ok(Command::Draw { window, .. }) => {
            assert_eq!(
                window,
                Window {
                    from_us: Some(5_000),
                    to_us: Some(7_500)
                }
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse_args(&args(&[
            "s.json", "--out", "d", "--from", "7ms", "--to", "5ms"
        ])),
        Err(Failure::Input(_))
    ));
    let snapshot = layers_snapshot();
    let out = std::env::temp_dir().join(format!("memory-viz-window-{}", std::process::id()));
    let past = Window {
        from_us: Some(50_000),
        to_us: None,
    };
    match draw(&snapshot, &out, DEFAULT_TOP, Depth::Fitting, None, past) {
        Err(Failure::Input(message)) => assert!(message.contains("--from"), "{message}"),
        other => panic!("expected an input failure, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The band legend named memories ("empty main pages"), not the pool holding the idle
/// pages: each band's entry names the pools whose pages it drew.
#[test]
fn the_band_legend_names_the_pools_of_its_pages() {
    let mut snapshot = layers_snapshot();
    // Page 3 of the adaptive pool is made, used, and left empty.
    let adaptive = |mut e: HistoryEvent| {
        e.pool = Some("adaptive".to_string());
        e
    };
    snapshot.history.extend([
        adaptive(event(8_500, EventKind::PageMade, 2 * PAGE, 3)),
        adaptive(reserve(8_600, 1000, 3, 0, 9, "scratch")),
        adaptive(free(8_700, 1000, 3, 0, 9, "scratch")),
    ]);
    snapshot.memories[0]
        .pools
        .push(wgpu_memory::report::PoolSnapshot {
            pool: "adaptive".to_string(),
            index: 1,
            pages: vec![wgpu_memory::report::PageSnapshot {
                id: 3,
                size: 2 * PAGE,
                slices: vec![],
            }],
        });
    let svg = timeline(&snapshot, None);
    let doc = parse(&svg);
    let entries: Vec<String> = with_class(&doc, "legend-entry")
        .into_iter()
        .map(text_of)
        .collect();
    let empty = entries
        .iter()
        .find(|e| e.starts_with("empty main pages"))
        .unwrap_or_else(|| panic!("no empty-pages entry in {entries:?}"));
    assert!(empty.contains("adaptive"), "{empty}");
    let free_inside = entries
        .iter()
        .find(|e| e.starts_with("main memory free inside used pages"))
        .unwrap_or_else(|| panic!("no free-inside entry in {entries:?}"));
    assert!(free_inside.contains("sliced 1 MiB"), "{free_inside}");
}
