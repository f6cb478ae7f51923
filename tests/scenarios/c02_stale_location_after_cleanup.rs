//! C02 Stale location after cleanup.
//!
//! Exclusive pool. A = reserve(1 KiB), B = reserve(1 KiB), keep a cloned binding bB of B;
//! drop A; explicit cleanup (A's page freed, B's page renumbered); write [0x5A; 1024] to B;
//! read through bB. Then drop B and every binding, C = reserve(1 KiB). Expect: the read
//! through bB returns the 0x5A bytes; no lookup ever returns another allocation's slice; a
//! binding to a slice that is gone is a NotFound error, never a panic.
//!
//! Run on the memory layer directly, over `BytesStorage` (writes and reads through
//! `get_resource`). A "binding to a slice that is gone" is made two ways: the reserved
//! handle of a `bind` (stale by protocol), and a fresh handle whose location is set to a
//! released slice's old location (what a stale location looks like to the lookup).

use crate::common::*;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use cubecl_runtime::server::IoError;
use wgpu_memory::memory_management::Cleanup;
use wgpu_memory::storage::BytesStorage;

#[test]
fn c02_stale_location_after_cleanup() {
    let mut memory = explicit(
        BytesStorage::default(),
        GIB,
        256,
        vec![exclusive(MIB, None)],
    );
    let a = memory.reserve(KIB).unwrap();
    let b = memory.reserve(KIB).unwrap();
    let bb = b.clone().binding();
    let a_location = a.descriptor().location();
    let b_page = memory.get_storage(&bb).unwrap();
    let a_page = memory.get_storage(&a.clone().binding()).unwrap();
    assert_ne!(
        a_page.id, b_page.id,
        "an exclusive pool gives each its own page"
    );

    drop(a);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(
        memory.storage().pages_held(),
        1,
        "A's page is freed, B's kept"
    );
    assert_eq!(memory.memory_usage().bytes_reserved, 1024);

    // B's binding still names B's page, whatever renumbering happened.
    let after = memory.get_storage(&bb).unwrap();
    assert_eq!(after.id, b_page.id);
    assert_eq!((after.offset(), after.size()), (b_page.offset(), 1024));

    memory
        .get_resource(&b.clone().binding(), None, None)
        .unwrap()
        .write(&[0x5A; 1024]);
    let read = memory.get_resource(&bb, None, None).unwrap().read();
    assert_eq!(
        read,
        vec![0x5A; 1024],
        "the read through bB returns B's bytes"
    );

    // A's old location names nothing now: NotFound, no panic.
    let forged_a = ManagedMemoryHandle::new();
    forged_a.descriptor().update_location(a_location);
    assert!(matches!(
        memory.get_storage(&forged_a.clone().binding()),
        Err(IoError::NotFound { .. })
    ));
    assert!(matches!(
        memory.get_resource(&forged_a.binding(), None, None),
        Err(IoError::NotFound { .. })
    ));

    let b_location = b.descriptor().location();
    drop(b);
    drop(bb);
    let c = memory.reserve(KIB).unwrap();
    let c_storage = memory.get_storage(&c.clone().binding()).unwrap();
    assert_eq!(c_storage.size(), 1024);

    // B's and A's old locations, whatever now lives there, never resolve to C.
    for location in [a_location, b_location] {
        let forged = ManagedMemoryHandle::new();
        forged.descriptor().update_location(location);
        let binding = forged.binding();
        assert!(
            matches!(memory.get_storage(&binding), Err(IoError::NotFound { .. })),
            "a stale location resolved to another allocation's slice"
        );
        assert!(matches!(
            memory.get_cursor(&binding),
            Err(IoError::NotFound { .. })
        ));
    }

    // The protocol's stale handle: after bind, the reserved handle is NotFound.
    let reserved = memory.reserve(KIB).unwrap();
    let stale = reserved.clone().binding();
    let assigned = ManagedMemoryHandle::new();
    memory.bind(reserved, assigned.clone(), 0).unwrap();
    assert!(matches!(
        memory.get_storage(&stale),
        Err(IoError::NotFound { .. })
    ));
    assert!(memory.get_storage(&assigned.clone().binding()).is_ok());
    drop(stale);
    drop(assigned);
    memory.cleanup(Cleanup::Explicit);
    // C is the only allocation left.
    assert_eq!(memory.memory_usage().number_allocs, 1);
    assert_eq!(memory.get_storage(&c.binding()).unwrap().id, c_storage.id);
}
