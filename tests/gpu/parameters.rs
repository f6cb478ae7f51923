//! Small parameters of a kernel (issue 24, item 9): the client's slices are storage
//! buffers only, so parameters go in a small storage buffer, declared `read_write` as
//! every storage binding of a launch is (it may share a page with a writable one); a
//! `var<uniform>` binding is refused with an error, never run on zeros.

use crate::device::fresh;
use wgpu_memory::{ClientError, Kernel};

/// `y[i] = x[i] * p.scale + p.offset` for `i < p.count`: the idiom the README shows.
const SCALE: &str = "
struct Params { scale: u32, offset: u32, count: u32 }
@group(0) @binding(0) var<storage, read_write> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.count) { y[id.x] = x[id.x] * p.scale + p.offset; }
}
";

/// The same kernel with its parameters as a uniform buffer.
const SCALE_UNIFORM: &str = "
struct Params { scale: u32, offset: u32, count: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.count) { y[id.x] = x[id.x] * p.scale + p.offset; }
}
";

fn words(values: &[u32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

#[test]
fn small_parameters_go_in_a_small_storage_binding() {
    let Some(client) = fresh() else { return };
    let params = client.create(&words(&[3, 1, 100])).unwrap();
    let x = client
        .create(&words(&(0..128).collect::<Vec<_>>()))
        .unwrap();
    let y = client.create(&words(&[7; 128])).unwrap();
    let kernel = Kernel::new("scale", SCALE, "main").writes(&[2]);
    client
        .launch(&kernel, [2, 1, 1], &[&params, &x, &y])
        .unwrap();
    let expected: Vec<u32> = (0..128)
        .map(|i| if i < 100 { i * 3 + 1 } else { 7 })
        .collect();
    assert_eq!(client.read_blocking(&y).unwrap()[..], words(&expected)[..]);
    // New parameters are a write of twelve bytes, ordered with the launches.
    client.write(&params, 0, &words(&[2, 0, 128])).unwrap();
    client
        .launch(&kernel, [2, 1, 1], &[&params, &x, &y])
        .unwrap();
    let expected: Vec<u32> = (0..128).map(|i| i * 2).collect();
    assert_eq!(client.read_blocking(&y).unwrap()[..], words(&expected)[..]);
    assert!(client.uncaptured_errors().is_empty());
}

#[test]
fn a_uniform_binding_is_refused_with_an_error_naming_the_usage() {
    let Some(client) = fresh() else { return };
    let params = client.create(&words(&[3, 1, 4])).unwrap();
    let x = client.create(&words(&[1, 2, 3, 4])).unwrap();
    let y = client.create(&words(&[0; 4])).unwrap();
    let kernel = Kernel::new("scale uniform", SCALE_UNIFORM, "main");
    match client.launch(&kernel, [1, 1, 1], &[&params, &x, &y]) {
        Err(error @ ClientError::Wgpu { .. }) => {
            let message = error.to_string();
            assert!(message.contains("UNIFORM"), "{message}");
        }
        other => panic!("expected a wgpu error naming UNIFORM, got {other:?}"),
    }
    assert!(client.uncaptured_errors().is_empty());
}
