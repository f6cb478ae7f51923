//! Memory snapshots: every page and slice of every memory, agreeing with the report.

use crate::device::{fresh, pattern};
use wgpu_memory::report::{EventKind, MAIN_MEMORY, MemorySnapshot};

/// After creates, empties, reads and drops, the snapshot round-trips through JSON, its
/// slices match the report's totals exactly in every memory, and no two live slices of a
/// page overlap. Each live handle is listed once, with its requested size.
#[test]
fn a_snapshot_matches_the_report_and_round_trips_through_json() {
    let Some(client) = fresh() else { return };
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (i, size) in [4u64, 100, 1000, 3, 64 << 10, 5 << 20, 257, 0, 12 << 20]
        .into_iter()
        .enumerate()
    {
        let handle = if i % 2 == 0 {
            client.create(&pattern(size as usize, i as u64)).unwrap()
        } else {
            client.empty(size).unwrap()
        };
        if i % 3 == 2 {
            dropped.push(handle);
        } else {
            kept.push(handle);
        }
    }
    // A read leaves staging pages behind; a dropped handle leaves a free range.
    assert_eq!(client.read_blocking(&kept[0]).unwrap(), pattern(4, 0));
    drop(dropped);

    let snapshot = client.memory_snapshot();
    snapshot
        .check()
        .expect("no slice outside its page, no overlap");
    snapshot
        .check_report()
        .expect("slices and pages sum to the report");
    let names: Vec<&str> = snapshot.memories.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, [MAIN_MEMORY, "staging", "upload"]);

    let main = snapshot.memory(MAIN_MEMORY).unwrap();
    let mut listed: Vec<(u64, u64)> = main
        .pools
        .iter()
        .flat_map(|pool| &pool.pages)
        .flat_map(|page| &page.slices)
        .filter(|slice| slice.live)
        .map(|slice| (slice.id.unwrap(), slice.size))
        .collect();
    listed.sort_unstable();
    let mut expected: Vec<(u64, u64)> = kept
        .iter()
        .map(|handle| (handle.memory().descriptor().id.value as u64, handle.size()))
        .collect();
    expected.sort_unstable();
    assert_eq!(listed, expected, "each live handle once, with its size");
    assert!(main.totals().bytes_reserved > 0);
    // Live slices and free ranges (`live: false`) tile every page, in offset order.
    for page in snapshot
        .memories
        .iter()
        .flat_map(|memory| &memory.pools)
        .flat_map(|pool| &pool.pages)
    {
        let mut at = 0;
        for slice in &page.slices {
            assert_eq!(slice.offset, at, "page {} is tiled in order", page.id);
            at += slice.size + slice.padding;
            if !slice.live {
                assert!(slice.size > 0 && slice.id.is_none());
            }
        }
        assert_eq!(at, page.size, "page {} is covered once", page.id);
    }
    assert!(
        main.pools
            .iter()
            .flat_map(|pool| &pool.pages)
            .any(|page| page.slices.iter().any(|slice| !slice.live)),
        "the dropped handles left free ranges"
    );

    let json = snapshot.to_json().unwrap();
    let back = MemorySnapshot::from_json(&json).unwrap();
    assert_eq!(back, snapshot);
    back.check().unwrap();
    back.check_report().unwrap();
    drop(kept);
}

/// The ring holds at most N events and keeps the newest.
#[test]
fn the_history_ring_never_exceeds_its_bound_and_keeps_the_newest() {
    let Some(client) = fresh() else { return };
    client.record_history(5);
    let mut handles = Vec::new();
    for size in 1..=12u64 {
        handles.push(client.empty(size * 4).unwrap());
        assert!(client.history().len() <= 5);
    }
    let events = client.history();
    let sizes: Vec<u64> = events.iter().map(|event| event.bytes).collect();
    assert_eq!(sizes, [32, 36, 40, 44, 48]);
    assert!(events.iter().all(|event| event.kind == EventKind::Reserve));
    assert!(
        events
            .windows(2)
            .all(|pair| pair[0].time_us <= pair[1].time_us)
    );
    let snapshot = client.memory_snapshot();
    assert_eq!(snapshot.history, events);
    // One page made and twelve reservations: eight dropped.
    assert_eq!(snapshot.history_dropped, 8);
    client.record_history(0);
    drop(handles);
    assert!(client.history().is_empty());
}

/// A free is recorded when the last clone of a handle is dropped, not before, with the
/// reservation's bytes, id and label; uploads, launches and readbacks are recorded too.
#[test]
fn a_free_is_recorded_when_the_last_clone_drops() {
    let Some(client) = fresh() else { return };
    client.record_history(100);
    let handle = {
        let _scope = client.label("weights");
        client.create(&pattern(40, 1)).unwrap()
    };
    let id = handle.memory().descriptor().id.value as u64;
    let clone = handle.clone();
    drop(handle);
    let frees = |client: &wgpu_memory::Client| {
        client
            .history()
            .into_iter()
            .filter(|event| event.kind == EventKind::Free)
            .collect::<Vec<_>>()
    };
    assert!(frees(&client).is_empty(), "a clone is still alive");
    assert_eq!(client.read_blocking(&clone).unwrap(), pattern(40, 1));
    drop(clone);
    let freed = frees(&client);
    assert_eq!(freed.len(), 1);
    assert_eq!(freed[0].id, Some(id));
    assert_eq!(freed[0].bytes, 40);
    assert_eq!(freed[0].label.as_deref(), Some("weights"));
    // Staging pages going idle are recorded when history next looks (their timing is the
    // fences'): left out here.
    let kinds: Vec<(EventKind, Option<String>)> = client
        .history()
        .into_iter()
        .filter(|event| !matches!(event.kind, EventKind::StagingIdle | EventKind::StagingInUse))
        .map(|event| (event.kind, event.memory))
        .collect();
    let memory = |name: &str| Some(name.to_string());
    assert_eq!(
        kinds,
        [
            (EventKind::PageMade, memory("main")),
            (EventKind::Reserve, memory("main")),
            (EventKind::PageMade, memory("upload")),
            (EventKind::Upload, memory("main")),
            (EventKind::PageMade, memory("staging")),
            (EventKind::Readback, memory("main")),
            (EventKind::Free, memory("main")),
        ]
    );
    // The upload and the readback name the handle they moved bytes for, as its
    // reservation does.
    let history = client.history();
    let reserve = history
        .iter()
        .find(|event| event.kind == EventKind::Reserve)
        .unwrap();
    for transfer in history
        .iter()
        .filter(|event| matches!(event.kind, EventKind::Upload | EventKind::Readback))
    {
        assert_eq!(transfer.bytes, 40);
        assert_eq!(transfer.id, Some(id));
        assert_eq!(transfer.label.as_deref(), Some("weights"));
        assert_eq!(
            (&transfer.pool, transfer.page, transfer.offset),
            (&reserve.pool, reserve.page, reserve.offset)
        );
    }
}

/// A label scope labels exactly the reservations made inside it; scopes nest as
/// "outer/inner"; the snapshot's slices carry the labels and an age.
#[test]
fn a_label_scope_labels_exactly_the_reservations_inside_it() {
    let Some(client) = fresh() else { return };
    client.record_history(100);
    let before = client.empty(8).unwrap();
    let (outer, inner, after_inner) = {
        let _model = client.label("model");
        let outer = client.empty(16).unwrap();
        let inner = {
            let _layer = client.label("layer 3");
            client.empty(24).unwrap()
        };
        (outer, inner, client.empty(32).unwrap())
    };
    let after = client.empty(40).unwrap();
    let labels: Vec<(u64, Option<String>)> = client
        .history()
        .into_iter()
        .filter(|event| event.kind == EventKind::Reserve)
        .map(|event| (event.bytes, event.label))
        .collect();
    assert_eq!(
        labels,
        [
            (8, None),
            (16, Some("model".to_string())),
            (24, Some("model/layer 3".to_string())),
            (32, Some("model".to_string())),
            (40, None),
        ]
    );
    let snapshot = client.memory_snapshot();
    let slice_label = |handle: &wgpu_memory::Handle| {
        let id = handle.memory().descriptor().id.value as u64;
        let slice = snapshot
            .slice(id)
            .expect("a live handle is in the snapshot");
        assert!(slice.age_us.is_some());
        slice.label.clone()
    };
    assert_eq!(slice_label(&inner).as_deref(), Some("model/layer 3"));
    assert_eq!(slice_label(&outer).as_deref(), Some("model"));
    assert_eq!(slice_label(&after_inner).as_deref(), Some("model"));
    assert_eq!(slice_label(&before), None);
    assert_eq!(slice_label(&after), None);
}

/// A main reservation that finds its only, capped pool full fails with
/// `ClientError::OutOfMemory`, whose text names the largest live allocations (size,
/// label, age) and the pool's free room; with an out-of-memory snapshot path set it also
/// writes the snapshot there and the error names the file. The snapshot holds the
/// allocations that filled the pool.
#[test]
fn out_of_memory_names_the_largest_allocations_and_writes_the_snapshot() {
    let Some(client) = fresh() else { return };
    let capped = r#"
[memory]
pools = [{ type = "sliced", page_size = "64 KiB", max_slice_size = "64 KiB", max_pool_size = "128 KiB" }]
"#;
    let pools = wgpu_memory::memory_management::parse_memory_config(capped)
        .unwrap()
        .pools
        .unwrap();
    client.install_memory_pools(&pools).unwrap();
    client.record_history(1000);
    let full = {
        let _scope = client.label("weights");
        [client.empty(60_000).unwrap(), client.empty(50_000).unwrap()]
    };

    let error = client.empty(60_000).expect_err("the capped pool is full");
    let wgpu_memory::ClientError::OutOfMemory {
        detail, snapshot, ..
    } = &error
    else {
        panic!("expected OutOfMemory, got {error:?}");
    };
    assert_eq!(snapshot, &None, "no path set, no file");
    let sizes: Vec<u64> = detail.largest.iter().map(|live| live.size).collect();
    assert_eq!(sizes, [60_000, 50_000]);
    assert!(
        detail
            .largest
            .iter()
            .all(|live| live.label.as_deref() == Some("weights"))
    );
    assert!(detail.largest.iter().all(|live| live.age_us.is_some()));
    assert_eq!(detail.pools.len(), 1);
    assert_eq!(detail.pools[0].pages, 2);
    let text = error.to_string();
    for needed in [
        "1. 58.59 KiB \"weights\"",
        "2. 48.83 KiB \"weights\"",
        "pool 0 (sliced 64.00 KiB): 2 pages",
        "largest free slice",
        "fragmentation",
    ] {
        assert!(text.contains(needed), "missing {needed:?} in:\n{text}");
    }
    let events = client.history();
    let oom = events
        .iter()
        .find(|event| event.kind == EventKind::OutOfMemory)
        .expect("an out-of-memory event");
    assert_eq!(oom.bytes, 60_000);

    let path = std::env::temp_dir().join(format!("oom-snapshot-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    client.set_oom_snapshot(Some(path.clone()));
    let error = client
        .create(&[1; 60_000])
        .expect_err("the capped pool is full");
    match &error {
        wgpu_memory::ClientError::OutOfMemory { snapshot, .. } => {
            assert_eq!(snapshot.as_ref(), Some(&path))
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
    let snapshot = MemorySnapshot::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    snapshot.check().unwrap();
    snapshot.check_report().unwrap();
    let main = snapshot.memory(MAIN_MEMORY).unwrap();
    assert_eq!(main.totals().slices, 2);
    assert_eq!(main.totals().bytes_in_use, 110_000);
    assert_eq!(main.pools[0].pages.len(), 2);
    drop(full);
}

/// Every out-of-memory snapshot carries its out-of-memory event, whichever memory was
/// refused: here the budget refuses the upload staging page of a `create` whose main
/// slice fits, then the main page of an `empty`. Each failure records exactly one event,
/// naming the memory refused and the bytes asked.
#[test]
fn every_out_of_memory_snapshot_carries_its_out_of_memory_event() {
    let Some(client) = fresh() else { return };
    let layout = "[memory]\npools = [{ type = \"sliced\", page_size = \"2 MiB\", max_slice_size = \"2 MiB\" }]\n";
    let pools = wgpu_memory::memory_management::parse_memory_config(layout)
        .unwrap()
        .pools
        .unwrap();
    client.install_memory_pools(&pools).unwrap();
    client.record_history(1000);
    let kept = client.empty(1 << 20).unwrap();
    let held = client.budget().held;
    assert_eq!(held, 2 << 20, "one main page");
    client.set_budget(Some(held + (128 << 10))).unwrap();
    let path = std::env::temp_dir().join(format!("oom-upload-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    client.set_oom_snapshot(Some(path.clone()));

    // 300 KiB fit in the main page; their upload staging page does not fit the budget.
    let error = client
        .create(&pattern(300 << 10, 3))
        .expect_err("no budget left for the staging");
    let wgpu_memory::ClientError::OutOfMemory {
        detail, snapshot, ..
    } = &error
    else {
        panic!("expected OutOfMemory, got {error:?}");
    };
    assert_eq!(
        detail.budget.as_ref().map(|b| b.memory.as_str()),
        Some("upload")
    );
    assert_eq!(snapshot.as_ref(), Some(&path));
    let written = MemorySnapshot::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ooms: Vec<_> = written
        .history
        .iter()
        .filter(|e| e.kind == EventKind::OutOfMemory)
        .collect();
    assert_eq!(
        ooms.len(),
        1,
        "the snapshot carries its out-of-memory event"
    );
    assert_eq!(ooms[0].memory.as_deref(), Some("upload"));
    assert!(ooms[0].bytes >= 300 << 10, "{} bytes asked", ooms[0].bytes);
    assert_eq!(
        ooms[0].free_bytes,
        Some(128 << 10),
        "what the budget had left"
    );
    // The event's numbers add up to the budget, and the snapshot names it.
    let budget = held + (128 << 10);
    assert_eq!(ooms[0].budget, Some(budget));
    assert_eq!(written.budget, Some(budget));
    let parts = [
        ooms[0].held_bytes,
        ooms[0].retiring_bytes,
        ooms[0].free_bytes,
    ];
    assert_eq!(
        parts.iter().map(|p| p.unwrap()).sum::<u64>(),
        budget,
        "{parts:?}"
    );
    // PyTorch's viewer reads the refused memory and the budget's parts on the oom entry.
    let pickle = written.to_pytorch_pickle().unwrap();
    let value: serde_json::Value =
        serde_pickle::from_slice(&pickle, serde_pickle::DeOptions::new()).unwrap();
    assert_eq!(value["allocator_settings"]["budget"], budget);
    let oom = value["device_traces"][0]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "oom")
        .expect("an oom entry")
        .to_string();
    for part in [
        "upload staging",
        &format!("({budget} bytes) ="),
        "given back",
    ] {
        assert!(oom.contains(part), "{part:?} missing from {oom}");
    }

    // A main refusal: one more event, naming the main memory.
    let error = client
        .empty(2 << 20)
        .expect_err("a second page crosses the budget");
    assert!(
        matches!(error, wgpu_memory::ClientError::OutOfMemory { .. }),
        "{error}"
    );
    let written = MemorySnapshot::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    let memories: Vec<Option<&str>> = written
        .history
        .iter()
        .filter(|e| e.kind == EventKind::OutOfMemory)
        .map(|e| e.memory.as_deref())
        .collect();
    assert_eq!(memories, [Some("upload"), Some(MAIN_MEMORY)]);
    drop(kept);
}

/// A new user could not find a handle's slice in a snapshot: `slice(id)` took an id the
/// public handle did not expose. `Handle::id` is that id, the same for every clone.
#[test]
fn a_handle_finds_its_own_slice_in_a_snapshot() {
    let Some(client) = fresh() else { return };
    let handles: Vec<_> = [100u64, 4096, 3 << 20]
        .into_iter()
        .map(|size| client.empty(size).unwrap())
        .collect();
    let snapshot = client.memory_snapshot();
    for handle in &handles {
        assert_eq!(handle.clone().id(), handle.id());
        let slice = snapshot
            .slice(handle.id())
            .unwrap_or_else(|| panic!("no slice for handle {}", handle.id()));
        assert_eq!(slice.size, handle.size());
    }
    let ids: std::collections::HashSet<u64> = handles.iter().map(|h| h.id()).collect();
    assert_eq!(ids.len(), handles.len(), "live handles share no id");
}
