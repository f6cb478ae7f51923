//! Field scenarios (`/work/shared/cases/field-scenarios.md`), one module per scenario,
//! each test named by its id. They run the `memory_management` layer on host memory
//! ([`fake::FakeStorage`] or `BytesStorage`) and assert the outcome a correct library
//! gives.

mod fake;

mod c01_drifting_sizes;
mod c02_stale_location_after_cleanup;
mod c03_cached_pages_block_a_fitting_allocation;
mod c17_small_live_slices_pin_a_big_free_region;
mod c20_useful_out_of_memory_text;
mod c23_odd_alignments;
mod c25_failed_placement_stays_cheap;
mod c29_free_order_does_not_matter;
mod c31_device_allocation_failure_is_a_result;

// Tests of `MemoryManagement::install_memory_pools`. To disable while src/ does not
// build it, put `#[cfg(any())]` on this line.
mod install_memory_pools;

pub mod common {
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
}
