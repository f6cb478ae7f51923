//! The PyTorch export (`MemorySnapshot::to_pytorch_pickle`) read back: by serde-pickle
//! always, by Python's own `pickle` where python3 exists, with the fields and types
//! PyTorch's viewers read (`torch/utils/viz/MemoryViz.js`, `torch/cuda/_memory_viz.py`)
//! and the meaning they give them.
//!
//! The snapshot is written as JSON and read with `MemorySnapshot::from_json`, so the
//! fixture names fields only by their serialized names.

mod viewer;

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use wgpu_memory::report::MemorySnapshot;

/// When the fixture's client was made: 2023-11-14, in µs since 1970.
const STARTED_UNIX_US: u64 = 1_700_000_000_000_000;

fn event(time_us: u64, kind: &str, bytes: u64, memory: &str, page: u64) -> Value {
    json!({"time_us": time_us, "kind": kind, "bytes": bytes, "memory": memory, "page": page})
}

fn with(mut event: Value, fields: Value) -> Value {
    for (key, value) in fields.as_object().unwrap() {
        event[key] = value.clone();
    }
    event
}

fn live(offset: u64, size: u64, padding: u64, id: u64, label: Option<&str>) -> Value {
    let mut slice =
        json!({"offset": offset, "size": size, "padding": padding, "live": true, "id": id});
    if let Some(label) = label {
        slice["label"] = json!(label);
    }
    slice
}

/// Main memory: pool 0 (page 7 of 1 KiB) and pool 1 (page 11 of 4 KiB); upload staging:
/// page 20 with one live slice no event reserved. The history makes and gives back page
/// 2, makes pages 7 and 8,
/// reserves 0, 9, 13 and 5, frees 5, moves 9 and 13 from page 8 into page 7, gives page 8
/// back, fills pool 1, makes the upload page, fails once in upload staging (128 KiB still
/// free under a budget of 2.25 MiB) and frees 13 naming page 8 (where it was reserved, as
/// clients before moves were followed recorded it). Page 7 ends with 0, 13's hole and 9.
fn fixture() -> MemorySnapshot {
    let main = "main";
    let reserve = |time, bytes, page, offset, id, label: &str| {
        with(
            event(time, "Reserve", bytes, main, page),
            json!({"offset": offset, "id": id, "label": label, "pool": "sliced 1.00 KiB"}),
        )
    };
    let moved = |time, bytes, from: (u64, u64), to: (u64, u64), id| {
        with(
            event(time, "Move", bytes, main, to.0),
            json!({"offset": to.1, "from_page": from.0, "from_offset": from.1, "id": id}),
        )
    };
    let free = |time, bytes, page, offset, id| {
        with(
            event(time, "Free", bytes, main, page),
            json!({"offset": offset, "id": id}),
        )
    };
    let history = vec![
        with(
            event(500, "PageMade", 2048, main, 2),
            json!({"pool": "sliced 1.00 KiB"}),
        ),
        with(
            event(600, "PageReleased", 2048, main, 2),
            json!({"pool": "sliced 1.00 KiB"}),
        ),
        with(
            event(1_000, "PageMade", 1024, main, 7),
            json!({"pool": "sliced 1.00 KiB"}),
        ),
        with(
            event(1_100, "PageMade", 1024, main, 8),
            json!({"pool": "sliced 1.00 KiB"}),
        ),
        with(
            reserve(2_000, 100, 7, 0, 0, "model/weights"),
            json!({"backtrace": "   0: app::load\n             at ./src/app.rs:42:9\n"}),
        ),
        reserve(2_100, 200, 8, 0, 9, "model/activations"),
        reserve(2_150, 100, 8, 512, 13, "model/tmp"),
        reserve(2_200, 64, 8, 256, 5, "model/scratch"),
        free(2_300, 64, 8, 256, 5),
        moved(2_400, 200, (8, 0), (7, 512), 9),
        moved(2_450, 100, (8, 512), (7, 256), 13),
        with(
            event(2_500, "PageReleased", 1024, main, 8),
            json!({"pool": "sliced 1.00 KiB"}),
        ),
        with(
            event(2_600, "PageMade", 4096, main, 11),
            json!({"pool": "exclusive"}),
        ),
        with(
            event(2_700, "Reserve", 4000, main, 11),
            json!({"offset": 0, "id": 3, "label": "big", "pool": "exclusive"}),
        ),
        with(
            event(2_800, "PageMade", 262_144, "upload", 20),
            json!({"pool": "upload 256.00 KiB"}),
        ),
        // The budget refused it: 2.25 MiB = 1.125 MiB of pages held + 1 MiB of pages given
        // back that the device still used + 128 KiB free.
        json!({"time_us": 3_000, "kind": "OutOfMemory", "bytes": 524_288, "memory": "upload",
               "label": "model/huge", "free_bytes": 131_072, "budget": 2_359_296,
               "held_bytes": 1_179_648, "retiring_bytes": 1_048_576}),
        free(2_900, 100, 8, 512, 13),
        json!({"time_us": 3_500, "kind": "Launch", "bytes": 0, "label": "matmul"}),
    ];
    let snapshot = json!({
        "taken_us": 5_000,
        "started_unix_us": STARTED_UNIX_US,
        "memories": [
            {"name": "main", "pools": [
                {"pool": "sliced 1.00 KiB", "index": 0, "pages": [
                    {"id": 7, "size": 1024, "slices": [
                        live(0, 100, 28, 0, Some("model/weights")),
                        live(512, 200, 56, 9, Some("model/activations")),
                    ]},
                ]},
                {"pool": "exclusive", "index": 1, "pages": [
                    {"id": 11, "size": 4096, "slices": [live(0, 4000, 96, 3, Some("big"))]},
                ]},
            ]},
            {"name": "staging", "pools": []},
            {"name": "upload", "pools": [
                {"pool": "upload 256.00 KiB", "index": 0, "pages": [
                    {"id": 20, "size": 262_144, "slices": [live(0, 1000, 24, 500, None)]},
                ]},
            ]},
        ],
        "history": history,
        "history_dropped": 0,
        "budget": 2_359_296,
        "report": {"streams": []},
    });
    MemorySnapshot::from_json(&snapshot.to_string()).expect("the fixture is a snapshot")
}

/// The pickle read back by serde-pickle, as JSON values (tuples as lists).
fn read_back(snapshot: &MemorySnapshot) -> Value {
    let bytes = snapshot.to_pytorch_pickle().unwrap();
    serde_pickle::from_slice(&bytes, serde_pickle::DeOptions::new()).unwrap()
}

fn segments(value: &Value) -> &Vec<Value> {
    value["segments"].as_array().unwrap()
}

fn trace(value: &Value) -> &Vec<Value> {
    value["device_traces"][0].as_array().unwrap()
}

fn int(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not an integer"))
}

// ---- types, as the viewers read them ------------------------------------------------

/// Walks the pickle's opcodes: each must be one MemoryViz.js's unpickler handles (it
/// throws on any other), and no integer may be a long of more than 8 bytes (the unpickler
/// turns those into BigInt, which its arithmetic on `time_us` and addresses rejects).
fn check_opcodes(bytes: &[u8]) {
    let mut at = 0usize;
    let take = |n: usize, at: &mut usize| {
        let slice = &bytes[*at..*at + n];
        *at += n;
        slice.to_vec()
    };
    loop {
        let opcode = bytes[at];
        at += 1;
        match opcode {
            0x80 => {
                let version = take(1, &mut at)[0];
                assert!((2..=4).contains(&version), "protocol {version}");
            }
            b'.' => break,
            b'(' | b'}' | b']' | b')' | b'N' | 0x88 | 0x89 | b'e' | b'a' | b'u' | b's' | b't'
            | b'l' | b'd' | 0x85 | 0x86 | 0x87 | 0x94 => {}
            b'K' | b'q' | b'h' => {
                take(1, &mut at);
            }
            b'M' => {
                take(2, &mut at);
            }
            b'J' | b'r' | b'j' => {
                take(4, &mut at);
            }
            b'G' | 0x95 => {
                take(8, &mut at);
            }
            0x8a => {
                let n = take(1, &mut at)[0] as usize;
                assert!(n <= 8, "a {n}-byte long reads as a BigInt in MemoryViz.js");
                take(n, &mut at);
            }
            0x8c => {
                let n = take(1, &mut at)[0] as usize;
                take(n, &mut at);
            }
            b'X' => {
                let n = u32::from_le_bytes(take(4, &mut at).try_into().unwrap()) as usize;
                take(n, &mut at);
            }
            other => panic!(
                "opcode {other:#04x} at byte {} is unknown to MemoryViz.js",
                at - 1
            ),
        }
    }
    assert_eq!(at, bytes.len(), "nothing after STOP");
}

#[test]
fn the_pickle_uses_only_what_memory_viz_js_unpickles() {
    check_opcodes(&fixture().to_pytorch_pickle().unwrap());
}

/// The Python check: the standard `pickle` loads it, each record has exactly the keys of
/// `torch.cuda.memory._snapshot()`'s records with their types, blocks cover their
/// segments, and the snapshot is printed as JSON.
const PYTHON_CHECK: &str = r#"
import json, pickle, sys
with open(sys.argv[1], "rb") as f:
    s = pickle.load(f)
assert type(s) is dict and set(s) == {"segments", "device_traces", "allocator_settings"}, s.keys()
assert type(s["allocator_settings"]) is dict
FRAME = {"filename": str, "line": int, "name": str}
SEGMENT = {"device": int, "address": int, "total_size": int, "allocated_size": int,
           "active_size": int, "requested_size": int, "stream": int, "segment_type": str,
           "segment_pool_id": tuple, "is_expandable": bool, "frames": list, "blocks": list}
BLOCK = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
TRACE = {"action": str, "addr": int, "size": int, "stream": int, "time_us": int, "frames": list}
def check(record, schema):
    assert type(record) is dict, record
    assert set(record) == set(schema), (sorted(record), sorted(schema))
    for key, kind in schema.items():
        assert type(record[key]) is kind, (key, type(record[key]))
def frames(list_):
    for frame in list_:
        check(frame, FRAME)
for seg in s["segments"]:
    check(seg, SEGMENT)
    assert seg["segment_type"] in ("small", "large")
    assert len(seg["segment_pool_id"]) == 2
    frames(seg["frames"])
    end = seg["address"]
    for block in seg["blocks"]:
        check(block, BLOCK)
        assert block["state"] in ("active_allocated", "active_awaiting_free", "inactive")
        assert block["address"] == end, "blocks cover the segment in order"
        end += block["size"]
        frames(block["frames"])
    assert end == seg["address"] + seg["total_size"]
assert type(s["device_traces"]) is list and len(s["device_traces"]) == 1
for entry in s["device_traces"][0]:
    action = entry["action"]
    if action == "oom":
        schema = dict(TRACE, device_free=int)
        del schema["addr"]
    else:
        schema = dict(TRACE, segment_pool_id=tuple)
    check(entry, schema)
    assert action in ("alloc", "free_requested", "free_completed",
                      "segment_alloc", "segment_free", "oom")
    frames(entry["frames"])
# What _memory_viz.compare keys segments by.
print(json.dumps({"snapshot": s,
                  "compare_keys": sorted([seg["address"], seg["total_size"]] for seg in s["segments"])}))
"#;

/// Runs the Python check on `snapshot`'s pickle; `None` (and a note) where python3 is
/// not installed.
fn python_read_back(snapshot: &MemorySnapshot, name: &str) -> Option<Value> {
    let path =
        std::env::temp_dir().join(format!("wgpu-memory-{name}-{}.pickle", std::process::id()));
    snapshot.write_to(&path).unwrap();
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(PYTHON_CHECK)
        .arg(&path)
        .output();
    std::fs::remove_file(&path).unwrap();
    let output = match output {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("python3 not found: the Python half of this check is skipped");
            return None;
        }
        Err(error) => panic!("python3 did not run: {error}"),
    };
    assert!(
        output.status.success(),
        "python3 refused the pickle: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[test]
fn python_reads_the_pickle_with_pytorchs_fields_and_types_and_serde_pickle_agrees() {
    let snapshot = fixture();
    let ours = read_back(&snapshot);
    if let Some(python) = python_read_back(&snapshot, "types") {
        assert_eq!(
            python["snapshot"], ours,
            "Python and serde-pickle read the same value"
        );
    }
    // The same types, read by serde-pickle: integers are integers, tuples are tuples.
    let bytes = snapshot.to_pytorch_pickle().unwrap();
    let value = serde_pickle::value_from_slice(&bytes, serde_pickle::DeOptions::new()).unwrap();
    let serde_pickle::Value::Dict(top) = value else {
        panic!("the pickle is a dict")
    };
    let key = |name: &str| serde_pickle::HashableValue::String(name.to_string());
    let serde_pickle::Value::List(segments) = &top[&key("segments")] else {
        panic!("segments is a list")
    };
    for segment in segments {
        let serde_pickle::Value::Dict(segment) = segment else {
            panic!("a segment is a dict")
        };
        assert!(matches!(
            segment[&key("address")],
            serde_pickle::Value::I64(_)
        ));
        assert!(matches!(
            segment[&key("segment_pool_id")],
            serde_pickle::Value::Tuple(_)
        ));
        assert!(matches!(
            segment[&key("is_expandable")],
            serde_pickle::Value::Bool(false)
        ));
    }
}

// ---- what the viewers make of it -----------------------------------------------------

/// MemoryViz.js reads any `segment_pool_id` but (0, 0) as a private pool (a `MemPool`);
/// it resolves an allocation's pool from its trace entry, else from the snapshot segment
/// holding its address, and says "pool_id unknown" when neither has one. No pool of ours
/// is private, and every allocation (trace entries, and blocks no entry reserved) has a
/// pool.
#[test]
fn no_pool_reads_as_private_and_every_allocation_names_its_pool() {
    let value = read_back(&fixture());
    for segment in segments(&value) {
        assert_eq!(segment["segment_pool_id"], json!([0, 0]), "{segment}");
    }
    let segment_of = |addr: u64| {
        segments(&value).iter().find(|s| {
            let start = int(&s["address"]);
            (start..start + int(&s["total_size"])).contains(&addr)
        })
    };
    for entry in trace(&value) {
        let action = entry["action"].as_str().unwrap();
        if !matches!(action, "alloc" | "free_requested" | "free_completed") {
            continue;
        }
        let pool = match entry.get("segment_pool_id") {
            Some(pool) => Some(pool.clone()),
            None => segment_of(int(&entry["addr"])).map(|s| s["segment_pool_id"].clone()),
        };
        assert_eq!(pool, Some(json!([0, 0])), "pool_id unknown for {entry}");
    }
}

/// PyTorch's `time_us` is Unix time in µs (MemoryViz.js shows `new Date(time_us / 1000)`):
/// the client's start plus the event's time.
#[test]
fn times_are_unix_microseconds() {
    let snapshot = fixture();
    let value = read_back(&snapshot);
    let times: Vec<u64> = trace(&value).iter().map(|e| int(&e["time_us"])).collect();
    assert_eq!(times.first(), Some(&(STARTED_UNIX_US + 500)));
    assert!(
        times
            .iter()
            .all(|&t| (STARTED_UNIX_US..=STARTED_UNIX_US + 5_000).contains(&t)),
        "{times:?}"
    );
    // 2023 in seconds since 1970, as a Date reads it.
    assert!(times.iter().all(|&t| t / 1_000_000 > 1_600_000_000));
}

/// Two snapshots of one client give a page the same made-up address whatever older
/// history each kept, so `_memory_viz.compare` (which keys segments by address and size)
/// finds nothing only before or only after.
#[test]
fn addresses_stay_when_older_history_is_dropped() {
    let whole = fixture();
    let mut newer = whole.clone();
    // Page 2 is named only by the events dropped.
    newer.history.drain(..7);
    newer.history_dropped = 7;
    let keys = |value: &Value| -> BTreeSet<(u64, u64)> {
        segments(value)
            .iter()
            .map(|s| (int(&s["address"]), int(&s["total_size"])))
            .collect()
    };
    let (a, b) = (read_back(&whole), read_back(&newer));
    assert_eq!(keys(&a), keys(&b));
    // The events both kept name the same addresses.
    let tail = |value: &Value, n: usize| -> Vec<(String, Option<u64>)> {
        let trace = trace(value);
        trace[trace.len() - n..]
            .iter()
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_string(),
                    e["addr"].as_u64(),
                )
            })
            .collect()
    };
    assert_eq!(tail(&a, 8), tail(&b, 8));
    if let (Some(pa), Some(pb)) = (
        python_read_back(&whole, "whole"),
        python_read_back(&newer, "newer"),
    ) {
        assert_eq!(pa["compare_keys"], pb["compare_keys"]);
    }
}

/// A segment's frames name its memory and its pool (MemoryViz.js shows them on the
/// segment as `filename:line:name`); a staging slice's block names its memory.
#[test]
fn segments_carry_their_memory_and_pool_names() {
    let value = read_back(&fixture());
    let names: Vec<Vec<(String, u64, String)>> = segments(&value)
        .iter()
        .map(|s| {
            s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["filename"].as_str().unwrap().to_string(),
                        int(&f["line"]),
                        f["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .collect();
    let frame = |file: &str, line: u64, name: &str| (file.to_string(), line, name.to_string());
    assert_eq!(
        names,
        [
            vec![
                frame("memory", 0, "main"),
                frame("pool", 0, "sliced 1.00 KiB")
            ],
            vec![frame("memory", 0, "main"), frame("pool", 1, "exclusive")],
            vec![
                frame("memory", 0, "upload"),
                frame("pool", 0, "upload 256.00 KiB")
            ],
        ]
    );
    let upload = &segments(&value)[2];
    // The first memory after main that the trace names: the viewer's stream 1.
    assert_eq!(upload["stream"], 1);
    assert_eq!(upload["blocks"][0]["frames"][0]["name"], "upload");
}

/// The trace replayed as MemoryViz.js pairs it (an `alloc` opens an address, a
/// `free_completed` closes it): every free closes an address an alloc opened, a moved
/// slice leaves its old address and opens its new one, and its last free (recorded
/// naming the page it was reserved in) closes the address it was moved to.
#[test]
fn a_moved_slice_is_freed_where_it_lies() {
    let value = read_back(&fixture());
    let page = |id: u64, stream: u64| {
        wgpu_memory::report::BASE_ADDRESS
            + (id * wgpu_memory::report::STREAM_SLOTS + stream) * wgpu_memory::report::PAGE_SPAN
    };
    let mut open: BTreeMap<u64, String> = BTreeMap::new();
    for entry in trace(&value) {
        let label = entry["frames"]
            .get(0)
            .and_then(|f| f["name"].as_str())
            .unwrap_or("")
            .to_string();
        match entry["action"].as_str().unwrap() {
            "alloc" => {
                let addr = int(&entry["addr"]);
                assert!(
                    open.insert(addr, label).is_none(),
                    "{addr:#x} allocated twice"
                );
            }
            "free_completed" => {
                let addr = int(&entry["addr"]);
                let opened = open.remove(&addr);
                assert_eq!(opened.as_deref(), Some(label.as_str()), "free at {addr:#x}");
            }
            _ => {}
        }
    }
    // What is open at the end is what the snapshot holds: weights, activations where the
    // move put them, "big", and the upload slice.
    let open: Vec<u64> = open.keys().copied().collect();
    assert_eq!(
        open,
        [page(7, 0), page(7, 0) + 512, page(11, 0), page(20, 2)],
        "{open:x?}"
    );
}

/// Staging slices are reserved without history events: one live in the snapshot gets an
/// `alloc` when the snapshot was taken, not from the trace's first event.
#[test]
fn a_live_staging_slice_is_allocated_at_the_snapshot_not_from_the_start() {
    let snapshot = fixture();
    let value = read_back(&snapshot);
    let upload = int(&segments(&value)[2]["blocks"][0]["address"]);
    let allocs: Vec<&Value> = trace(&value)
        .iter()
        .filter(|e| e["action"] == "alloc" && e["addr"].as_u64() == Some(upload))
        .collect();
    assert_eq!(allocs.len(), 1);
    assert_eq!(
        int(&allocs[0]["time_us"]),
        STARTED_UNIX_US + snapshot.taken_us
    );
    assert_eq!(int(&allocs[0]["size"]), 1000);
    assert_eq!(allocs[0]["stream"], 1);
}

/// An `oom` entry says what was free (the viewers print "X memory free"), from the
/// event's `free_bytes`.
#[test]
fn out_of_memory_entries_carry_the_free_bytes() {
    let value = read_back(&fixture());
    let ooms: Vec<&Value> = trace(&value)
        .iter()
        .filter(|e| e["action"] == "oom")
        .collect();
    assert_eq!(ooms.len(), 1);
    assert_eq!(int(&ooms[0]["device_free"]), 131_072);
    assert_eq!(int(&ooms[0]["size"]), 524_288);
    assert_eq!(ooms[0]["stream"], 1);
    let frames = ooms[0]["frames"].as_array().unwrap();
    assert_eq!(frames.last().unwrap()["name"], "model/huge");
}
