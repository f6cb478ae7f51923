//! Layouts: the ordered list of dynamic pools a memory routes reservations through,
//! derived from the device's properties or given explicitly.

mod exclusive_pages;
mod sub_slices;

use super::config::{MemoryPoolOptions, PoolType};
use super::pool::sliced::SlicedPool;
use super::pool::whole_page::{Release, Reuse, WholePagePool};
use super::pool::{DynamicPool, align_up};
use crate::memory_management::MemoryDeviceProperties;
use cubecl_runtime::memory_management::{MemoryConfiguration, MemoryPoolKind};

pub(crate) use exclusive_pages::exclusive_pages;
pub(crate) use sub_slices::sub_slices;

/// The dealloc period of a preset's exclusive pool: larger pages wait longer before they
/// go back, since re-making them costs more (5000 reservations per GiB, rounded).
pub(crate) fn scaled_period(bytes: u64) -> u64 {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    5000 * (1.0 + gib).round() as u64
}

/// The pool list of a preset configuration.
pub(crate) fn preset(
    config: &MemoryConfiguration,
    properties: &MemoryDeviceProperties,
) -> Vec<MemoryPoolOptions> {
    match config {
        MemoryConfiguration::ExclusivePages => exclusive_pages(properties),
        #[allow(unreachable_patterns)]
        _ => sub_slices(properties),
    }
}

/// Builds the pools of a layout. Positions are the list indices.
pub(crate) fn instantiate(options: &[MemoryPoolOptions], alignment: u64) -> Vec<DynamicPool> {
    options
        .iter()
        .enumerate()
        .map(|(position, option)| build_pool(position as u8, option, alignment))
        .collect()
}

fn build_pool(position: u8, option: &MemoryPoolOptions, alignment: u64) -> DynamicPool {
    match option.pool_type {
        PoolType::SlicedPages {
            page_size,
            max_slice_size,
            max_pool_size,
        } => DynamicPool::Sliced(SlicedPool::new(
            position,
            page_size,
            max_slice_size,
            max_pool_size,
            alignment,
        )),
        PoolType::ExclusivePages { max_alloc_size } => {
            let release = option
                .dealloc_period
                .map_or(Release::Explicit, Release::AfterIdle);
            DynamicPool::WholePage(WholePagePool::new(
                position,
                MemoryPoolKind::Exclusive {
                    max_alloc_size: align_up(max_alloc_size, alignment.max(1)),
                },
                max_alloc_size,
                alignment,
                Reuse::Similar,
                release,
            ))
        }
        PoolType::Direct { reclaim_at } => DynamicPool::WholePage(WholePagePool::new(
            position,
            MemoryPoolKind::Direct,
            u64::MAX,
            alignment,
            Reuse::Exact,
            reclaim_at.map_or(Release::Explicit, Release::Watermark),
        )),
    }
}

/// The largest reservation any pool of a layout accepts, in bytes.
pub(crate) fn largest_accepted(options: &[MemoryPoolOptions], max_page_size: u64) -> u64 {
    options
        .iter()
        .map(|option| match option.pool_type {
            PoolType::SlicedPages { page_size, .. } => page_size,
            PoolType::ExclusivePages { max_alloc_size } => max_alloc_size,
            PoolType::Direct { .. } => max_page_size,
        })
        .max()
        .unwrap_or(0)
        .min(max_page_size)
}
