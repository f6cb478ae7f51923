//! C25 Failed placement must stay cheap.
//!
//! A 1 MiB page filled with alternating 1 KiB used / 1 KiB free (about 512 KiB free, no
//! 4 KiB hole); 10,000 reservations of 4 KiB. Expect: they are served from new pages;
//! pages grow by exactly what they need; the time per failed placement in the fragmented
//! page does not grow with its slice count.
//!
//! Layout: one uncapped sliced pool of 1 MiB pages, alignment 256 (1 KiB and 4 KiB are
//! whole granules). The 4 KiB reservations are all kept. The work bound is asserted by
//! counting, never by time: every reservation succeeds, after the i-th one the pool holds
//! exactly 1 + ceil(i / 256) pages (the minimum), the storage saw exactly one `alloc`
//! call per new page (no failed or speculative attempts), none of the 4 KiB slices is in
//! the fragmented page, and the fragmented page's 1 KiB holes are still all usable.

use crate::common::*;
use crate::fake::FakeStorage;

const PER_PAGE: u64 = MIB / (4 * KIB);

#[test]
fn c25_failed_placement_stays_cheap() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![sliced(MIB, MIB, None)],
    );
    let mut small: Vec<_> = (0..1024).map(|_| memory.reserve(KIB).unwrap()).collect();
    assert_eq!(
        memory.storage().allocations_made(),
        1,
        "1024 x 1 KiB fill one page"
    );
    let fragmented = memory.get_storage(&small[0].clone().binding()).unwrap().id;
    // Free every other one: 512 holes of 1 KiB, none adjacent to another.
    let mut index = 0;
    small.retain(|_| {
        index += 1;
        index % 2 == 0
    });
    assert_eq!(small.len(), 512);
    assert_eq!(memory.memory_usage().bytes_in_use, 512 * KIB);

    let mut big = Vec::with_capacity(10_000);
    for i in 1..=10_000u64 {
        let handle = memory
            .reserve(4 * KIB)
            .unwrap_or_else(|e| panic!("4 KiB reservation {i} failed: {e}"));
        let storage = memory.get_storage(&handle.clone().binding()).unwrap();
        assert_ne!(
            storage.id, fragmented,
            "reservation {i}: 4 KiB placed in the fragmented page (it has no 4 KiB hole)"
        );
        big.push(handle);
        let pages = memory.memory_report().dynamic[0].pages;
        let needed = 1 + i.div_ceil(PER_PAGE);
        assert_eq!(pages, needed, "after {i} reservations of 4 KiB: pages");
    }
    let new_pages = 10_000u64.div_ceil(PER_PAGE);
    assert_eq!(memory.storage().allocations_made(), 1 + new_pages);
    assert_eq!(
        memory.storage().alloc_calls(),
        1 + new_pages,
        "one alloc call per page needed, no failed attempts"
    );
    assert_eq!(memory.storage().live_allocations(), 1 + new_pages);
    let report = &memory.memory_report().dynamic[0];
    assert_eq!(report.pages_peak, 1 + new_pages);
    assert_eq!(report.usage.bytes_in_use, 512 * KIB + 10_000 * 4 * KIB);

    // The holes of the fragmented page are still there and usable: 512 more 1 KiB
    // reservations need no page.
    let refill: Vec<_> = (0..512).map(|_| memory.reserve(KIB).unwrap()).collect();
    assert_eq!(memory.storage().allocations_made(), 1 + new_pages);
    for handle in &refill {
        assert_eq!(
            memory.get_storage(&handle.clone().binding()).unwrap().id,
            fragmented
        );
    }
}
