//! A batch wgpu refuses as a whole claims the outputs of every operation in it (issue
//! 11, Build 3). The refusal is made with a copy whose source and destination overlap in
//! one buffer: wgpu finds it only when the batch's encoder is finished.

use super::{Client, ClientError, Kernel, SubmitPolicy};

const ADD_ONE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}
";

fn client() -> Option<Client> {
    match Client::open_default() {
        Ok(client) => Some(client),
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(_) => None,
    }
}

fn claim_of(client: &Client, handle: &super::Handle) -> String {
    match client.read_blocking(handle) {
        Err(ClientError::Unwritten(report)) => report.error,
        other => panic!("expected the batch's failure, got {other:?}"),
    }
}

#[test]
fn a_refused_batch_claims_the_outputs_of_every_operation_in_it() {
    let Some(client) = client() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let written = client.create(&[7; 256]).unwrap();
    let launched = client.create(&[1; 256]).unwrap();
    let add_one = Kernel::new("add one", ADD_ONE, "main");
    client.launch(&add_one, [1, 1, 1], &[&launched]).unwrap();
    let spare = client.create(&[0; 64]).unwrap();
    client
        .shared
        .server
        .lock()
        .record_overlapping_copy(&spare)
        .unwrap();

    let Err(ClientError::Wgpu { message, .. }) = client.flush() else {
        panic!("the batch should be refused");
    };
    assert!(message.contains("batch"), "{message}");
    for handle in [&written, &launched] {
        assert!(claim_of(&client, handle).contains("batch"));
    }
    // The next batch runs; a rewrite clears the claim.
    client.write(&written, 0, &[9; 256]).unwrap();
    assert_eq!(client.read_blocking(&written).unwrap(), [9; 256]);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
