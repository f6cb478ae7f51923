//! The pickle read as PyTorch's viewer (`MemoryViz.js`, pytorch.org/memory_viz) reads it,
//! rule by rule, on the fixture:
//!
//! - it renumbers streams: 0 stays 0, every other stream takes the next number in the
//!   order it first appears in the trace, then in the segments;
//! - its timelines make one element per `alloc` (or `segment_alloc`), per free that no
//!   earlier alloc of its address opened, and per active block (or segment) of the
//!   snapshot no open alloc covers; an element from the snapshot's segments gets no
//!   frames of its own;
//! - an element's pool is its own `segment_pool_id`, else that of the snapshot segment
//!   holding its address, else "pool_id unknown";
//! - empty frames print "This block has no frames" with causes that are PyTorch's;
//! - an `oom` entry prints its size, `device_free` and stream, then its frames;
//! - `allocator_settings` is printed as JSON, or "No allocator settings found".

use super::{fixture, int, read_back, segments, trace};
use serde_json::Value;
use std::collections::BTreeMap;

/// The viewer's stream numbers: ours mapped to the numbers it shows.
fn viewer_streams(value: &Value) -> BTreeMap<u64, u64> {
    let mut numbers = BTreeMap::from([(0, 0)]);
    let streams = trace(value)
        .iter()
        .chain(segments(value))
        .map(|record| int(&record["stream"]));
    for stream in streams {
        let next = numbers.len() as u64;
        numbers.entry(stream).or_insert(next);
    }
    numbers
}

/// One element of a viewer timeline: its frames and its pool, if the viewer finds one.
#[derive(Debug)]
struct Element {
    what: String,
    frames: Vec<Value>,
    pool: Option<Value>,
}

/// The elements of the Active Cached Segment Timeline (`segments`) or of the Active
/// Memory Timeline (blocks).
fn elements(value: &Value, segment_view: bool) -> Vec<Element> {
    let (alloc, frees): (&str, &[&str]) = if segment_view {
        ("segment_alloc", &["segment_free"])
    } else {
        ("alloc", &["free", "free_completed"])
    };
    let segment_of = |addr: u64| {
        segments(value).iter().find(|s| {
            let start = int(&s["address"]);
            (start..start + int(&s["total_size"])).contains(&addr)
        })
    };
    let element = |what: String, frames: &Value, own_pool: Option<&Value>, addr: u64| Element {
        what,
        frames: frames.as_array().cloned().unwrap_or_default(),
        pool: own_pool
            .cloned()
            .or_else(|| segment_of(addr).map(|s| s["segment_pool_id"].clone())),
    };
    let mut out = Vec::new();
    let mut open: BTreeMap<u64, ()> = BTreeMap::new();
    for entry in trace(value) {
        let action = entry["action"].as_str().unwrap();
        let Some(addr) = entry["addr"].as_u64() else {
            continue;
        };
        if action == alloc {
            open.insert(addr, ());
            out.push(element(
                format!("{action} {addr:#x}"),
                &entry["frames"],
                entry.get("segment_pool_id"),
                addr,
            ));
        } else if frees.contains(&action) && open.remove(&addr).is_none() {
            out.push(element(
                format!("{action} {addr:#x} (no alloc)"),
                &entry["frames"],
                entry.get("segment_pool_id"),
                addr,
            ));
        }
    }
    for segment in segments(value) {
        let address = int(&segment["address"]);
        if segment_view {
            if !open.contains_key(&address) {
                // The viewer gives these no frames.
                out.push(Element {
                    what: format!("segment {address:#x} of the snapshot"),
                    frames: Vec::new(),
                    pool: Some(segment["segment_pool_id"].clone()),
                });
            }
            continue;
        }
        for block in segment["blocks"].as_array().unwrap() {
            let addr = int(&block["address"]);
            if block["state"] == "active_allocated" && !open.contains_key(&addr) {
                out.push(element(
                    format!("block {addr:#x} of the snapshot"),
                    &block["frames"],
                    Some(&segment["segment_pool_id"]),
                    addr,
                ));
            }
        }
    }
    out
}

/// The viewer showed the upload memory as stream 1 and staging as 2, the reverse of our
/// numbering: the numbers we write are the ones it shows, and the settings name them.
#[test]
fn the_viewer_shows_our_stream_numbers_and_the_settings_name_them() {
    let value = read_back(&fixture());
    for (ours, shown) in viewer_streams(&value) {
        assert_eq!(ours, shown, "stream {ours} is shown as {shown}");
    }
    let names = &value["allocator_settings"]["streams"];
    assert_eq!(names["0"], "main", "{names}");
    for segment in segments(&value) {
        let memory = &segment["frames"][0]["name"];
        assert_eq!(&names[int(&segment["stream"]).to_string()], memory);
    }
}

/// 13 of 22 hovers of the Active Cached Segment Timeline said "pool_id unknown" (pages
/// given back since have no segment in the snapshot), and every one printed "This block
/// has no frames": every element names its pool and has frames.
#[test]
fn every_segment_of_the_segment_timeline_has_a_pool_and_frames() {
    // The whole history, and one whose first 4 events were dropped: page 7 was then made
    // before the history's first event, and page 8 is only given back in it.
    let whole = fixture();
    let mut newer = whole.clone();
    newer.history.drain(..4);
    newer.history_dropped = 4;
    for (snapshot, count) in [(whole, 5), (newer, 4)] {
        let value = read_back(&snapshot);
        let elements = elements(&value, true);
        assert_eq!(elements.len(), count, "{elements:#?}");
        for element in &elements {
            assert_eq!(
                element.pool,
                Some(serde_json::json!([0, 0])),
                "pool_id unknown: {}",
                element.what
            );
            assert!(!element.frames.is_empty(), "no frames: {}", element.what);
        }
    }
}

/// The same on the Active Memory Timeline: every allocation names its pool and has
/// frames, a slice reserved without a label included.
#[test]
fn every_allocation_of_the_memory_timeline_has_a_pool_and_frames() {
    let mut snapshot = fixture();
    // A slice without a label: its frames name its memory and pool.
    for event in &mut snapshot.history {
        if event.id == Some(3) {
            event.label = None;
        }
    }
    for page in snapshot.memories[0].pools[1].pages.iter_mut() {
        for slice in &mut page.slices {
            slice.label = None;
        }
    }
    let value = read_back(&snapshot);
    for element in elements(&value, false) {
        assert_eq!(
            element.pool,
            Some(serde_json::json!([0, 0])),
            "pool_id unknown: {}",
            element.what
        );
        assert!(!element.frames.is_empty(), "no frames: {}", element.what);
    }
}

/// Given-back pages never showed their memory's name: each `segment_free` names its
/// memory and pool.
#[test]
fn given_back_pages_name_their_memory_and_pool() {
    let value = read_back(&fixture());
    let frees: Vec<&Value> = trace(&value)
        .iter()
        .filter(|e| e["action"] == "segment_free")
        .collect();
    assert_eq!(frees.len(), 2, "pages 2 and 8");
    for free in frees {
        let frames = free["frames"].as_array().unwrap();
        assert!(
            frames
                .iter()
                .any(|f| f["filename"] == "memory" && f["name"] == "main"),
            "{free}"
        );
        assert!(
            frames
                .iter()
                .any(|f| f["filename"] == "pool" && f["name"] == "sliced 1.00 KiB"),
            "{free}"
        );
    }
}

/// An upload refusal never said "upload" (only "(stream 1)"), and its numbers did not
/// add up (1.1 MiB reserved under a 2.25 MiB budget, "128 KiB free"): its frames name
/// the refused memory and split the budget into pages held, pages given back the device
/// still used, and what was free.
#[test]
fn the_oom_entry_names_the_refused_memory_and_its_numbers_add_up() {
    let value = read_back(&fixture());
    let oom = trace(&value)
        .iter()
        .find(|e| e["action"] == "oom")
        .expect("an oom entry");
    let text: Vec<String> = oom["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}:{}:{}", f["filename"], f["line"], f["name"]).replace('"', ""))
        .collect();
    let text = text.join("\n");
    assert!(text.contains("upload"), "{text}");
    let (budget, held, retiring, free) = (2_359_296u64, 1_179_648u64, 1_048_576u64, 131_072u64);
    assert_eq!(held + retiring + free, budget);
    for number in [budget, held, retiring, free] {
        assert!(
            text.contains(&format!("{number} bytes")),
            "{number} in {text}"
        );
    }
    assert!(text.contains("given back"), "{text}");
    assert!(!text.contains("  "), "runs of spaces in {text}");
    assert_eq!(int(&oom["device_free"]), free);
    // The label of the refused reservation is still there.
    assert!(text.contains("model/huge"), "{text}");
}

/// "No allocator settings found": the snapshot's settings are exported (the budget,
/// the pools of each memory, the page sizes held, the streams and the history's bound).
#[test]
fn allocator_settings_are_exported() {
    let value = read_back(&fixture());
    let settings = &value["allocator_settings"];
    assert!(settings.is_object(), "{value}");
    assert_eq!(settings["budget"], 2_359_296);
    assert_eq!(settings["history_events"], 18);
    assert_eq!(settings["history_dropped"], 0);
    let pools = &settings["pools"];
    assert_eq!(pools["main"][0], "pool 0: sliced 1.00 KiB", "{settings}");
    assert_eq!(pools["main"][1], "pool 1: exclusive", "{settings}");
    assert_eq!(
        settings["page_sizes"]["main"],
        serde_json::json!([1024, 4096])
    );
    assert_eq!(
        settings["page_sizes"]["upload"],
        serde_json::json!([262_144])
    );
}
