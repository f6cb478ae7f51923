//! Adapter limits as the plain numbers the pools are built from.

use cubecl_ir::MemoryDeviceProperties;

/// The smallest alignment any buffer copy or write needs (`wgpu::COPY_BUFFER_ALIGNMENT`,
/// 4 bytes).
pub const COPY_ALIGNMENT: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// The memory properties of a storage-buffer memory on a device with `limits`:
///
/// - largest page = `min(max_storage_buffer_binding_size, max_buffer_size)`: a page must
///   be one buffer, and every slice of it must be bindable as a storage buffer;
/// - alignment = `min_storage_buffer_offset_alignment` (at least
///   [`COPY_ALIGNMENT`]): every slice starts where a storage binding may start.
pub fn storage_memory_properties(limits: &wgpu::Limits) -> MemoryDeviceProperties {
    MemoryDeviceProperties::new(
        limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size),
        (limits.min_storage_buffer_offset_alignment as u64).max(COPY_ALIGNMENT),
    )
}

/// The memory properties of a staging (MAP_READ) memory: pages up to `max_buffer_size`,
/// slices aligned to `wgpu::MAP_ALIGNMENT` (8 bytes), the granule `map_async` needs.
pub fn staging_memory_properties(limits: &wgpu::Limits) -> MemoryDeviceProperties {
    MemoryDeviceProperties::new(limits.max_buffer_size, wgpu::MAP_ALIGNMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default WebGPU limits: 128 MiB storage bindings, 256 MiB buffers, 256-byte
    /// storage offsets.
    #[test]
    fn default_limits() {
        let properties = storage_memory_properties(&wgpu::Limits::default());
        assert_eq!(properties.max_page_size, 128 << 20);
        assert_eq!(properties.alignment, 256);
    }
}
