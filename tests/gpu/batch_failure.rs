//! A batch wgpu refuses as a whole (issue 11, Build 3): errors wgpu reports while one
//! operation is encoded stay that operation's; an error reported when the batch is
//! finished claims the outputs of every operation in it.
//!
//! The batch error here: one dispatch binds two slices of one page, one as read-only
//! storage and one as writable storage. Each bind group is valid on its own; the
//! conflict is found only when the encoder is finished, so it fails the whole batch.

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

fn unwritten_message(result: Result<impl std::fmt::Debug, ClientError>) -> String {
    match result {
        Err(ClientError::Unwritten(report)) => report.error,
        other => panic!("expected an Unwritten error, got {other:?}"),
    }
}

#[test]
fn a_refused_batch_claims_the_outputs_of_every_operation_in_it() {
    let Some(client) = fresh() else { return };
    // Nothing is submitted before the flush below.
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let written = client.create(&pattern(256, 1)).unwrap();
    let launched = client.create(&pattern(256, 2)).unwrap();
    client
        .launch(
            &Kernel::new("add one", ADD_ONE, "main"),
            [1, 1, 1],
            &[&launched],
        )
        .unwrap();
    // Two small slices of the default layout share a page.
    let x = client.create(&pattern(256, 3)).unwrap();
    let y = client.empty(256).unwrap();
    let conflicting = Kernel::new("read-only beside writable", READ_ONLY_INPUT, "main");
    client.launch(&conflicting, [1, 1, 1], &[&x, &y]).unwrap();

    let flushed = client.flush();
    let Err(ClientError::Wgpu { message, .. }) = &flushed else {
        panic!("the batch should be refused, got {flushed:?}");
    };
    for (name, handle) in [("written", &written), ("launched", &launched), ("y", &y)] {
        let error = unwritten_message(client.read_blocking(handle));
        assert!(
            error.contains("batch"),
            "{name} should carry the batch's failure, got: {error}"
        );
        assert!(message.contains("batch"), "{message}");
    }
    // A rewrite clears the claim; later batches run normally.
    client.write(&written, 0, &pattern(256, 4)).unwrap();
    assert_eq!(client.read_blocking(&written).unwrap(), pattern(256, 4));
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
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
    // The broken launch claims only its own output; the batch still runs.
    client.flush().unwrap();
    let expected: Vec<u8> = pattern(256, 5)
        .chunks(4)
        .flat_map(|w| (u32::from_le_bytes(w.try_into().unwrap()).wrapping_add(1)).to_le_bytes())
        .collect();
    assert_eq!(client.read_blocking(&good).unwrap(), expected);
    assert!(unwritten_message(client.read_blocking(&bad)).contains("broken"));
}
