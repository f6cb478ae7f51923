//! A launch wgpu refuses at once ran nothing and claims nothing (issue 24, item 2).
//!
//! Failures that claim bytes (a batch wgpu refuses as a whole) and their travel through
//! the dataflow are tested in `src/client/failure_tests.rs`, which can record such a
//! batch; the public API cannot.

use crate::device::fresh;
use wgpu_memory::{ClientError, Kernel};

/// Declares its fourth binding a uniform: the client's pages have no `UNIFORM` usage, so
/// wgpu's validation refuses the bind group.
const ADD_UNIFORM: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@group(0) @binding(3) var<uniform> d: vec4<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { c[i.x] = a[i.x] + b[i.x] + d.x; }
";

fn words(value: u32) -> Vec<u8> {
    [value; 4].iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The output of a launch refused at once keeps its bytes, whether the kernel names its
/// outputs or they come from its source, and a loop of such launches holds no failure.
#[test]
fn a_launch_refused_at_once_leaves_its_output_as_it_was() {
    let Some(client) = fresh() else { return };
    let (a, b, c, d) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
        client.create(&words(9)).unwrap(),
        client.create(&words(4)).unwrap(),
    );
    let named = Kernel::new("broken add", ADD_UNIFORM, "main").writes(&[2]);
    let from_source = Kernel::new("broken add", ADD_UNIFORM, "main");
    for kernel in [&named, &from_source].repeat(5) {
        let refused = client.launch(kernel, [1, 1, 1], &[&a, &b, &c, &d]);
        assert!(
            matches!(refused, Err(ClientError::Wgpu { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(client.failures_held(), 0);
    for (handle, value) in [(&a, 1), (&b, 2), (&c, 9)] {
        assert_eq!(client.read_blocking(handle).unwrap(), words(value));
    }
    assert!(client.uncaptured_errors().is_empty());
}

/// `y = x * w` with every binding declared `read_write`, as the README asks.
const SCALE: &str = "
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = x[i.x] * w[i.x]; }
";

/// Issue 24, item 2: a launch refused at once (one binding short, which the client finds
/// in the entry point's bindings before wgpu would refuse the bind group) ran nothing and
/// claims nothing: the weights it named stay clean, and the next, correct launches run.
#[test]
fn a_launch_refused_at_once_claims_nothing_and_later_launches_run() {
    let Some(client) = fresh() else { return };
    let weights = client.create(&words(3)).unwrap();
    let x = client.create(&words(2)).unwrap();
    let y = client.create(&words(0)).unwrap();
    let scale = Kernel::new("scale", SCALE, "main");
    // One binding short.
    let refused = client.launch(&scale, [1, 1, 1], &[&weights, &x]);
    assert!(
        matches!(
            refused,
            Err(ClientError::MissingBinding {
                binding: 2,
                given: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(client.failures_held(), 0, "a refused launch claims nothing");
    client
        .launch(&scale, [1, 1, 1], &[&weights, &x, &y])
        .unwrap();
    assert_eq!(client.read_blocking(&y).unwrap(), words(6));
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    assert_eq!(client.read_blocking(&x).unwrap(), words(2));
}
