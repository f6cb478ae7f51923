//! The adaptive layout on a nearly full device: its pages are sized after the largest
//! allocation a band served, and a device with no room for such a page may still have
//! room for the request itself. The reservation must then get a page of its own size
//! instead of an out-of-memory error.

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::MemoryConfiguration;

/// Huge band: after one 250 MiB allocation, a 30 MiB one wanted a 250 MiB page, which
/// a device with 56 MiB left refused, twice (the retry after cleanup asked the same).
#[test]
fn a_huge_request_gets_its_own_size_when_the_bands_page_size_does_not_fit() {
    let mut memory = preset(
        FakeStorage::new(306 * MIB),
        256 * MIB,
        256,
        MemoryConfiguration::default(),
    );
    let _big = memory.reserve(250 * MIB).unwrap();
    let small = memory
        .reserve(30 * MIB)
        .unwrap_or_else(|error| panic!("30 MiB refused with 56 MiB free: {error}"));
    let storage = memory.get_storage(&small.binding()).unwrap();
    assert_eq!(storage.size(), 30 * MIB);
    assert_eq!(memory.storage().bytes_held(), 280 * MIB);
}

/// Shared band: with a 60 MiB allocation live on a 100 MiB device, the band wants
/// another 60 MiB page for a 30 MiB request; a 30 MiB page fits instead.
#[test]
fn a_shared_request_gets_a_smaller_page_when_the_bands_page_size_does_not_fit() {
    let mut memory = preset(
        FakeStorage::new(100 * MIB),
        GIB,
        256,
        MemoryConfiguration::default(),
    );
    let _big = memory.reserve(60 * MIB).unwrap();
    let handle = memory
        .reserve(30 * MIB)
        .unwrap_or_else(|error| panic!("30 MiB refused with 40 MiB free: {error}"));
    assert_eq!(
        memory.get_storage(&handle.binding()).unwrap().size(),
        30 * MIB
    );
    assert_eq!(memory.storage().bytes_held(), 90 * MIB);
}
