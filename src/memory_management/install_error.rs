//! Why installing a pool layout did not take effect.

/// Why [`MemoryManagement::install_memory_pools`](super::MemoryManagement::install_memory_pools)
/// left the old layout in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InstallMemoryPoolsError {
    /// Live slices remain in the dynamic pools after the explicit cleanup that precedes
    /// an install; swapping the pools under them would lose them. Transient: retry once
    /// the handles (and bindings) are dropped.
    #[error(
        "cannot install a new pool layout: {allocations} allocations ({bytes_in_use} bytes) are still live in the dynamic pools; drop those handles and bindings and retry"
    )]
    PoolsInUse {
        /// Bytes in use in the dynamic pools, in bytes.
        bytes_in_use: u64,
        /// Live allocations in the dynamic pools (zero-size ones included).
        allocations: u64,
    },
    /// The layout has no pool: every dynamic reservation would be refused. Permanent:
    /// give at least one pool, or install a preset with `install_configuration`.
    #[error("a layout needs at least one pool; this one has none")]
    EmptyLayout,
    /// The layout has more dynamic pools than a handle's location can name (254: a
    /// `u8` pool index, with 254 and 255 taken by the dedicated and persistent pools).
    /// Permanent: merge pools.
    #[error("a layout may have at most {limit} pools; this one has {count}")]
    TooManyPools {
        /// Pools given.
        count: usize,
        /// The limit.
        limit: usize,
    },
}
