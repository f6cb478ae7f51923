//! A shadow model: random reserve / drop / cleanup sequences on BytesStorage, checked
//! after every step against a plain list of live allocations.

use proptest::prelude::*;
use std::collections::BTreeMap;
use wgpu_memory::memory_management::{
    Cleanup, ManagedMemoryHandle, MemoryConfiguration, MemoryDeviceProperties, MemoryManagement,
    MemoryManagementOptions, MemoryPoolOptions, PoolType,
};
use wgpu_memory::storage::BytesStorage;

const ALIGN: u64 = 64;

#[derive(Debug, Clone)]
enum Op {
    Reserve(u64),
    Drop(usize),
    Cleanup,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..20_000).prop_map(Op::Reserve),
        1 => (0u64..200_000).prop_map(Op::Reserve),
        5 => any::<usize>().prop_map(Op::Drop),
        1 => Just(Op::Cleanup),
    ]
}

fn layouts() -> Vec<Vec<MemoryPoolOptions>> {
    let sliced = |page_size| MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size,
            max_slice_size: page_size,
            max_pool_size: None,
        },
        dealloc_period: None,
    };
    vec![
        vec![sliced(64 << 10), sliced(1 << 20)],
        vec![MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: 1 << 20,
            },
            dealloc_period: Some(10),
        }],
        vec![MemoryPoolOptions {
            pool_type: PoolType::Direct {
                reclaim_at: Some(256 << 10),
            },
            dealloc_period: None,
        }],
    ]
}

/// Checks the memory against the live set: exact usage, alignment, no overlap.
fn check(memory: &MemoryManagement<BytesStorage>, live: &[(ManagedMemoryHandle, u64)]) {
    let usage = memory.memory_usage();
    assert_eq!(usage.number_allocs, live.len() as u64);
    assert_eq!(
        usage.bytes_in_use,
        live.iter().map(|(_, size)| size).sum::<u64>()
    );
    let padding: u64 = live
        .iter()
        .map(|(_, size)| (*size).max(1).next_multiple_of(ALIGN) - size)
        .sum();
    assert_eq!(usage.bytes_padding, padding);
    assert!(usage.bytes_in_use + usage.bytes_padding <= usage.bytes_reserved);
    let mut pages: BTreeMap<_, Vec<(u64, u64)>> = BTreeMap::new();
    for (handle, size) in live {
        let storage = memory.get_storage(&handle.clone().binding()).unwrap();
        assert_eq!(storage.size(), *size);
        assert_eq!(storage.offset() % ALIGN, 0);
        pages
            .entry(storage.id)
            .or_default()
            .push((storage.offset(), size.max(&1).next_multiple_of(ALIGN)));
    }
    for ranges in pages.values_mut() {
        ranges.sort();
        for pair in ranges.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap {pair:?}");
        }
    }
}

fn cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn usage_matches_the_live_set(layout in 0usize..3, ops in prop::collection::vec(op(), 1..120)) {
        let mut memory = MemoryManagement::from_configuration(
            BytesStorage::default(),
            &MemoryDeviceProperties::new(1 << 20, ALIGN),
            MemoryConfiguration::default(),
            MemoryManagementOptions::new("model").pools(layouts()[layout].clone()),
        );
        let mut live: Vec<(ManagedMemoryHandle, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Reserve(size) => live.push((memory.reserve(size).unwrap(), size)),
                Op::Drop(i) if !live.is_empty() => {
                    let index = i % live.len();
                    live.swap_remove(index);
                }
                Op::Drop(_) => {}
                Op::Cleanup => memory.cleanup(Cleanup::Explicit),
            }
            check(&memory, &live);
        }
        live.clear();
        memory.cleanup(Cleanup::Explicit);
        prop_assert_eq!(memory.memory_usage().bytes_reserved, 0);
        prop_assert_eq!(memory.storage().pages_held(), 0);
    }
}
