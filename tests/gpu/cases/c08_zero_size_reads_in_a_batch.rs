//! C08: zero-size handles in a batched read give `[]` and take no staging memory.
//!
//! "No copy and no map is issued for h0" cannot be observed directly; what is asserted:
//! the batch returns `[[], [1..=8]]`, the staging slice holds only h8's 8 bytes, and a
//! read of only zero-size handles succeeds without touching the staging memory at all.

use crate::device::fresh;
use wgpu_memory::Client;
use wgpu_memory::memory_management::MemoryPoolsReport;

fn staging(client: &Client) -> MemoryPoolsReport {
    client.memory_report().streams[0].auxiliary[0].pools.clone()
}

fn staging_pages(report: &MemoryPoolsReport) -> u64 {
    report
        .dynamic
        .iter()
        .chain([&report.persistent, &report.dedicated])
        .map(|pool| pool.pages)
        .sum()
}

#[test]
fn c08_zero_size_reads_in_a_batch() {
    let Some(client) = fresh() else { return };
    assert_eq!(
        client.memory_report().streams[0].auxiliary[0].name,
        "staging"
    );
    let h0 = client.empty(0).unwrap();
    let h0b = client.empty(0).unwrap();
    let data: Vec<u8> = (1..=8).collect();
    let h8 = client.create(&data).unwrap();

    // Only zero-size handles, before any read: no staging page is made.
    let before = staging(&client);
    assert_eq!(staging_pages(&before), 0);
    let parts = client.read_many_blocking(&[&h0, &h0b]).unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|part| part.is_empty()), "{parts:?}");
    assert_eq!(
        staging(&client),
        before,
        "a zero-size-only read touched staging"
    );
    assert_eq!(staging_pages(&staging(&client)), 0);
    drop(parts);
    assert_eq!(client.read_blocking(&h0).unwrap(), Vec::<u8>::new());
    assert_eq!(staging(&client), before);

    // The batch of the scenario.
    let parts = client.read_many_blocking(&[&h0, &h8]).unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0], Vec::<u8>::new());
    assert_eq!(parts[1], data);
    let held = staging(&client).usage();
    assert_eq!(
        held.number_allocs, 1,
        "one staging slice for the whole batch"
    );
    assert_eq!(held.bytes_in_use, 8, "h0 takes no staging bytes: {held:?}");
    drop(parts);
    assert_eq!(staging(&client).usage().number_allocs, 0);

    // Zero-size parts around a real one keep their places.
    let parts = client.read_many_blocking(&[&h0, &h8, &h0b]).unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts[0].is_empty() && parts[2].is_empty());
    assert_eq!(parts[1], data);
    drop(parts);

    // Once a staging page exists, a zero-size-only read still changes nothing.
    let before = staging(&client);
    let parts = client.read_many_blocking(&[&h0, &h0b]).unwrap();
    assert!(parts.iter().all(|part| part.is_empty()));
    assert_eq!(staging(&client), before);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
