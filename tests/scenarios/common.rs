//! Helpers shared by the scenario and regression binaries: memories on host storage
//! and pool options.
#![allow(dead_code)]

use wgpu_memory::memory_management::{
    MemoryConfiguration, MemoryDeviceProperties, MemoryManagement, MemoryManagementOptions,
    MemoryPoolOptions, PoolType,
};
use wgpu_memory::storage::ComputeStorage;

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// A memory with the default configuration (or `config`) over `storage`.
pub fn preset<S: ComputeStorage>(
    storage: S,
    max_page_size: u64,
    alignment: u64,
    config: MemoryConfiguration,
) -> MemoryManagement<S> {
    MemoryManagement::from_configuration(
        storage,
        &MemoryDeviceProperties::new(max_page_size, alignment),
        config,
        MemoryManagementOptions::new("scenario"),
    )
}

/// A memory with an explicit layout.
pub fn explicit<S: ComputeStorage>(
    storage: S,
    max_page_size: u64,
    alignment: u64,
    pools: Vec<MemoryPoolOptions>,
) -> MemoryManagement<S> {
    MemoryManagement::from_configuration(
        storage,
        &MemoryDeviceProperties::new(max_page_size, alignment),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("scenario").pools(pools),
    )
}

pub fn sliced(page_size: u64, max_slice_size: u64, cap: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size,
            max_slice_size,
            max_pool_size: cap,
        },
        dealloc_period: None,
    }
}

pub fn exclusive(max_alloc_size: u64, dealloc_period: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages { max_alloc_size },
        dealloc_period,
    }
}

/// A direct pool with an optional reclaim watermark (bytes).
pub fn direct(reclaim_at: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::Direct { reclaim_at },
        dealloc_period: None,
    }
}
