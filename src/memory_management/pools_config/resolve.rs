//! Checking a pools config against a device and turning it into a layout.

use super::*;

// ---------------------------------------------------------------------------------------
// Resolving
// ---------------------------------------------------------------------------------------

impl MemoryPoolsConfig {
    /// Checks this configuration against a device and turns it into a layout.
    ///
    /// The alignment is `max(properties.alignment, 1)` bytes. A preset becomes
    /// [`PoolLayout::Preset`]. A list is checked as a whole (not empty, at most 254
    /// entries), then entry by entry in order, and the first error wins:
    ///
    /// - exclusive: `max_alloc_size` rounded up to the alignment (0 stays 0); the period
    ///   is kept.
    /// - direct: `reclaim_at` kept as written; no period.
    /// - sliced: `page_size` non-zero, then rounded up; `max_slice_size` non-zero, rounded
    ///   up (default: the aligned page), at most the page; `max_pool_size` non-zero, at
    ///   least one aligned page and at most 65535 of them, kept as written; the period is
    ///   kept although sliced pools ignore it.
    ///
    /// A sliced entry's aligned `page_size` must be at most `properties.max_page_size`
    /// (on wgpu the adapter's buffer and binding limits, a hard limit): a larger page could
    /// never be made, so every reservation of the pool would fail. Exclusive and direct
    /// entries are not checked against it: their pages are sized per reservation, and a
    /// reservation over the device's page is refused with a `BufferTooBig` that names it.
    ///
    /// # Errors
    ///
    /// [`PoolConfigError::EmptyPoolList`], [`PoolConfigError::TooManyPools`],
    /// [`PoolConfigError::ZeroSize`], [`PoolConfigError::PageOverDeviceLimit`],
    /// [`PoolConfigError::SliceLargerThanPage`],
    /// [`PoolConfigError::CapSmallerThanPage`], [`PoolConfigError::TooManyPages`],
    /// [`PoolConfigError::BadSize`] (a size that overflows `u64` when rounded up), and on
    /// exclusive-memory-only builds ([`EXCLUSIVE_MEMORY_ONLY`]) the `"adaptive"` preset
    /// ([`PoolConfigError::PresetUnavailable`]) and sliced entries
    /// ([`PoolConfigError::SlicedPoolsUnavailable`]).
    ///
    /// # Panics
    ///
    /// Never.
    pub fn resolve(
        &self,
        properties: &MemoryDeviceProperties,
    ) -> Result<PoolLayout, PoolConfigError> {
        self.resolve_for_build(properties, EXCLUSIVE_MEMORY_ONLY)
    }

    /// [`Self::resolve`] with the build's exclusive-memory-only flag passed in, so both
    /// builds' rules can be tested in one.
    pub(super) fn resolve_for_build(
        &self,
        properties: &MemoryDeviceProperties,
        exclusive_only: bool,
    ) -> Result<PoolLayout, PoolConfigError> {
        match self {
            Self::Preset(preset) => resolve_preset(*preset, exclusive_only).map(PoolLayout::Preset),
            Self::Explicit(entries) => {
                if entries.is_empty() {
                    return Err(PoolConfigError::EmptyPoolList);
                }
                if entries.len() > MAX_POOLS {
                    return Err(PoolConfigError::TooManyPools {
                        count: entries.len(),
                        limit: MAX_POOLS,
                    });
                }
                let device = DeviceLimits {
                    alignment: properties.alignment.max(1),
                    max_page_size: properties.max_page_size,
                };
                entries
                    .iter()
                    .enumerate()
                    .map(|(entry, config)| resolve_entry(entry, config, device, exclusive_only))
                    .collect::<Result<Vec<_>, _>>()
                    .map(PoolLayout::Explicit)
            }
        }
    }
}

pub(super) fn resolve_preset(
    preset: MemoryPoolsPreset,
    exclusive_only: bool,
) -> Result<MemoryConfiguration, PoolConfigError> {
    match preset {
        MemoryPoolsPreset::ExclusivePages => Ok(MemoryConfiguration::ExclusivePages),
        MemoryPoolsPreset::Adaptive if exclusive_only => Err(PoolConfigError::PresetUnavailable {
            preset: preset.name(),
        }),
        // `MemoryConfiguration::Adaptive` only exists where pages may be shared, so naming
        // it would not compile on exclusive-memory-only builds; the default is exactly
        // `Adaptive` on every build where this arm runs.
        MemoryPoolsPreset::Adaptive => Ok(MemoryConfiguration::default()),
    }
}

/// What an entry is checked against: the device's alignment and largest page, in bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceLimits {
    /// Offsets and sizes are rounded up to this (at least 1).
    pub(super) alignment: u64,
    /// The largest page the device can make.
    pub(super) max_page_size: u64,
}

pub(super) fn resolve_entry(
    entry: usize,
    config: &MemoryPoolConfig,
    device: DeviceLimits,
    exclusive_only: bool,
) -> Result<MemoryPoolOptions, PoolConfigError> {
    let align = |field: &'static str, bytes: u64| align_up(entry, field, bytes, device.alignment);
    match *config {
        MemoryPoolConfig::Exclusive {
            max_alloc_size,
            dealloc_period,
        } => Ok(MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: align("max_alloc_size", max_alloc_size.0)?,
            },
            dealloc_period,
        }),
        MemoryPoolConfig::Direct { reclaim_at } => Ok(MemoryPoolOptions {
            pool_type: PoolType::Direct {
                reclaim_at: reclaim_at.map(MemorySize::bytes),
            },
            dealloc_period: None,
        }),
        MemoryPoolConfig::Sliced { .. } if exclusive_only => {
            Err(PoolConfigError::SlicedPoolsUnavailable { entry })
        }
        MemoryPoolConfig::Sliced {
            page_size,
            max_slice_size,
            max_pool_size,
            dealloc_period,
        } => {
            let zero = |field| PoolConfigError::ZeroSize { entry, field };
            if page_size.0 == 0 {
                return Err(zero("page_size"));
            }
            let page_size = align("page_size", page_size.0)?;
            if page_size > device.max_page_size {
                return Err(PoolConfigError::PageOverDeviceLimit {
                    entry,
                    field: "page_size",
                    page_size,
                    limit: device.max_page_size,
                });
            }
            let max_slice_size = match max_slice_size {
                Some(MemorySize(0)) => return Err(zero("max_slice_size")),
                Some(MemorySize(bytes)) => align("max_slice_size", bytes)?,
                None => page_size,
            };
            if max_slice_size > page_size {
                return Err(PoolConfigError::SliceLargerThanPage {
                    entry,
                    page_size,
                    max_slice_size,
                });
            }
            let max_pool_size = max_pool_size.map(MemorySize::bytes);
            if let Some(cap) = max_pool_size {
                if cap == 0 {
                    return Err(zero("max_pool_size"));
                }
                if cap < page_size {
                    return Err(PoolConfigError::CapSmallerThanPage {
                        entry,
                        page_size,
                        max_pool_size: cap,
                    });
                }
                let pages = cap / page_size;
                if pages > MAX_PAGES_PER_POOL {
                    return Err(PoolConfigError::TooManyPages {
                        entry,
                        pages,
                        limit: MAX_PAGES_PER_POOL,
                    });
                }
            }
            Ok(MemoryPoolOptions {
                pool_type: PoolType::SlicedPages {
                    page_size,
                    max_slice_size,
                    max_pool_size,
                },
                dealloc_period,
            })
        }
    }
}

/// `bytes` rounded up to a multiple of `alignment` (non-zero); 0 stays 0.
///
/// # Errors
///
/// [`PoolConfigError::BadSize`] when the rounded value passes `u64::MAX`.
pub(super) fn align_up(
    entry: usize,
    field: &'static str,
    bytes: u64,
    alignment: u64,
) -> Result<u64, PoolConfigError> {
    bytes
        .div_ceil(alignment)
        .checked_mul(alignment)
        .ok_or_else(|| PoolConfigError::BadSize {
            entry: Some(entry),
            field,
            value: bytes.to_string(),
            reason: format!(
                "rounding it up to the device alignment of {alignment} bytes passes u64::MAX"
            ),
        })
}
