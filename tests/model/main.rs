//! A shadow model: random reserve / drop / cleanup sequences on BytesStorage, checked
//! after every step against a plain list of live allocations.

use proptest::prelude::*;
use std::collections::BTreeMap;
use wgpu_memory::memory_management::{
    Cleanup, InstallMemoryPoolsError, ManagedMemoryHandle, MemoryAllocationMode,
    MemoryConfiguration, MemoryDeviceProperties, MemoryManagement, MemoryManagementOptions,
    MemoryPoolOptions, PoolType,
};
use wgpu_memory::storage::BytesStorage;

const ALIGN: u64 = 64;

#[derive(Debug, Clone)]
enum Op {
    Reserve(u64),
    Drop(usize),
    Cleanup,
    /// Open a window (Persistent or Dedicated) or close the innermost (Auto).
    Mode(u8),
    /// Install layout n of `layouts()`.
    Install(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..20_000).prop_map(Op::Reserve),
        1 => (0u64..200_000).prop_map(Op::Reserve),
        5 => any::<usize>().prop_map(Op::Drop),
        1 => Just(Op::Cleanup),
        1 => (0u8..3).prop_map(Op::Mode),
        1 => (0usize..4).prop_map(Op::Install),
    ]
}

fn mode(n: u8) -> MemoryAllocationMode {
    match n {
        0 => MemoryAllocationMode::Auto,
        1 => MemoryAllocationMode::Persistent,
        _ => MemoryAllocationMode::Dedicated,
    }
}

/// Explicit layouts; the last index means the default (adaptive) preset.
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

fn build(layout: usize) -> MemoryManagement<BytesStorage> {
    let options = MemoryManagementOptions::new("model");
    let options = match layouts().get(layout) {
        Some(pools) => options.pools(pools.clone()),
        None => options,
    };
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(1 << 20, ALIGN),
        MemoryConfiguration::default(),
        options,
    )
}

fn install(
    memory: &mut MemoryManagement<BytesStorage>,
    layout: usize,
) -> Result<(), InstallMemoryPoolsError> {
    match layouts().get(layout) {
        Some(pools) => memory.install_memory_pools(pools.clone()),
        None => memory.install_configuration(MemoryConfiguration::default()),
    }
}

/// A live allocation: its handle, size, and whether it sits in a dynamic pool.
type Live = (ManagedMemoryHandle, u64, bool);

/// Checks the memory against the live set: exact usage, alignment, no overlap.
fn check(memory: &MemoryManagement<BytesStorage>, live: &[Live]) {
    let usage = memory.memory_usage();
    assert_eq!(usage.number_allocs, live.len() as u64);
    assert_eq!(
        usage.bytes_in_use,
        live.iter().map(|(_, size, _)| size).sum::<u64>()
    );
    let padding: u64 = live
        .iter()
        .map(|(_, size, _)| (*size).max(1).next_multiple_of(ALIGN) - size)
        .sum();
    assert_eq!(usage.bytes_padding, padding);
    assert!(usage.bytes_in_use + usage.bytes_padding <= usage.bytes_reserved);
    let mut pages: BTreeMap<_, Vec<(u64, u64)>> = BTreeMap::new();
    for (handle, size, _) in live {
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

/// Cases per property: 1000 by default (what CI runs), `MODEL_CASES` to change it
/// (`MODEL_CASES=10000 cargo test --test model` for a long run; an empty or unparsable
/// value keeps the default).
fn cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn usage_matches_the_live_set(layout in 0usize..4, ops in prop::collection::vec(op(), 1..120)) {
        let mut memory = build(layout);
        let mut live: Vec<Live> = Vec::new();
        let mut windows = 0usize;
        for op in ops {
            match op {
                Op::Reserve(size) => live.push((memory.reserve(size).unwrap(), size, windows == 0)),
                Op::Mode(n) => {
                    memory.mode(mode(n));
                    windows = if n == 0 { windows.saturating_sub(1) } else { windows + 1 };
                }
                Op::Install(layout) => {
                    let dynamic_live = live.iter().any(|(_, _, dynamic)| *dynamic);
                    match install(&mut memory, layout) {
                        Ok(()) => prop_assert!(!dynamic_live, "installed over live slices"),
                        Err(InstallMemoryPoolsError::PoolsInUse { bytes_in_use, .. }) => {
                            prop_assert!(dynamic_live);
                            let expected: u64 = live.iter().filter(|l| l.2).map(|l| l.1).sum();
                            prop_assert_eq!(bytes_in_use, expected);
                        }
                        Err(other) => prop_assert!(false, "{other}"),
                    }
                }
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

    /// The default (adaptive) layout on a device with 64 MiB pages, with sizes from a
    /// few bytes to 6 MiB: pages of many sizes are added and given back, and the
    /// accounting stays exact throughout.
    #[test]
    fn adaptive_tiers_keep_exact_accounting(ops in prop::collection::vec(adaptive_op(), 1..160)) {
        let mut memory = MemoryManagement::from_configuration(
            BytesStorage::default(),
            &MemoryDeviceProperties::new(64 << 20, ALIGN),
            MemoryConfiguration::default(),
            MemoryManagementOptions::new("adaptive model"),
        );
        let mut live: Vec<Live> = Vec::new();
        for op in ops {
            match op {
                Op::Reserve(size) => live.push((memory.reserve(size).unwrap(), size, true)),
                Op::Drop(i) if !live.is_empty() => {
                    let index = i % live.len();
                    live.swap_remove(index);
                }
                Op::Cleanup => memory.cleanup(Cleanup::Explicit),
                _ => {}
            }
            check(&memory, &live);
        }
        live.clear();
        memory.cleanup(Cleanup::Explicit);
        prop_assert_eq!(memory.memory_usage().bytes_reserved, 0);
        prop_assert_eq!(memory.storage().pages_held(), 0);
    }
}

fn adaptive_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..64 << 10).prop_map(Op::Reserve),
        3 => (64u64 << 10..1 << 20).prop_map(Op::Reserve),
        2 => (1u64 << 20..6 << 20).prop_map(Op::Reserve),
        6 => any::<usize>().prop_map(Op::Drop),
        1 => Just(Op::Cleanup),
    ]
}
