//! MemoryManagement on host memory: placement, reuse, accounting, lookups.

use wgpu_memory::memory_management::{
    Cleanup, MemoryConfiguration, MemoryDeviceProperties, MemoryManagement,
    MemoryManagementOptions, MemoryPoolOptions, PoolType, ReserveError,
};
use wgpu_memory::storage::{BytesStorage, ComputeStorage};

const ALIGN: u64 = 32;

fn memory(pools: Vec<MemoryPoolOptions>) -> MemoryManagement<BytesStorage> {
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(128 << 20, ALIGN),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("test").pools(pools),
    )
}

fn sliced(page_size: u64, max_pool_size: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size,
            max_slice_size: page_size,
            max_pool_size,
        },
        dealloc_period: None,
    }
}

fn exclusive(max_alloc_size: u64) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages { max_alloc_size },
        dealloc_period: None,
    }
}

/// A dropped handle's slice is what the next same-size reservation gets, in a sliced
/// page with no other room and in an exclusive pool.
#[test]
fn dropped_slice_is_reused_by_the_next_same_size_reservation() {
    let mut memory = memory(vec![sliced(1024, None)]);
    let mut handles: Vec<_> = (0..4).map(|_| memory.reserve(256).unwrap()).collect();
    let second = memory.get_storage(&handles[1].clone().binding()).unwrap();
    drop(handles.remove(1));
    let again = memory.reserve(256).unwrap();
    let storage = memory.get_storage(&again.binding()).unwrap();
    assert_eq!((storage.id, storage.offset()), (second.id, second.offset()));
    assert_eq!(memory.storage().allocations_made(), 1);

    let mut memory = self::memory(vec![exclusive(4096)]);
    let first = memory.reserve(4096).unwrap();
    let first_id = memory.get_storage(&first.clone().binding()).unwrap().id;
    drop(first);
    let second = memory.reserve(4096).unwrap();
    assert_eq!(memory.get_storage(&second.binding()).unwrap().id, first_id);
    assert_eq!(memory.storage().allocations_made(), 1);
}

/// Two slices on one page: counts, in-use, padding and reserved are exact.
#[test]
fn usage_counts_two_slices_on_one_page() {
    let mut memory = memory(vec![sliced(2048, None)]);
    let _a = memory.reserve(512).unwrap();
    let _b = memory.reserve(500).unwrap();
    let usage = memory.memory_usage();
    assert_eq!(usage.number_allocs, 2);
    assert_eq!(usage.bytes_in_use, 1012);
    assert_eq!(usage.bytes_padding, 12);
    assert_eq!(usage.bytes_reserved, 2048);
}

/// A binding keeps its slice alive after the handle is dropped.
#[test]
fn a_binding_keeps_the_slice_alive() {
    let mut memory = memory(vec![sliced(1024, None)]);
    let handle = memory.reserve(1024).unwrap();
    let binding = handle.clone().binding();
    drop(handle);
    let other = memory.reserve(1024).unwrap();
    let (held, new) = (
        memory.get_storage(&binding).unwrap(),
        memory.get_storage(&other.clone().binding()).unwrap(),
    );
    assert_ne!(held.id, new.id);
    assert_eq!(memory.memory_usage().number_allocs, 2);
}

/// A binding from a handle never placed, and a binding whose slot now holds another
/// allocation, are NotFound, never another allocation's slice.
#[test]
fn stale_and_unplaced_bindings_are_not_found() {
    use cubecl_runtime::memory_management::ManagedMemoryHandle;
    use cubecl_runtime::server::IoError;
    let mut memory = memory(vec![sliced(1024, None)]);
    let _live = memory.reserve(64).unwrap();
    let unplaced = ManagedMemoryHandle::new().binding();
    assert!(matches!(
        memory.get_storage(&unplaced),
        Err(IoError::NotFound { .. })
    ));

    let reserved = memory.reserve(64).unwrap();
    let assigned = ManagedMemoryHandle::new();
    let stale = reserved.clone().binding();
    memory.bind(reserved, assigned.clone(), 0).unwrap();
    assert!(matches!(
        memory.get_storage(&stale),
        Err(IoError::NotFound { .. })
    ));
    assert!(memory.get_storage(&assigned.binding()).is_ok());
}

/// `bind` takes a handle minted for the reservation: an assigned handle that already
/// names another slice is refused (NotFound, saying why), and neither slice leaks once
/// every owner let go. Before, both slots kept a clone of the handle and neither was
/// ever free again.
#[test]
fn binding_an_already_bound_handle_is_refused_and_leaks_nothing() {
    use cubecl_runtime::memory_management::ManagedMemoryHandle;
    use cubecl_runtime::server::IoError;
    let mut memory = memory(vec![sliced(1024, None)]);
    let assigned = ManagedMemoryHandle::new();
    let first = memory.reserve(64).unwrap();
    memory.bind(first, assigned.clone(), 0).unwrap();
    let second = memory.reserve(64).unwrap();
    match memory.bind(second, assigned.clone(), 0) {
        Err(IoError::NotFound { reason, .. }) => {
            let reason = reason.to_string();
            assert!(reason.contains("already names a slice"), "{reason}")
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    // Rebinding a handle to its own slice only records the cursor: the bytes a failure
    // left unwritten stay claimed.
    let failure = memory.error_graph_mut().insert("boom");
    memory.taint(&assigned.clone().binding(), 0..64, failure);
    memory.bind(assigned.clone(), assigned.clone(), 7).unwrap();
    assert_eq!(memory.get_cursor(&assigned.clone().binding()).unwrap(), 7);
    assert_eq!(
        memory.failure(&assigned.clone().binding(), 0..64),
        Some(failure)
    );
    assert_eq!(memory.memory_usage().number_allocs, 1);
    drop(assigned);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 0);
}

/// A reservation that reuses a dropped allocation's bytes still gets an id of its own:
/// the id names one allocation for good (cubecl's `ManagedMemoryBinding::id` contract),
/// so a weak binding kept by a record of the old allocation never upgrades into the new
/// one. Checked for every pool shape and each allocation mode.
/// (cubecl-server hands the freed slot's handle out again; its bench accounting shows it.)
#[test]
fn a_reused_slice_gets_a_fresh_id_and_old_weak_bindings_stay_dead() {
    use cubecl_runtime::memory_management::MemoryAllocationMode;
    let direct = MemoryPoolOptions {
        pool_type: PoolType::Direct { reclaim_at: None },
        dealloc_period: None,
    };
    let layouts = [
        vec![sliced(1024, None)],
        vec![exclusive(4096)],
        vec![direct],
        Vec::new(),
    ];
    let modes = [
        MemoryAllocationMode::Auto,
        MemoryAllocationMode::Persistent,
        MemoryAllocationMode::Dedicated,
    ];
    for layout in layouts {
        for mode in modes {
            let mut memory = if layout.is_empty() {
                MemoryManagement::from_configuration(
                    BytesStorage::default(),
                    &MemoryDeviceProperties::new(128 << 20, ALIGN),
                    MemoryConfiguration::default(),
                    MemoryManagementOptions::new("default"),
                )
            } else {
                memory(layout.clone())
            };
            memory.mode(mode);
            let old = memory.reserve(256).unwrap();
            let old_binding = old.binding();
            let old_place = memory.get_storage(&old_binding).unwrap();
            let (old_id, weak) = (old_binding.id(), old_binding.downgrade());
            drop(old_binding);
            assert!(
                weak.upgrade().is_none(),
                "{mode:?}: nothing owns it any more"
            );

            let new = memory.reserve(256).unwrap();
            let new_binding = new.clone().binding();
            let new_place = memory.get_storage(&new_binding).unwrap();
            // A dedicated allocation goes back to the driver at the next cleanup
            // instead of being reused, so only the other modes reuse the bytes.
            if !matches!(mode, MemoryAllocationMode::Dedicated) {
                assert_eq!(
                    (new_place.id, new_place.offset()),
                    (old_place.id, old_place.offset()),
                    "{mode:?}: the same bytes are reused"
                );
            }
            assert_ne!(new_binding.id(), old_id, "{mode:?}: a reuse mints a new id");
            assert!(
                weak.upgrade().is_none(),
                "{mode:?}: the old allocation's weak binding must not reach the new one"
            );
        }
    }
}

/// Explicit cleanup returns every free page and flushes the storage.
#[test]
fn explicit_cleanup_returns_free_pages() {
    let mut memory = memory(vec![sliced(1024, None), exclusive(1 << 20)]);
    let small: Vec<_> = (0..8).map(|_| memory.reserve(300).unwrap()).collect();
    let big = memory.reserve(100_000).unwrap();
    assert!(memory.memory_usage().bytes_reserved > 0);
    drop(small);
    drop(big);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 0);
    assert_eq!(memory.storage().bytes_allocated(), 0);
}

/// Over the largest page: BufferTooBig naming both numbers.
#[test]
fn over_the_largest_page_is_buffer_too_big() {
    let mut memory = memory(vec![sliced(1024, None)]);
    match memory.reserve(2000) {
        Err(ReserveError::BufferTooBig { requested, limit }) => {
            assert_eq!((requested, limit), (2000, 1024));
        }
        other => panic!("expected BufferTooBig, got {other:?}"),
    }
}

/// A sliced pool with slices below its page refuses the sizes between `max_slice_size`
/// and the near-page threshold: the error names the request and the sizes the layout
/// accepts, not a largest size above the request. Over every pool stays BufferTooBig
/// with the true largest size.
#[test]
fn a_gap_between_slices_and_near_page_sizes_states_the_accepted_sizes() {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    let gapped = MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size: MIB,
            max_slice_size: 64 * KIB,
            max_pool_size: None,
        },
        dealloc_period: None,
    };
    let mut memory = memory(vec![gapped]);
    // Near-page sizes start at 1 MiB - (1 MiB - 1) / 5 = 838861 bytes.
    let near = MIB - (MIB - 1) / 5;
    let error = memory.reserve(500 * KIB).unwrap_err();
    let message = error.to_string();
    match &error {
        ReserveError::NoPoolAccepts {
            requested,
            accepted,
        } => {
            assert_eq!(*requested, 500 * KIB);
            assert_eq!(accepted, &vec![(0, 64 * KIB), (near, MIB)]);
        }
        other => panic!("expected NoPoolAccepts, got {other:?}"),
    }
    assert_eq!(error.requested(), 500 * KIB);
    for part in [
        "500.00 KiB",
        "512000 bytes",
        "0 to 65536 bytes",
        "838861 to 1048576 bytes",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    assert!(!message.contains("largest"), "{message}");
    // Both ends of the gap are served.
    assert!(memory.reserve(64 * KIB).is_ok());
    assert!(memory.reserve(near).is_ok());
    assert!(matches!(
        memory.reserve(near - 1),
        Err(ReserveError::NoPoolAccepts { .. })
    ));
    // Over every pool (but under the device's largest page): the true largest size.
    match memory.reserve(MIB + 1) {
        Err(ReserveError::BufferTooBig { requested, limit }) => {
            assert_eq!((requested, limit), (MIB + 1, MIB));
        }
        other => panic!("expected BufferTooBig, got {other:?}"),
    }

    // A page of i64::MAX bytes (TOML's largest integer): no overflow; 2048 bytes is in
    // the gap, and the near-page sizes are above the device's largest page.
    let huge = MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size: i64::MAX as u64,
            max_slice_size: 1024,
            max_pool_size: None,
        },
        dealloc_period: None,
    };
    let mut memory = self::memory(vec![huge]);
    match memory.reserve(2048) {
        Err(ReserveError::NoPoolAccepts {
            requested,
            accepted,
        }) => assert_eq!((requested, accepted), (2048, vec![(0, 1024)])),
        other => panic!("expected NoPoolAccepts, got {other:?}"),
    }
}

/// The default layout serves sizes from 0 to the largest page.
#[test]
fn default_layout_serves_every_size() {
    let mut memory = MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(128 << 20, 256),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("default"),
    );
    let sizes = [0u64, 1, 255, 4096, 1 << 20, 9 << 20, 30 << 20, 128 << 20];
    let handles: Vec<_> = sizes
        .iter()
        .map(|&size| memory.reserve(size).unwrap())
        .collect();
    for (handle, &size) in handles.iter().zip(&sizes) {
        let storage = memory.get_storage(&handle.clone().binding()).unwrap();
        assert_eq!(storage.size(), size);
        assert_eq!(storage.offset() % 256, 0);
    }
    assert_eq!(
        memory.memory_usage().bytes_in_use,
        sizes.iter().sum::<u64>()
    );
}

/// Display names the memory, the totals and each pool.
#[test]
fn display_shows_totals_and_pools() {
    let mut memory = memory(vec![sliced(1 << 20, None)]);
    let _handle = memory.reserve(1536).unwrap();
    let text = memory.to_string();
    assert!(
        text.starts_with("test: 1.50 KiB in use (1 allocations"),
        "{text}"
    );
    assert!(text.contains("pool 0: sliced (1.00 MiB pages"), "{text}");
    assert!(text.contains("1.00 MiB reserved"), "{text}");
}

/// A handle whose reservation never happened reads as `Claim::Unallocated`.
#[test]
fn an_unallocated_handle_is_claimed_unallocated() {
    use cubecl_runtime::memory_management::ManagedMemoryHandle;
    use wgpu_memory::memory_management::Claim;
    let mut memory = memory(vec![sliced(1024, None)]);
    let placed = memory.reserve(64).unwrap();
    assert_eq!(memory.claim(&placed.binding(), 0..64), None);
    let never = ManagedMemoryHandle::new().binding();
    assert_eq!(
        memory.claim(&never, 0..4),
        Some(Claim::Unallocated(never.id()))
    );
}

/// Taints follow slices: a released slice uncounts its failure; a reused slice is clean.
#[test]
fn a_released_slice_sheds_its_failure() {
    let mut memory = memory(vec![sliced(1024, None)]);
    let handle = memory.reserve(256).unwrap();
    let failure = memory.error_graph_mut().insert("boom");
    memory.taint(&handle.clone().binding(), 0..256, failure);
    assert_eq!(
        memory.failure(&handle.clone().binding(), 10..11),
        Some(failure)
    );
    drop(handle);
    memory.cleanup(Cleanup::Explicit);
    assert!(memory.error_graph().is_empty());
    let again = memory.reserve(256).unwrap();
    assert_eq!(memory.failure(&again.binding(), 0..256), None);
}

/// Host storage refuses what it cannot hold instead of aborting, and refuses a range
/// outside its page.
#[test]
fn bytes_storage_refuses_impossible_requests() {
    use cubecl_runtime::server::IoError;
    use wgpu_memory::storage::{StorageHandle, StorageUtilization};
    let mut storage = BytesStorage::default();
    assert!(matches!(
        storage.alloc(u64::MAX / 2),
        Err(IoError::OutOfMemory { .. })
    ));
    let page = storage.alloc(64).unwrap();
    let outside = StorageHandle::new(
        page.id,
        StorageUtilization {
            offset: 60,
            size: 8,
        },
    );
    assert!(storage.get(&outside).is_err());
}

/// What a wrapper handle's `Drop` would read before letting go: the allocation's id and
/// location.
fn identity(
    handle: &wgpu_memory::memory_management::ManagedMemoryHandle,
) -> (
    wgpu_memory::memory_management::ManagedMemoryId,
    wgpu_memory::memory_management::MemoryLocation,
) {
    let binding = handle.clone().binding();
    (binding.id(), binding.descriptor().location())
}

/// `release` frees a dropped allocation's slice at once (no sweep has to find it), and
/// refuses while a binding is alive, for a stale location, and twice.
#[test]
fn release_frees_a_dropped_slice_at_once_and_nothing_else() {
    for layout in [vec![sliced(1 << 20, None)], vec![exclusive(1 << 20)]] {
        let mut memory = memory(layout);
        let keep = memory.reserve(4096).unwrap();
        let gone = memory.reserve(4096).unwrap();
        let (id, location) = identity(&gone);
        let binding = gone.clone().binding();
        drop(gone);
        assert!(!memory.release(id, location), "a binding still holds it");
        drop(binding);
        assert!(memory.release(id, location));
        assert!(!memory.release(id, location), "already released");
        let (keep_id, keep_location) = identity(&keep);
        assert!(!memory.release(keep_id, keep_location), "a live handle");
        // The slot now holds another allocation: the old identity is stale.
        let again = memory.reserve(4096).unwrap();
        assert_eq!(
            identity(&again).1.slice,
            location.slice,
            "the freed slot is reused"
        );
        assert!(!memory.release(id, location), "a stale location");
        assert_eq!(memory.memory_usage().number_allocs, 2);
    }
}

/// After `release`, the freed bytes are free at once (before, no sweep had seen the
/// drop: the full page had no free byte), and the next reservation of the size gets
/// them.
#[test]
fn released_bytes_serve_the_next_reservation() {
    let mut memory = memory(vec![sliced(1 << 20, None)]);
    let handles: Vec<_> = (0..32).map(|_| memory.reserve(32 << 10).unwrap()).collect();
    assert_eq!(memory.storage().allocations_made(), 1, "one page, full");
    let middle = &handles[13];
    let offset = memory
        .get_storage(&middle.clone().binding())
        .unwrap()
        .offset();
    let (id, location) = identity(middle);
    let mut handles = handles;
    handles.remove(13);
    assert_eq!(memory.largest_free_slice(), 0, "dropped, not yet swept");
    assert!(memory.release(id, location));
    assert_eq!(memory.largest_free_slice(), 32 << 10);
    let next = memory.reserve(32 << 10).unwrap();
    let storage = memory.get_storage(&next.binding()).unwrap();
    assert_eq!(storage.offset(), offset);
    assert_eq!(memory.storage().allocations_made(), 1, "no page made");
}
