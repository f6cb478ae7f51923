//! Compaction behind the handles: live slices move between pages on the GPU so that free
//! bytes in holes come together, pages empty and go back to the driver, and every handle
//! keeps its bytes.

use crate::device::{fresh, pattern};
use wgpu_memory::memory_management::parse_memory_config;
use wgpu_memory::{Client, Handle};

/// Pages the main memory holds now.
fn main_pages(client: &Client) -> u64 {
    let report = client.memory_report();
    let pools = &report.streams[0].pools;
    pools.dynamic.iter().map(|pool| pool.pages).sum::<u64>()
        + pools.persistent.pages
        + pools.dedicated.pages
}

/// Reads every handle back and compares it with the bytes it was made with.
fn assert_bytes(client: &Client, held: &[(Handle, Vec<u8>)]) {
    let handles: Vec<&Handle> = held.iter().map(|(handle, _)| handle).collect();
    let read = client.read_many_blocking(&handles).unwrap();
    for ((handle, expected), bytes) in held.iter().zip(read) {
        assert!(
            bytes[..] == expected[..],
            "allocation {} lost its bytes",
            handle.memory().descriptor().id.value
        );
    }
}

/// One sliced pool of 1 MiB pages, capped at `pages` pages.
fn capped_pool(client: &Client, pages: u64) {
    let toml = format!(
        "[memory]\npools = [ {{ type = \"sliced\", page_size = \"1 MiB\", max_slice_size = \"1 MiB\", max_pool_size = \"{pages} MiB\" }} ]\n"
    );
    let pools = parse_memory_config(&toml).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
}

/// Makes `count` handles of `size` bytes, each with its own pattern.
fn fill(client: &Client, count: usize, size: usize) -> Vec<(Handle, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let bytes = pattern(size, i as u64 + 1);
            (client.create(&bytes).unwrap(), bytes)
        })
        .collect()
}

/// Keeps every other handle.
fn every_other(held: Vec<(Handle, Vec<u8>)>) -> Vec<(Handle, Vec<u8>)> {
    held.into_iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, kept)| kept)
        .collect()
}

/// Eight pages of 1 MiB, each holding four 256 KiB slices; every other slice freed
/// leaves each page half full. The cleanup moves the slices of four pages into the
/// holes of the other four and gives those four back; every kept handle reads its bytes.
#[test]
fn cleanup_after_freeing_every_other_slice_gives_pages_back() {
    let Some(client) = fresh() else { return };
    capped_pool(&client, 64);
    let held = fill(&client, 32, 256 << 10);
    assert_eq!(main_pages(&client), 8);
    let kept = every_other(held);
    client.cleanup();
    assert_eq!(main_pages(&client), 4, "four half-full pages were emptied");
    assert_bytes(&client, &kept);
    assert!(client.uncaptured_errors().is_empty());
}

/// A pool capped at two pages, both half full in holes of 256 KiB: a 512 KiB request
/// fits no hole, and the cap forbids a third page. Moving one page's slices into the
/// other's holes serves it.
#[test]
fn a_capped_pool_whose_free_bytes_lie_in_holes_serves_a_request_they_can_hold() {
    let Some(client) = fresh() else { return };
    capped_pool(&client, 2);
    let kept = every_other(fill(&client, 8, 256 << 10));
    let big = pattern(512 << 10, 99);
    let served = client
        .create(&big)
        .expect("the holes, gathered, hold the request");
    assert_eq!(main_pages(&client), 2, "no page past the cap");
    let mut all = kept;
    all.push((served, big));
    assert_bytes(&client, &all);
}

/// A slice whose resource the application holds stays where the resource says, across
/// compactions, with its bytes, though its page is the sparsest (the first a compaction
/// would empty); the other pages still compact around it (a pinned page takes no moved
/// slice either, so the seven half-full pages empty three into three).
#[test]
fn an_exported_resource_stays_valid_across_compactions() {
    let Some(client) = fresh() else { return };
    capped_pool(&client, 64);
    let held = fill(&client, 32, 256 << 10);
    // Page 0 keeps only its first slice; the seven others keep every other slice.
    let kept: Vec<_> = held
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || (*i >= 4 && i % 2 == 0))
        .map(|(_, kept)| kept)
        .collect();
    let resource = client.resource(&kept[0].0).unwrap();
    let (buffer, offset) = (resource.buffer.clone(), resource.offset);
    let report = client.compact().unwrap();
    assert_eq!(report.pages_given_back, 3, "{report:?}");
    let now = client.resource(&kept[0].0).unwrap();
    assert_eq!((now.buffer.clone(), now.offset), (buffer, offset));
    assert_bytes(&client, &kept);
    drop((resource, now));
    client.compact().unwrap();
    assert_bytes(&client, &kept);
}

/// After a compaction the report says what it did, and a second one has nothing to do.
#[test]
fn compact_reports_moves_bytes_and_pages() {
    let Some(client) = fresh() else { return };
    capped_pool(&client, 64);
    let kept = every_other(fill(&client, 16, 256 << 10));
    let report = client.compact().unwrap();
    assert_eq!(report.moves, 4);
    assert_eq!(report.bytes_moved, 4 * (256 << 10));
    assert_eq!(report.pages_given_back, 2);
    assert_eq!(report.bytes_given_back, 2 << 20);
    let again = client.compact().unwrap();
    assert_eq!((again.moves, again.pages_given_back), (0, 0));
    assert_bytes(&client, &kept);
}

/// Compaction off (a bound of 0 bytes): nothing moves, and the half-full pages stay.
#[test]
fn a_move_bound_of_zero_turns_compaction_off() {
    let Some(client) = fresh() else { return };
    capped_pool(&client, 64);
    client.set_max_move_bytes(0);
    let kept = every_other(fill(&client, 16, 256 << 10));
    client.cleanup();
    assert_eq!(main_pages(&client), 4);
    assert_bytes(&client, &kept);
}

/// The pages a cleanup gives back leave wgpu too: its own allocator report (gpu-allocator
/// on Vulkan) no longer counts them once the device is idle, although launches cached
/// bind groups over them.
#[test]
fn given_back_pages_leave_wgpu() {
    let Some(client) = fresh() else { return };
    let wgpu_bytes = || {
        client.sync().unwrap();
        client.device_memory().map(|memory| memory.allocated)
    };
    let Some(before) = wgpu_bytes() else {
        eprintln!("skipping: this backend has no allocator report");
        return;
    };
    let kernel = wgpu_memory::Kernel::new(
        "touch",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(1) fn main() { x[0] = x[0] + 1u; }",
        "main",
    );
    let handles: Vec<Handle> = (0..8).map(|_| client.empty(1 << 20).unwrap()).collect();
    for handle in &handles {
        client.launch(&kernel, [1, 1, 1], &[handle]).unwrap();
    }
    let during = wgpu_bytes().unwrap();
    assert!(during >= before + (4 << 20), "{during} vs {before}");
    drop(handles);
    client.cleanup();
    let after = wgpu_bytes().unwrap();
    assert!(
        after < before + (1 << 20),
        "wgpu still holds {} bytes more than before the pages were made",
        after.saturating_sub(before)
    );
}
