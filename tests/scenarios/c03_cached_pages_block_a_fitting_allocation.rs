//! C03 Cached pages block a fitting allocation.
//!
//! Fake storage with capacity 100 MiB. h1 = reserve(60 MiB); drop h1; h2 = reserve(70 MiB).
//! Expect: Ok: the free cached page is released and the reservation retried; reserved
//! <= 100 MiB, one live device allocation. With h1 still alive the same call returns an
//! out-of-memory error that states requested 70 MiB, in use 60 MiB, reserved 60 MiB.
//!
//! The device is 100 MiB, so its largest page is 100 MiB: the default configuration with
//! `MemoryDeviceProperties::new(100 MiB, 256)`. A second test runs the same steps with
//! the properties of a 1 GiB-page device (`new(1 GiB, 256)`), where the default layout's
//! page sizes can exceed what the device has free.

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{MemoryConfiguration, ReserveError};

const CAPACITY: u64 = 100 * MIB;

#[test]
fn c03_cached_pages_block_a_fitting_allocation() {
    let mut memory = preset(
        FakeStorage::new(CAPACITY),
        CAPACITY,
        256,
        MemoryConfiguration::default(),
    );
    let h1 = memory
        .reserve(60 * MIB)
        .expect("60 MiB fits a 100 MiB device");
    drop(h1);
    let h2 = memory
        .reserve(70 * MIB)
        .expect("the cached 60 MiB page is released and the 70 MiB reservation retried");
    let usage = memory.memory_usage();
    assert!(
        usage.bytes_reserved <= CAPACITY,
        "reserved {}",
        usage.bytes_reserved
    );
    assert_eq!(memory.storage().live_allocations(), 1);
    assert!(memory.storage().bytes_held() <= CAPACITY);
    drop(h2);
}

#[test]
fn c03_cached_pages_block_a_fitting_allocation_live_h1_is_out_of_memory() {
    let mut memory = preset(
        FakeStorage::new(CAPACITY),
        CAPACITY,
        256,
        MemoryConfiguration::default(),
    );
    let h1 = memory.reserve(60 * MIB).unwrap();
    let error = memory
        .reserve(70 * MIB)
        .expect_err("60 MiB live + 70 MiB does not fit a 100 MiB device");
    let text = error.to_string();
    match &error {
        ReserveError::OutOfMemory {
            requested,
            bytes_in_use,
            bytes_reserved,
            ..
        } => {
            assert_eq!(*requested, 70 * MIB, "{text}");
            assert_eq!(*bytes_in_use, 60 * MIB, "{text}");
            assert_eq!(*bytes_reserved, 60 * MIB, "{text}");
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    for number in ["70.00 MiB", "60.00 MiB"] {
        assert!(text.contains(number), "message lacks {number}: {text}");
    }
    // The failed attempt changed nothing.
    assert_eq!(memory.storage().live_allocations(), 1);
    assert_eq!(memory.memory_usage().bytes_reserved, 60 * MIB);
    drop(h1);
}

/// The same with the properties of a device whose largest page (1 GiB) is larger than
/// the memory it has (100 MiB): the reservation must still fit what the device holds.
#[test]
fn c03_cached_pages_block_a_fitting_allocation_1gib_page_properties() {
    let mut memory = preset(
        FakeStorage::new(CAPACITY),
        GIB,
        256,
        MemoryConfiguration::default(),
    );
    let h1 = memory
        .reserve(60 * MIB)
        .expect("60 MiB fits a 100 MiB device");
    let after_h1 = memory.memory_usage().bytes_reserved;
    drop(h1);
    let h2 = memory.reserve(70 * MIB);
    let usage = memory.memory_usage();
    let h2 = h2.unwrap_or_else(|error| {
        panic!(
            "70 MiB on a 100 MiB device with nothing live must succeed \
             (h1 reserved {} bytes): {error}",
            after_h1
        )
    });
    assert!(
        usage.bytes_reserved <= CAPACITY,
        "reserved {}",
        usage.bytes_reserved
    );
    assert_eq!(memory.storage().live_allocations(), 1);
    drop(h2);
}
