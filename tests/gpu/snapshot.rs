//! Memory snapshots: every page and slice of every memory, agreeing with the report.

use crate::device::{fresh, pattern};
use wgpu_memory::report::{MAIN_MEMORY, MemorySnapshot};

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
    snapshot.check().expect("no slice outside its page, no overlap");
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

    let json = snapshot.to_json().unwrap();
    let back = MemorySnapshot::from_json(&json).unwrap();
    assert_eq!(back, snapshot);
    back.check().unwrap();
    back.check_report().unwrap();
    drop(kept);
}
