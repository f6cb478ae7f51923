//! Errors a user can act on (issue 12, item 7): a handle given to the wrong client, and a
//! read too big for one staging buffer, each name what happened and the limit.

use crate::device::fresh;
use wgpu_memory::{Client, ClientError};

#[test]
fn a_handle_read_on_another_client_says_so() {
    let (Some(a), Some(b)) = (fresh(), fresh()) else {
        return;
    };
    let handle = a.create(&[1, 2, 3, 4]).unwrap();
    let error = b.read_blocking(&handle).unwrap_err();
    assert!(
        matches!(error, ClientError::ForeignHandle { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("another client"), "{error}");
    let error = b.write(&handle, 0, &[0; 4]).unwrap_err();
    assert!(
        matches!(error, ClientError::ForeignHandle { .. }),
        "{error:?}"
    );
    // The handle still works on its own client.
    assert_eq!(a.read_blocking(&handle).unwrap(), [1, 2, 3, 4]);
}

/// A client over a device whose buffers are at most 1 MiB.
fn small_buffer_client() -> Option<Client> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).ok()?;
    let mut limits = adapter.limits();
    limits.max_buffer_size = 1 << 20;
    limits.max_storage_buffer_binding_size = limits.max_storage_buffer_binding_size.min(1 << 20);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: limits,
        ..Default::default()
    }))
    .ok()?;
    Some(Client::new(device, queue))
}

#[test]
fn a_read_over_the_staging_limit_names_the_limit() {
    if fresh().is_none() {
        return;
    }
    let client = small_buffer_client().expect("an adapter that takes lower limits");
    let parts: Vec<_> = (0..3).map(|_| client.empty(512 << 10).unwrap()).collect();
    let refs: Vec<_> = parts.iter().collect();
    let error = client.read_many_blocking(&refs).unwrap_err();
    let ClientError::ReadTooBig { requested, limit } = error else {
        panic!("expected ReadTooBig, got {error:?}");
    };
    assert_eq!((requested, limit), (3 * (512 << 10), 1 << 20));
    assert!(error_text(requested, limit).contains("staging"));
}

fn error_text(requested: u64, limit: u64) -> String {
    ClientError::ReadTooBig { requested, limit }.to_string()
}

#[test]
fn a_launch_over_a_handle_of_another_client_names_the_kernel_and_records_nothing() {
    let (Some(a), Some(b)) = (fresh(), fresh()) else {
        return;
    };
    const COPY: &str = "
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(1) fn main() { dst[0] = src[0]; }";
    let kernel = wgpu_memory::Kernel::new("copy_word", COPY, "main").writes(&[1]);
    let foreign = a.create(&7u32.to_le_bytes()).unwrap();
    let own = b.create(&1u32.to_le_bytes()).unwrap();
    let error = b.launch(&kernel, [1, 1, 1], &[&foreign, &own]).unwrap_err();
    assert!(
        matches!(error, ClientError::ForeignHandle { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("launch of copy_word"), "{error}");
    // Nothing was dispatched: the output keeps its bytes, and the same launch over the
    // client's own handles runs.
    assert_eq!(b.read_blocking(&own).unwrap(), 1u32.to_le_bytes());
    let source = b.create(&9u32.to_le_bytes()).unwrap();
    b.launch(&kernel, [1, 1, 1], &[&source, &own]).unwrap();
    assert_eq!(b.read_blocking(&own).unwrap(), 9u32.to_le_bytes());
}
