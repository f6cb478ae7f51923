//! C17 Small live slices pin a big free region.
//!
//! Fake storage 1 GiB. L = reserve(800 MiB); drop L; reserve 40 x 2 MiB and keep every
//! other one; reserve(800 MiB) again. Expect: Ok, reserved <= 1 GiB (small requests are
//! not carved out of the big page, or the big page is released and the request retried).
//!
//! Default configuration, `MemoryDeviceProperties::new(1 GiB, 256)`.

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::MemoryConfiguration;

#[test]
fn c17_small_live_slices_pin_a_big_free_region() {
    let mut memory = preset(
        FakeStorage::new(GIB),
        GIB,
        256,
        MemoryConfiguration::default(),
    );
    let l = memory
        .reserve(800 * MIB)
        .expect("800 MiB on a 1 GiB device");
    drop(l);
    let mut kept = Vec::new();
    for i in 0..40 {
        let handle = memory.reserve(2 * MIB).expect("2 MiB");
        if i % 2 == 0 {
            kept.push(handle);
        }
    }
    let big = memory.reserve(800 * MIB);
    let usage = memory.memory_usage();
    let big = big.unwrap_or_else(|error| {
        panic!("800 MiB with 40 MiB live on a 1 GiB device must succeed: {error}")
    });
    assert!(
        usage.bytes_reserved <= GIB,
        "reserved {} MiB",
        usage.bytes_reserved / MIB
    );
    assert!(memory.storage().bytes_held() <= GIB);
    assert_eq!(usage.bytes_in_use, 800 * MIB + 20 * 2 * MIB);
    // The kept slices still resolve to their own bytes.
    for handle in &kept {
        let storage = memory.get_storage(&handle.clone().binding()).unwrap();
        assert_eq!(storage.size(), 2 * MIB);
    }
    drop(big);
}
