//! Layouts: the ordered list of dynamic pools a memory routes reservations through,
//! derived from the device's properties or given explicitly.

mod exclusive_pages;

use super::MemoryDeviceProperties;
use super::config::{MemoryPoolOptions, PoolType};
use super::pool::adaptive::AdaptivePool;
use super::pool::sliced::SlicedPool;
use super::pool::whole_page::{Release, Reuse, WholePagePool};
use super::pool::{DynamicPool, align_down, align_up};
use cubecl_runtime::memory_management::{MemoryConfiguration, MemoryPoolKind};

pub(crate) use exclusive_pages::{PAGE_GRANULE, exclusive_pages};

/// The largest reservation the adaptive layout's small pool takes, in bytes.
pub(crate) const SMALL_SLICE: u64 = 64 << 10;
/// The page size of the adaptive layout's small pool, in bytes.
pub(crate) const SMALL_PAGE: u64 = 512 << 10;
/// The first page of the adaptive layout's small pool, in bytes: two of its largest
/// slices; its later pages are [`SMALL_PAGE`] (see `SlicedPool::ramping`).
pub(crate) const SMALL_FIRST_PAGE: u64 = 2 * SMALL_SLICE;

/// The most dynamic pools a layout may have: a handle names its pool in a `u8`, and
/// positions 254 and 255 are the dedicated and persistent pools.
pub(crate) const MAX_POOLS: usize = 254;

/// One pool of a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PoolSpec {
    /// A pool of a [`PoolType`].
    Options(MemoryPoolOptions),
    /// An exclusive pool of the exclusive-pages preset: pages rounded to size classes
    /// and reused up to twice the request ([`Reuse::SizeClasses`]), in multiples of
    /// [`PAGE_GRANULE`] rather than of the storage-offset alignment. A transient
    /// memory's is an exclusive pool like any other.
    ClassedPages(MemoryPoolOptions),
    /// Pages sized after the allocations served ([`AdaptivePool`]).
    Adaptive,
    /// A sliced pool that takes only sizes up to `max_slice_size` (the adaptive layout's
    /// small pool).
    Small { page_size: u64, max_slice_size: u64 },
}

/// The dealloc period of a preset's exclusive pool: larger pages wait longer before they
/// go back, since re-making them costs more (5000 reservations per GiB, rounded).
pub(crate) fn scaled_period(bytes: u64) -> u64 {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    5000 * (1.0 + gib).round() as u64
}

/// The pools of a preset configuration.
///
/// `Adaptive`: a sliced pool of 512 KiB pages that takes reservations of up to 64 KiB
/// (at least eight of its largest slices per page; its first page is 128 KiB, so a small
/// workload reserves little), then the
/// adaptive pool, which takes every size. Routing uses room held in
/// any accepting pool before a pool grows, so a small reservation goes into the
/// adaptive pool's free room when the small pool has none; only the small pool grows
/// for one.
pub(crate) fn preset(
    config: &MemoryConfiguration,
    properties: &MemoryDeviceProperties,
) -> Vec<PoolSpec> {
    match config {
        MemoryConfiguration::ExclusivePages => exclusive_pages(properties)
            .into_iter()
            .map(PoolSpec::ClassedPages)
            .collect(),
        #[allow(unreachable_patterns)]
        _ => {
            let alignment = properties.alignment.max(1);
            // Never over the device's largest page: round that down to the alignment
            // first (a device may report a largest page that is not a multiple of it).
            let largest = align_down(properties.max_page_size, alignment);
            let page_size = align_up(SMALL_PAGE.min(largest), alignment).max(alignment);
            vec![
                PoolSpec::Small {
                    page_size,
                    max_slice_size: SMALL_SLICE.min(page_size),
                },
                PoolSpec::Adaptive,
            ]
        }
    }
}

/// Builds the pools of a layout. Positions are the list indices. `transient`: exclusive
/// pages reuse any larger free page (see `MemoryManagementOptions::transient`).
pub(crate) fn instantiate(
    specs: &[PoolSpec],
    properties: &MemoryDeviceProperties,
    transient: bool,
) -> Vec<DynamicPool> {
    let alignment = properties.alignment.max(1);
    specs
        .iter()
        .take(MAX_POOLS)
        .enumerate()
        .map(|(position, spec)| match spec {
            PoolSpec::Options(option) => build_pool(position as u8, option, alignment, transient),
            PoolSpec::ClassedPages(option) if transient => {
                build_pool(position as u8, option, alignment, transient)
            }
            PoolSpec::ClassedPages(option) => {
                classed_pool(position as u8, option, alignment, properties.max_page_size)
            }
            PoolSpec::Small {
                page_size,
                max_slice_size,
            } => DynamicPool::Sliced(
                SlicedPool::new(position as u8, *page_size, *max_slice_size, None, alignment)
                    .without_near_page()
                    .ramping(SMALL_FIRST_PAGE),
            ),
            PoolSpec::Adaptive => DynamicPool::Adaptive(AdaptivePool::new(
                position as u8,
                properties.max_page_size,
                alignment,
            )),
        })
        .collect()
}

/// An exclusive pool of the preset (see [`PoolSpec::ClassedPages`]); any other pool
/// type is built as given.
fn classed_pool(
    position: u8,
    option: &MemoryPoolOptions,
    alignment: u64,
    max_page_size: u64,
) -> DynamicPool {
    let PoolType::ExclusivePages { max_alloc_size } = option.pool_type else {
        return build_pool(position, option, alignment, false);
    };
    let release = option
        .dealloc_period
        .map_or(Release::Explicit, Release::AfterIdle);
    DynamicPool::WholePage(
        WholePagePool::new(
            position,
            MemoryPoolKind::Exclusive {
                max_alloc_size: align_up(max_alloc_size, alignment),
            },
            max_alloc_size,
            alignment.min(PAGE_GRANULE),
            Reuse::SizeClasses,
            release,
        )
        .pages_at_most(align_down(max_page_size, alignment).max(alignment)),
    )
}

fn build_pool(
    position: u8,
    option: &MemoryPoolOptions,
    alignment: u64,
    transient: bool,
) -> DynamicPool {
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
                    max_alloc_size: align_up(max_alloc_size, alignment),
                },
                max_alloc_size,
                alignment,
                if transient {
                    Reuse::AnyLarger
                } else {
                    Reuse::Similar
                },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The default layout: a small sliced pool, then the adaptive pool.
    #[test]
    fn adaptive_preset_has_a_small_pool_then_the_adaptive_pool() {
        let properties = MemoryDeviceProperties::new(128 << 20, 256);
        let specs = preset(&MemoryConfiguration::Adaptive, &properties);
        assert_eq!(specs.len(), 2);
        assert_eq!(
            specs[0],
            PoolSpec::Small {
                page_size: 524288,
                max_slice_size: 65536
            }
        );
        assert_eq!(specs[1], PoolSpec::Adaptive);
    }

    /// The small pool's page never exceeds the device's largest page, even when that
    /// is not a multiple of the alignment.
    #[test]
    fn small_page_stays_within_the_largest_page() {
        for (max_page, alignment, expected) in [
            (100_003, 4, 100_000),
            (65_536, 48, 65_520),
            (300_001, 48, 300_000),
            (1 << 30, 256, SMALL_PAGE),
        ] {
            let properties = MemoryDeviceProperties::new(max_page, alignment);
            let specs = preset(&MemoryConfiguration::Adaptive, &properties);
            let PoolSpec::Small { page_size, .. } = specs[0] else {
                panic!("the first pool is the small pool: {specs:?}");
            };
            assert_eq!(
                page_size, expected,
                "max page {max_page}, alignment {alignment}"
            );
        }
    }
}
