//! C31 Device allocation failure is a Result.
//!
//! Fake storage fails the Nth device allocation with out of memory. reserve(n) for that
//! allocation, then keep using the memory. Expect: Err(OutOfMemory), no panic; the failed
//! buffer is in no page; a later smaller reserve succeeds; the report is unchanged by the
//! failed attempt.
//!
//! Default configuration, `MemoryDeviceProperties::new(1 GiB, 256)`, fake device of 1 GiB.
//! The memory retries a reservation once after an out-of-memory (after giving back free
//! pages), so "the device refuses this allocation" arms the attempt and its retry (the
//! 3rd and 4th allocation calls) — as a request over the heap would fail both times. A
//! second test fails only the one call and accepts either outcome, checking the state
//! stays consistent.

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{MemoryConfiguration, MemoryManagement, ReserveError};

fn memory() -> MemoryManagement<FakeStorage> {
    preset(
        FakeStorage::new(GIB),
        GIB,
        256,
        MemoryConfiguration::default(),
    )
}

#[test]
fn c31_device_allocation_failure_is_a_result() {
    let mut memory = memory();
    // Two allocations that live on (so nothing is free to give back).
    let a = memory.reserve(KIB).unwrap();
    let b = memory.reserve(20 * MIB).unwrap();
    let made = memory.storage().allocations_made();
    assert!(made >= 1);
    let before = memory.memory_report();
    let live_before = memory.storage().live_allocations();

    // The next allocation call fails, and so does a retry of it.
    memory.storage().fail_nth_allocation(1);
    memory.storage().fail_nth_allocation(2);
    let calls_before = memory.storage().alloc_calls();
    let result = memory.reserve(300 * MIB);
    let calls = memory.storage().alloc_calls() - calls_before;
    match &result {
        Err(ReserveError::OutOfMemory { requested, .. }) => assert_eq!(*requested, 300 * MIB),
        other => panic!("expected Err(OutOfMemory), got {other:?} ({calls} alloc calls)"),
    }
    drop(result);
    // The failed buffer is in no page; the report is unchanged.
    assert_eq!(memory.storage().live_allocations(), live_before);
    assert_eq!(memory.storage().allocations_made(), made);
    // Checked at the end, so the rest of the scenario still runs.
    let after_failure = memory.memory_report();

    // Keep using the memory: a smaller reservation, and one that needs a new page.
    let c = memory
        .reserve(100 * MIB)
        .expect("a later smaller reserve succeeds");
    let d = memory
        .reserve(200 * MIB)
        .expect("a later new page succeeds");
    for (handle, byte) in [(&a, 1u8), (&b, 2), (&c, 3), (&d, 4)] {
        let resource = memory
            .get_resource(&handle.clone().binding(), None, None)
            .unwrap();
        resource.write(&[byte; 64]);
        assert_eq!(&resource.read()[..64], &[byte; 64]);
    }
    let usage = memory.memory_usage();
    assert_eq!(usage.bytes_in_use, KIB + 20 * MIB + 100 * MIB + 200 * MIB);
    let pages: u64 = memory.memory_report().dynamic.iter().map(|p| p.pages).sum();
    assert_eq!(memory.storage().live_allocations(), pages);
    assert_eq!(
        after_failure, before,
        "the failed attempt changed the report"
    );
}

#[test]
fn c31_device_allocation_failure_is_a_result_transient() {
    let mut memory = memory();
    let a = memory.reserve(KIB).unwrap();
    let before = memory.memory_report();
    let live_before = memory.storage().live_allocations();
    memory.storage().fail_nth_allocation(1);
    match memory.reserve(300 * MIB) {
        Err(ReserveError::OutOfMemory { requested, .. }) => {
            assert_eq!(requested, 300 * MIB);
            assert_eq!(memory.storage().live_allocations(), live_before);
            assert_eq!(memory.memory_report(), before);
        }
        Ok(handle) => {
            // Retried after the failure: exactly one more page, and it is in the report.
            assert_eq!(memory.storage().live_allocations(), live_before + 1);
            let pages: u64 = memory.memory_report().dynamic.iter().map(|p| p.pages).sum();
            assert_eq!(pages, live_before + 1);
            assert_eq!(memory.memory_usage().bytes_in_use, KIB + 300 * MIB);
            drop(handle);
        }
        Err(other) => panic!("expected OutOfMemory or a successful retry, got {other:?}"),
    }
    let c = memory.reserve(MIB).expect("a later reserve succeeds");
    drop((a, c));
}
