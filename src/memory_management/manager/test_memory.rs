//! Host memories for tests: a preset layout over `BytesStorage`, and freeing a slice the
//! way the client does when a handle's last clone goes.

use crate::memory_management::{MemoryManagement, MemoryManagementOptions};
use crate::storage::BytesStorage;
use cubecl_ir::MemoryDeviceProperties;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration};

/// The preset `config` over host memory named `name`, on a device whose largest page is
/// `max_page` bytes and whose storage offsets align to 256 bytes (wgpu's default).
pub(crate) fn host_memory(
    config: MemoryConfiguration,
    max_page: u64,
    name: &str,
) -> MemoryManagement<BytesStorage> {
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(max_page, 256),
        config,
        MemoryManagementOptions::new(name),
    )
}

/// Drops `handle` and frees its slice at once, as the client does when the last clone
/// is dropped; panics when the slice was not freed.
pub(crate) fn free_now(memory: &mut MemoryManagement<BytesStorage>, handle: ManagedMemoryHandle) {
    let (id, location) = (handle.descriptor().id, handle.descriptor().location());
    drop(handle);
    assert!(memory.release(id, location), "the slice is freed");
}
