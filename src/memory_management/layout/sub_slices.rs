//! The sub-slice ladder: sliced pools for small and medium sizes, one exclusive pool
//! for large ones.

use super::scaled_period;
use crate::memory_management::MemoryDeviceProperties;
use crate::memory_management::config::{MemoryPoolOptions, PoolType};
use crate::memory_management::pool::align_up;

/// Pages smaller than this get no rung of their own.
const SMALLEST_LADDER_PAGE: u64 = 32 << 20;

/// Rungs from the largest page down: each page a quarter of the one above (rounded up to
/// the alignment) while the one above is at least 32 MiB; the n-th rung from the top
/// takes slices up to its page / 2^n. The rungs are then listed smallest page first, and
/// an exclusive pool for everything up to the largest page closes the ladder.
///
/// With a 128 MiB largest page: `[sliced 8 MiB / 2 MiB] [sliced 32 MiB / 16 MiB]
/// [exclusive 128 MiB]`.
pub(crate) fn sub_slices(properties: &MemoryDeviceProperties) -> Vec<MemoryPoolOptions> {
    let alignment = properties.alignment.max(1);
    let mut rungs = Vec::new();
    let mut page = properties.max_page_size;
    let mut divisor_log = 1;
    while page >= SMALLEST_LADDER_PAGE {
        page = align_up(page / 4, alignment);
        rungs.push((page, page >> divisor_log));
        divisor_log += 1;
    }
    let mut pools: Vec<MemoryPoolOptions> = rungs
        .into_iter()
        .rev()
        .map(|(page_size, max_slice_size)| MemoryPoolOptions {
            pool_type: PoolType::SlicedPages {
                page_size,
                max_slice_size,
                max_pool_size: None,
            },
            dealloc_period: None,
        })
        .collect();
    let tail = properties.max_page_size / alignment * alignment;
    pools.push(MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages {
            max_alloc_size: tail,
        },
        dealloc_period: Some(scaled_period(tail)),
    });
    pools
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(pools: &[MemoryPoolOptions]) -> Vec<(u64, u64)> {
        pools
            .iter()
            .map(|pool| match pool.pool_type {
                PoolType::SlicedPages {
                    page_size,
                    max_slice_size,
                    ..
                } => (page_size, max_slice_size),
                PoolType::ExclusivePages { max_alloc_size } => (max_alloc_size, 0),
                PoolType::Direct { .. } => (0, 0),
            })
            .collect()
    }

    const MIB: u64 = 1 << 20;

    /// The ladder divisor grows with the rung counted from the top (upstream bug f5bbce7e6
    /// used the growing pool count), so the smallest page takes the smallest slices.
    #[test]
    fn ladder_of_a_128_mib_device() {
        let pools = sub_slices(&MemoryDeviceProperties::new(128 * MIB, 256));
        assert_eq!(
            shape(&pools),
            vec![(8 * MIB, 2 * MIB), (32 * MIB, 16 * MIB), (128 * MIB, 0)]
        );
        assert_eq!(pools[2].dealloc_period, Some(5000));
    }

    #[test]
    fn ladder_of_a_2_gib_device() {
        let pools = sub_slices(&MemoryDeviceProperties::new(2048 * MIB, 32));
        assert_eq!(
            shape(&pools),
            vec![
                (8 * MIB, 512 * 1024),
                (32 * MIB, 4 * MIB),
                (128 * MIB, 32 * MIB),
                (512 * MIB, 256 * MIB),
                (2048 * MIB, 0)
            ]
        );
        assert_eq!(pools[4].dealloc_period, Some(15000));
    }

    /// A device whose largest page is under 32 MiB gets no ladder, only the tail.
    #[test]
    fn small_device_has_only_the_tail() {
        let pools = sub_slices(&MemoryDeviceProperties::new(16 * MIB, 32));
        assert_eq!(shape(&pools), vec![(16 * MIB, 0)]);
    }

    /// 4 GiB pages do not overflow (upstream bug 3a4e3fbe3 truncated to 32 bits).
    #[test]
    fn four_gib_pages_build() {
        let pools = sub_slices(&MemoryDeviceProperties::new(4 << 30, 256));
        assert_eq!(shape(&pools).last(), Some(&(4 << 30, 0)));
    }
}
