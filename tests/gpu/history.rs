//! History events carry where each thing happened: pages made and given back, each
//! reservation's pool, page and offset, spills, backtraces; memory records go to a file.

use crate::device::fresh;
use wgpu_memory::report::{EventKind, HistoryEvent, MAIN_MEMORY};

fn of_kind(events: &[HistoryEvent], kind: EventKind) -> Vec<&HistoryEvent> {
    events.iter().filter(|event| event.kind == kind).collect()
}

/// Each reservation's event names the pool, page and offset the snapshot shows its slice
/// at; its free names the same; the pages it made are page-made events of the same page
/// and size, before it; a cleanup gives them back as page-released events.
#[test]
fn reservations_pages_and_frees_name_their_pool_page_and_offset() {
    let Some(client) = fresh() else { return };
    client.record_history(10_000);
    let handles: Vec<_> = [1000u64, 70_000, 3 << 20, 12]
        .into_iter()
        .map(|size| client.empty(size).unwrap())
        .collect();
    let snapshot = client.memory_snapshot();
    let events = snapshot.history.clone();
    let main = snapshot.memory(MAIN_MEMORY).unwrap();
    for handle in &handles {
        let id = handle.memory().descriptor().id.value as u64;
        let (pool, page, slice) = main
            .pools
            .iter()
            .flat_map(|pool| pool.pages.iter().map(move |page| (pool, page)))
            .flat_map(|(pool, page)| page.slices.iter().map(move |s| (pool, page, s)))
            .find(|(_, _, slice)| slice.id == Some(id))
            .expect("each live handle is in the snapshot");
        let reserve = events
            .iter()
            .find(|e| e.kind == EventKind::Reserve && e.id == Some(id))
            .expect("a reserve event");
        assert_eq!(reserve.bytes, handle.size());
        assert_eq!(reserve.memory.as_deref(), Some(MAIN_MEMORY));
        assert_eq!(reserve.pool.as_deref(), Some(pool.pool.as_str()));
        assert_eq!(reserve.page, Some(page.id));
        assert_eq!(reserve.offset, Some(slice.offset));
        let made = events
            .iter()
            .position(|e| e.kind == EventKind::PageMade && e.page == Some(page.id))
            .expect("the page's page-made event");
        assert_eq!(events[made].bytes, page.size);
        assert_eq!(events[made].pool, reserve.pool);
        let reserved_at = events
            .iter()
            .position(|e| std::ptr::eq(e, reserve))
            .unwrap();
        assert!(made < reserved_at || events[made].time_us <= reserve.time_us);
    }
    let pages_made = of_kind(&events, EventKind::PageMade);
    assert!(
        pages_made
            .iter()
            .all(|e| e.memory.is_some() && e.pool.is_some() && e.page.is_some() && e.bytes > 0)
    );

    let first = &handles[0];
    let id = first.memory().descriptor().id.value as u64;
    let reserve = of_kind(&events, EventKind::Reserve)
        .into_iter()
        .find(|e| e.id == Some(id))
        .cloned()
        .unwrap();
    drop(handles);
    client.cleanup();
    let events = client.history();
    let free = events
        .iter()
        .find(|e| e.kind == EventKind::Free && e.id == Some(id))
        .expect("a free event");
    assert_eq!(
        (&free.pool, free.page, free.offset),
        (&reserve.pool, reserve.page, reserve.offset)
    );
    let released: u64 = of_kind(&events, EventKind::PageReleased)
        .iter()
        .filter(|e| e.memory.as_deref() == Some(MAIN_MEMORY))
        .map(|e| e.bytes)
        .sum();
    let made: u64 = pages_made
        .iter()
        .filter(|e| e.memory.as_deref() == Some(MAIN_MEMORY))
        .map(|e| e.bytes)
        .sum();
    assert_eq!(released, made, "the cleanup gave every main page back");
    assert_eq!(
        client.memory_report().streams[0]
            .pools
            .usage()
            .bytes_reserved,
        0
    );
}

/// A reservation that finds the first accepting pool capped and full records a spill to
/// the pool that served it, with its id and label.
#[test]
fn a_spill_past_a_full_capped_pool_is_recorded() {
    let Some(client) = fresh() else { return };
    let layout = r#"
[memory]
pools = [
  { type = "sliced", page_size = "64 KiB", max_slice_size = "64 KiB", max_pool_size = "64 KiB" },
  { type = "sliced", page_size = "256 KiB", max_slice_size = "64 KiB" },
]
"#;
    let pools = wgpu_memory::memory_management::parse_memory_config(layout)
        .unwrap()
        .pools
        .unwrap();
    client.install_memory_pools(&pools).unwrap();
    client.record_history(100);
    let first = client.empty(60_000).unwrap();
    let second = {
        let _scope = client.label("overflow");
        client.empty(60_000).unwrap()
    };
    let events = client.history();
    let spills = of_kind(&events, EventKind::Spill);
    assert_eq!(spills.len(), 1, "{events:#?}");
    let spill = spills[0];
    assert_eq!(spill.bytes, 60_000);
    assert_eq!(spill.pool.as_deref(), Some("sliced 256.00 KiB"));
    assert_eq!(spill.id, Some(second.memory().descriptor().id.value as u64));
    assert_eq!(spill.label.as_deref(), Some("overflow"));
    drop((first, second));
}

/// With backtraces on, each reservation event carries one that names this test; off, none.
#[test]
fn backtraces_are_recorded_only_when_asked() {
    let Some(client) = fresh() else { return };
    client.record_history(100);
    let plain = client.empty(256).unwrap();
    client.record_backtraces(true);
    let traced = client.empty(256).unwrap();
    let events = client.history();
    let backtrace = |handle: &wgpu_memory::Handle| {
        let id = handle.memory().descriptor().id.value as u64;
        events
            .iter()
            .find(|e| e.kind == EventKind::Reserve && e.id == Some(id))
            .unwrap()
            .backtrace
            .clone()
    };
    assert_eq!(backtrace(&plain), None);
    let text = backtrace(&traced).expect("a backtrace");
    assert!(
        text.contains("backtraces_are_recorded_only_when_asked"),
        "the backtrace names the caller:\n{text}"
    );
}

/// `record_memory` appends one JSON line per record to the records file, and the
/// in-memory list keeps only the newest records.
#[test]
fn memory_records_are_appended_to_the_records_file_as_json_lines() {
    let Some(client) = fresh() else { return };
    let path = std::env::temp_dir().join(format!("records-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    client.set_records_file(Some(path.clone()));
    client.set_record_capacity(2);
    let handle = client.empty(4096).unwrap();
    for step in 0..3 {
        client.record_memory(format!("step {step}"));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let records: Vec<wgpu_memory::memory_management::MemoryRecord> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one record"))
        .collect();
    let labels: Vec<&str> = records.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["step 0", "step 1", "step 2"]);
    assert!(
        records[0].report.streams[0].pools.usage().bytes_in_use >= 4096,
        "the record holds the report"
    );
    let kept: Vec<String> = client
        .memory_records()
        .into_iter()
        .map(|r| r.label)
        .collect();
    assert_eq!(kept, ["step 1", "step 2"]);
    assert_eq!(client.records_not_written(), 0);

    client.set_records_file(Some(
        std::env::temp_dir().join("no-such-dir/x/records.jsonl"),
    ));
    client.record_memory("lost");
    assert_eq!(client.records_not_written(), 1);
    drop(handle);
}

/// A `HandleResource` keeps the slice reserved after the handle's last clone is dropped.
/// The free is recorded at that drop (the issue's rule: the handle is gone), but the
/// snapshot still names the slice it shows live with its label and age.
#[test]
fn a_slice_held_by_a_resource_keeps_its_label_after_the_free() {
    let Some(client) = fresh() else { return };
    client.record_history(100);
    let handle = {
        let _scope = client.label("held");
        client.empty(1000).unwrap()
    };
    let id = handle.memory().descriptor().id.value as u64;
    let resource = client.resource(&handle).unwrap();
    drop(handle);
    let snapshot = client.memory_snapshot();
    let slice = snapshot
        .slice(id)
        .expect("the resource keeps the slice live");
    assert!(slice.live);
    let freed = snapshot
        .history
        .iter()
        .any(|event| event.kind == EventKind::Free && event.id == Some(id));
    assert_eq!(
        (slice.label.as_deref(), freed),
        (Some("held"), true),
        "a slice still held shows its label; the handle's free is recorded"
    );
    assert!(slice.age_us.is_some());
    drop(resource);
}

/// A guard dropped after a newer scope opened closes only its own scope: the newer
/// scopes, whose guards still live, stay open.
#[test]
fn a_stale_label_guard_does_not_close_a_newer_scope() {
    let Some(client) = fresh() else { return };
    client.record_history(100);
    let outer = client.label("a");
    let stale = client.label("b");
    drop(outer);
    let _c = client.label("c");
    let _d = client.label("d");
    drop(stale);
    let handle = client.empty(64).unwrap();
    let label = client
        .history()
        .into_iter()
        .find(|event| event.kind == EventKind::Reserve)
        .and_then(|event| event.label);
    assert_eq!(
        label.as_deref(),
        Some("c/d"),
        "both guards c and d still live"
    );
    drop(handle);
}

/// Pages an install gives back are named after the pools that held them, not after the
/// new layout's pools.
#[test]
fn pages_given_back_by_an_install_name_the_old_pools() {
    let Some(client) = fresh() else { return };
    client.record_history(1000);
    let handles: Vec<_> = [1000u64, 3 << 20]
        .into_iter()
        .map(|size| client.empty(size).unwrap())
        .collect();
    let made: Vec<(u64, Option<String>)> = client
        .history()
        .into_iter()
        .filter(|e| e.kind == EventKind::PageMade && e.memory.as_deref() == Some(MAIN_MEMORY))
        .map(|e| (e.page.unwrap(), e.pool))
        .collect();
    drop(handles);
    let one_pool = wgpu_memory::memory_management::parse_memory_config(
        "[memory]\npools = [{ type = \"sliced\", page_size = \"64 KiB\", max_slice_size = \"64 KiB\" }]\n",
    )
    .unwrap()
    .pools
    .unwrap();
    client.install_memory_pools(&one_pool).unwrap();
    let released: Vec<(u64, Option<String>)> = client
        .history()
        .into_iter()
        .filter(|e| e.kind == EventKind::PageReleased && e.memory.as_deref() == Some(MAIN_MEMORY))
        .map(|e| (e.page.unwrap(), e.pool))
        .collect();
    assert!(!released.is_empty());
    for (page, pool) in released {
        let was = made.iter().find(|(p, _)| *p == page).map(|(_, pool)| pool);
        assert_eq!(Some(&pool), was, "page {page} given back by the install");
    }
}

/// A launch records its kernel, a cleanup the bytes it gave back, and an install the
/// bytes the old layout's free pages held.
#[test]
fn launches_cleanups_and_installs_are_recorded() {
    let Some(client) = fresh() else { return };
    client.record_history(1000);
    const FILL: &str = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1) fn main() { out[0] = 7u; }";
    let out = client.empty(4).unwrap();
    client
        .launch(
            &wgpu_memory::Kernel::new("fill seven", FILL, "main"),
            [1, 1, 1],
            &[&out],
        )
        .unwrap();
    client.sync().unwrap();
    drop(out);
    client.cleanup();
    let scratch = client.empty(3 << 20).unwrap();
    drop(scratch);
    let one_pool = wgpu_memory::memory_management::parse_memory_config(
        "[memory]\npools = [{ type = \"sliced\", page_size = \"64 KiB\", max_slice_size = \"64 KiB\" }]\n",
    )
    .unwrap()
    .pools
    .unwrap();
    client.install_memory_pools(&one_pool).unwrap();
    let events = client.history();
    let launch = of_kind(&events, EventKind::Launch);
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0].label.as_deref(), Some("fill seven"));
    let cleanup = of_kind(&events, EventKind::Cleanup);
    assert_eq!(cleanup.len(), 1);
    assert!(cleanup[0].bytes > 0, "the cleanup gave pages back");
    let install = of_kind(&events, EventKind::Install);
    assert_eq!(install.len(), 1);
    assert!(
        install[0].bytes >= 3 << 20,
        "the install dropped the scratch page: {} bytes",
        install[0].bytes
    );
}

/// A slice a compaction moved is freed where it lies then: the free names the page and
/// offset of its move, not those of its reservation, so a snapshot taken back to a
/// moment between the move and the free shows it there.
#[test]
fn a_free_after_a_compaction_names_the_page_the_slice_was_moved_to() {
    let Some(client) = fresh() else { return };
    let layout = "[memory]\npools = [ { type = \"sliced\", page_size = \"1 MiB\", max_slice_size = \"1 MiB\" } ]\n";
    let pools = wgpu_memory::memory_management::parse_memory_config(layout)
        .unwrap()
        .pools
        .unwrap();
    client.install_memory_pools(&pools).unwrap();
    client.record_history(10_000);
    // Two pages of four 256 KiB slices; every other one dropped leaves both half full,
    // and the cleanup moves one page's slices into the other's holes.
    let handles: Vec<_> = (0..8).map(|_| client.empty(256 << 10).unwrap()).collect();
    let kept: Vec<_> = handles.into_iter().step_by(2).collect();
    client.cleanup();
    let events = client.history();
    let moved = of_kind(&events, EventKind::Move)
        .first()
        .map(|event| (*event).clone())
        .expect("the cleanup moved a slice");
    assert_ne!(moved.from_page, moved.page);
    let id = moved.id.unwrap();
    let mut kept = kept;
    let index = kept
        .iter()
        .position(|h| h.memory().descriptor().id.value as u64 == id)
        .expect("the moved slice is a kept handle's");
    drop(kept.remove(index));
    let snapshot = client.memory_snapshot();
    let free = snapshot
        .history
        .iter()
        .find(|e| e.kind == EventKind::Free && e.id == Some(id))
        .expect("a free event");
    assert_eq!(
        (free.page, free.offset),
        (moved.page, moved.offset),
        "the free names where the move put the slice"
    );
    let before_free = snapshot.at(free.time_us - 1).unwrap();
    before_free.check().unwrap();
    let page = before_free
        .memory(MAIN_MEMORY)
        .unwrap()
        .pools
        .iter()
        .flat_map(|pool| &pool.pages)
        .find(|page| page.slices.iter().any(|s| s.live && s.id == Some(id)))
        .expect("before its free the slice is live");
    assert_eq!(Some(page.id), moved.page);
}

/// A staging page's slices are the library's own and have no events of their own: when
/// one holds its last slice (the upload's submission is done) history records it idle,
/// and in use again when a later upload takes it, so the timeline can mark idle staging.
#[test]
fn upload_staging_pages_record_when_they_go_idle_and_are_used_again() {
    let Some(client) = fresh() else { return };
    client.record_history(10_000);
    let first = client.create(&[7u8; 4096]).unwrap();
    client.sync().unwrap();
    let events = client.history();
    let made: Vec<u64> = events
        .iter()
        .filter(|e| e.kind == EventKind::PageMade && e.memory.as_deref() == Some("upload"))
        .filter_map(|e| e.page)
        .collect();
    assert_eq!(made.len(), 1, "one upload page: {events:#?}");
    let page = made[0];
    let upload_events = |events: &[HistoryEvent]| -> Vec<EventKind> {
        events
            .iter()
            .filter(|e| e.memory.as_deref() == Some("upload") && e.page == Some(page))
            .map(|e| e.kind)
            .collect()
    };
    assert_eq!(
        upload_events(&events),
        [EventKind::PageMade, EventKind::StagingIdle],
        "{events:#?}"
    );
    let second = client.create(&[9u8; 4096]).unwrap();
    let events = client.history();
    let kinds = upload_events(&events);
    if kinds.contains(&EventKind::PageReleased) {
        return; // the idle page went back before the second upload: nothing to reuse.
    }
    assert_eq!(
        kinds,
        [
            EventKind::PageMade,
            EventKind::StagingIdle,
            EventKind::StagingInUse
        ],
        "{events:#?}"
    );
    let idle = events
        .iter()
        .find(|e| e.kind == EventKind::StagingIdle)
        .unwrap();
    assert_eq!(idle.pool.as_deref().map(|p| !p.is_empty()), Some(true));
    drop((first, second));
}
