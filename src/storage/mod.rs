//! Storage: where pages live.
//!
//! # Contract of this layer
//!
//! A storage implements cubecl-runtime's [`ComputeStorage`]: it makes pages of a given
//! size in bytes, hands out the resource behind a [`StorageHandle`] (a page id plus an
//! offset and size inside it), and takes pages back. Deallocations take effect at the
//! next [`flush`](ComputeStorage::flush); until then
//! [`bytes_allocated`](ComputeStorage::bytes_allocated) still counts them.
//!
//! A storage reports only what nobody can foresee: the device is out of memory
//! (`IoError::OutOfMemory`), a page over the device's own buffer limit
//! (`IoError::BufferTooBig`), an unknown id (`IoError::StorageHandleNotFound`), or a
//! driver error it caught. Sizes, alignment and binding limits are checked above it, in
//! `memory_management`, the layer above.
//!
//! A storage that also implements [`CopyStorage`] lets the memory move live slices
//! between its pages (compaction).
//!
//! - [`WgpuStorage`]: one `wgpu::Buffer` per page.
//! - [`BytesStorage`]: host memory with the same contract, for unit tests, property tests
//!   and benchmarks of the allocator alone.

mod bytes;
mod copy;
pub mod wgpu_storage;

pub use bytes::{BytesResource, BytesStorage};
pub use copy::CopyStorage;
pub use cubecl_runtime::storage::{ComputeStorage, StorageHandle, StorageId, StorageUtilization};
pub use wgpu_storage::{WgpuResource, WgpuStorage};
