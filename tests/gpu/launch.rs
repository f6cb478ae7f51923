//! Launch errors and limits.

use crate::device::shared;
use wgpu_memory::{ClientError, Kernel};

const FILL: &str = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() { out[0] = 7u; }
";

/// More workgroups than the device allows is a typed error naming the limit.
#[test]
fn too_many_workgroups_is_refused() {
    let Some(client) = shared() else { return };
    let out = client.empty(4).unwrap();
    let kernel = Kernel::new("fill", FILL, "main");
    let limit = client
        .device()
        .limits()
        .max_compute_workgroups_per_dimension;
    let error = client
        .launch(&kernel, [limit + 1, 1, 1], &[&out])
        .unwrap_err();
    assert!(
        matches!(error, ClientError::TooManyWorkgroups { limit: l, .. } if l == limit),
        "{error}"
    );
}

/// A shader that does not compile is a typed error with wgpu's message, not a panic.
#[test]
fn broken_shader_is_a_wgpu_error() {
    let Some(client) = shared() else { return };
    let out = client.empty(4).unwrap();
    let kernel = Kernel::new("broken", "fn main( {", "main");
    let error = client.launch(&kernel, [1, 1, 1], &[&out]).unwrap_err();
    assert!(matches!(error, ClientError::Wgpu { .. }), "{error}");
}

/// A launch then a read sees the kernel's write.
#[test]
fn launch_writes_are_read_back() {
    let Some(client) = shared() else { return };
    let out = client.create(&[0; 4]).unwrap();
    client
        .launch(&Kernel::new("fill", FILL, "main"), [1, 1, 1], &[&out])
        .unwrap();
    assert_eq!(client.read_blocking(&out).unwrap(), 7u32.to_le_bytes());
}
