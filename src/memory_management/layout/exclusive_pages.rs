//! The exclusive-pages layout: log-spaced buckets, one exclusive pool each.

use super::scaled_period;
use crate::memory_management::MemoryDeviceProperties;
use crate::memory_management::config::{MemoryPoolOptions, PoolType};
use crate::memory_management::pool::align_up;

const SMALLEST_BUCKET: u64 = 32 << 10;
const BUCKETS: u32 = 24;

/// 24 bucket sizes spaced evenly on a log scale from 32 KiB to the largest page, each
/// rounded up to the alignment (repeats dropped); one exclusive pool per bucket, each
/// accepting sizes up to its bucket.
pub(crate) fn exclusive_pages(properties: &MemoryDeviceProperties) -> Vec<MemoryPoolOptions> {
    let alignment = properties.alignment.max(1);
    let largest = properties.max_page_size.max(SMALLEST_BUCKET);
    let (low, high) = ((SMALLEST_BUCKET as f64).ln(), (largest as f64).ln());
    let mut sizes: Vec<u64> = (0..BUCKETS)
        .map(|i| {
            let size = (low + (high - low) * i as f64 / (BUCKETS - 1) as f64).exp() as u64;
            align_up(size, alignment)
        })
        .collect();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|max_alloc_size| MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages { max_alloc_size },
            dealloc_period: Some(scaled_period(max_alloc_size)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference buckets for a 128 MiB device with 32-byte alignment.
    #[test]
    fn buckets_of_a_128_mib_device() {
        let pools = exclusive_pages(&MemoryDeviceProperties::new(128 << 20, 32));
        let sizes: Vec<u64> = pools
            .iter()
            .map(|pool| match pool.pool_type {
                PoolType::ExclusivePages { max_alloc_size } => max_alloc_size,
                _ => 0,
            })
            .collect();
        assert_eq!(sizes.len(), 24);
        assert_eq!(sizes[0], 32768);
        assert_eq!(sizes[1], 47072);
        assert_eq!(sizes[12], 2512832);
        assert_eq!(sizes[23], 134217728);
    }
}
