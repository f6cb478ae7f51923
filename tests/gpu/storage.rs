//! WgpuStorage alone: limits, exact byte counts, deferred deallocation.

use crate::device::shared;
use cubecl_runtime::server::IoError;
use wgpu_memory::storage::{ComputeStorage, WgpuStorage};

#[test]
fn wgpu_storage_counts_bytes_and_defers_deallocation() {
    let Some(client) = shared() else { return };
    let mut storage = WgpuStorage::new(
        client.device().clone(),
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        256,
    );
    let a = storage.alloc(1000).unwrap();
    let b = storage.alloc(3).unwrap();
    // Real buffer sizes: rounded up to COPY_BUFFER_ALIGNMENT.
    assert_eq!(storage.bytes_allocated(), 1000 + 4);
    assert_eq!(storage.get(&b).unwrap().buffer.size(), 4);
    storage.dealloc(a.id);
    assert_eq!(
        storage.bytes_allocated(),
        1004,
        "a deallocation waits for flush"
    );
    storage.flush();
    assert_eq!(storage.bytes_allocated(), 4);
    assert!(matches!(
        storage.get(&a),
        Err(IoError::StorageHandleNotFound { .. })
    ));
}

#[test]
fn wgpu_storage_refuses_pages_over_max_buffer_size() {
    let Some(client) = shared() else { return };
    let mut storage = WgpuStorage::new(client.device().clone(), wgpu::BufferUsages::STORAGE, 256);
    let over = storage.max_buffer_size() + 1;
    match storage.alloc(over) {
        Err(IoError::BufferTooBig { size, .. }) => assert_eq!(size, over),
        other => panic!("expected BufferTooBig, got {other:?}"),
    }
    assert_eq!(storage.bytes_allocated(), 0);
}
