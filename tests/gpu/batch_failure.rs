//! Errors in a batch (issue 11, Build 3): errors found while one operation is recorded
//! stay that operation's, and the rest of the batch runs. (A batch wgpu refuses as a
//! whole is tested in `src/client/batch_tests.rs`, which can record an invalid copy.)
//!
//! One such error: a dispatch binding two slices of one page, one as read-only storage
//! and one as writable storage. wgpu would find it only when the encoder is finished
//! and fail the whole batch; the launch is refused alone when it is recorded.

use crate::device::{fresh, pattern};
use crate::kernels::ADD_ONE;
use wgpu_memory::{ClientError, Kernel, SubmitPolicy};

/// Reads `x` (read-only storage), writes `y`.
const READ_ONLY_INPUT: &str = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < min(arrayLength(&x), arrayLength(&y))) { y[id.x] = x[id.x]; }
}
";

#[test]
fn a_read_only_binding_beside_a_writable_one_in_its_page_is_refused_alone() {
    let Some(client) = fresh() else { return };
    // Nothing is submitted before the flush below.
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let written = client.create(&pattern(256, 1)).unwrap();
    let launched = client.create(&pattern(256, 2)).unwrap();
    let add_one = Kernel::new("add one", ADD_ONE, "main");
    client.launch(&add_one, [1, 1, 1], &[&launched]).unwrap();
    // Two small slices of the default layout share a page.
    let x = client.create(&pattern(256, 3)).unwrap();
    let y = client.empty(256).unwrap();
    let conflicting = Kernel::new("read-only beside writable", READ_ONLY_INPUT, "main");
    let error = client
        .launch(&conflicting, [1, 1, 1], &[&x, &y])
        .unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::ReadOnlyAliasesWritable {
                read_only: 0,
                writable: 1,
                ..
            }
        ),
        "{error:?}"
    );
    // The rest of the batch runs; the refused launch never ran, so it claims nothing
    // (issue 18, item 13).
    client.flush().unwrap();
    assert_eq!(client.read_blocking(&written).unwrap(), pattern(256, 1));
    assert_eq!(
        client.read_blocking(&launched).unwrap(),
        plus_one(&pattern(256, 2))
    );
    assert_eq!(client.read_blocking(&x).unwrap(), pattern(256, 3));
    assert!(client.read_blocking(&y).is_ok());
    assert_eq!(client.failures_held(), 0);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

/// Each little-endian `u32` word plus one.
fn plus_one(bytes: &[u8]) -> Vec<u8> {
    bytes
        .chunks(4)
        .flat_map(|w| (u32::from_le_bytes(w.try_into().unwrap()).wrapping_add(1)).to_le_bytes())
        .collect()
}

#[test]
fn an_encoding_error_stays_with_its_own_launch() {
    let Some(client) = fresh() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let good = client.create(&pattern(256, 5)).unwrap();
    client
        .launch(
            &Kernel::new("add one", ADD_ONE, "main"),
            [1, 1, 1],
            &[&good],
        )
        .unwrap();
    let bad = client.empty(256).unwrap();
    let broken = Kernel::new("broken", "this is not wgsl", "main");
    assert!(client.launch(&broken, [1, 1, 1], &[&bad]).is_err());
    // The broken launch ran nothing and claims nothing (issue 24, item 2); the batch
    // still runs.
    client.flush().unwrap();
    assert_eq!(
        client.read_blocking(&good).unwrap(),
        plus_one(&pattern(256, 5))
    );
    assert!(client.read_blocking(&bad).is_ok());
    assert_eq!(client.failures_held(), 0);
}
