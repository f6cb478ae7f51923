//! C29 Free order must not matter.
//!
//! A 1 MiB page; a, b, c = three reservations of 256 KiB; drop them in each of the 6
//! orders, explicit cleanup after each. Expect: the page is fully coalesced and released
//! every time (0 live device allocations).
//!
//! Layout: one sliced pool of 1 MiB pages, alignment 256. Two variants: one explicit
//! cleanup after the three drops, and one after every drop (the page must stay while any
//! slice lives and go at the last one).

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{Cleanup, MemoryManagement};

const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

fn memory() -> MemoryManagement<FakeStorage> {
    explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![sliced(MIB, MIB, None)],
    )
}

fn three(
    memory: &mut MemoryManagement<FakeStorage>,
) -> Vec<Option<cubecl_runtime::memory_management::ManagedMemoryHandle>> {
    let handles: Vec<_> = (0..3).map(|_| memory.reserve(256 * KIB).unwrap()).collect();
    assert_eq!(
        memory.storage().live_allocations(),
        1,
        "one page holds a, b, c"
    );
    handles.into_iter().map(Some).collect()
}

#[test]
fn c29_free_order_does_not_matter() {
    let mut memory = memory();
    for order in ORDERS {
        let mut handles = three(&mut memory);
        for i in order {
            handles[i] = None;
        }
        memory.cleanup(Cleanup::Explicit);
        assert_eq!(
            memory.storage().live_allocations(),
            0,
            "order {order:?}: the page was not released"
        );
        assert_eq!(memory.memory_usage().bytes_reserved, 0, "order {order:?}");
    }
}

#[test]
fn c29_free_order_does_not_matter_cleanup_after_every_drop() {
    let mut memory = memory();
    for order in ORDERS {
        let mut handles = three(&mut memory);
        for (step, i) in order.into_iter().enumerate() {
            handles[i] = None;
            memory.cleanup(Cleanup::Explicit);
            let expected = if step < 2 { 1 } else { 0 };
            assert_eq!(
                memory.storage().live_allocations(),
                expected,
                "order {order:?}, after dropping {} of 3",
                step + 1
            );
        }
        assert_eq!(memory.memory_usage().bytes_reserved, 0, "order {order:?}");
        // And the page coalesced fully before going: a whole-page reservation fits one
        // fresh page.
        let whole = memory.reserve(MIB).unwrap();
        assert_eq!(memory.storage().live_allocations(), 1);
        drop(whole);
        memory.cleanup(Cleanup::Explicit);
    }
}
