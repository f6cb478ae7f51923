//! The allocator proper: device pages, the pools that carve them, and the record of each
//! slice a handle names.
//!
//! # Contract of this layer
//!
//! - **Owns** the pools of one memory (pages carved into slices), the layout that routes a
//!   reservation to a pool, the allocation-mode windows, and the usage numbers and
//!   high-water marks behind [`MemoryPoolsReport`].
//! - **Validates** every request against the plain numbers it was built with
//!   ([`MemoryDeviceProperties`]: the largest page and the offset alignment) *before* it
//!   asks the storage for anything, so a request that can never fit is a
//!   [`ReserveError::BufferTooBig`] that names the limit, not a device error.
//! - **Returns** [`ReserveError`] from [`MemoryManagement::reserve`], and cubecl-runtime's
//!   [`IoError::NotFound`](cubecl_runtime::server::IoError::NotFound) for a binding whose
//!   slice is gone (a stale or never-allocated handle). It never panics on user input.
//! - **Never sees** wgpu: it is generic over [`ComputeStorage`](crate::storage::ComputeStorage),
//!   and its tests and benches run on [`BytesStorage`](crate::storage::BytesStorage).
//!
//! Reports, configuration enums and the handle type are defined by cubecl-runtime (the
//! spec names them); this module passes them through with `pub use` so callers need one
//! import path.
#![deny(unsafe_code)]

pub use cubecl_ir::MemoryDeviceProperties;
pub use cubecl_runtime::memory_management::*;

mod compaction;
mod config;
mod config_error;
pub mod drop_queue;
mod error;
mod error_graph;
mod install_error;
mod layout;
mod manager;
mod options;
mod page_events;
mod page_map;
mod pending;
mod placement;
mod pool;
#[cfg(test)]
pub(crate) use pool::adaptive::POW2_UP_TO as ADAPTIVE_POW2_UP_TO;
mod pools_config;
mod taint;
mod usage;

pub use compaction::{
    CompactNow, Compaction, DEFAULT_MAX_MOVE_BYTES, MAX_MOVES_PENDING, MakeRoom, MoveLimits,
    NoRoom, Pin, RoomFor, SliceMove,
};
pub use config::{MemoryPoolOptions, PoolType};
pub use config_error::PoolConfigError;
pub use error::{ReserveError, fragmentation, io_error_text};
pub use error_graph::{Claim, ErrorGraph, FailureId, FailureReport, MAX_SKIPPED, Skipped};
pub use install_error::InstallMemoryPoolsError;
pub use manager::{Cleanup, MemoryManagement};
pub use options::MemoryManagementOptions;
pub use page_events::{MAX_MEMORY_EVENTS, MemoryEvent};
pub use page_map::{LiveSlice, PageSlices, PoolPages};
pub use pending::{NothingPending, PendingRelease};
pub(crate) use pool::page_map::page_id;
pub(crate) use pools_config::check_file_tables;
pub use pools_config::{
    HistoryConfig, MemoryConfig, MemoryPoolConfig, MemoryPoolsConfig, MemoryPoolsPreset,
    MemorySize, PoolLayout, load_memory_config, load_memory_config_from, parse_memory_config,
};
pub use taint::Taint;
pub use usage::{format_bytes, pool_kind_text, pool_line, pool_line_on};
