//! Failures travel the dataflow (issue 11; issue 24, items 2 and 3), with a batch wgpu
//! refuses as a whole as the root failure. A launch that returns an error claims
//! nothing, so the only failures that claim bytes are those wgpu finds after the
//! operation was recorded: a batch refused when its encoder is finished. The refusal is
//! made with a copy whose source and destination overlap in one buffer.

use super::{Client, ClientError, Handle, Kernel, SubmitPolicy};

/// `y = x * w`, every binding declared `read_write` (as the README asks): only `y` is
/// written.
const SCALE: &str = "
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = x[i.x] * w[i.x]; }
";

pub(super) fn client() -> Option<Client> {
    match Client::open_default() {
        Ok(client) => {
            // Nothing is submitted until a flush: each test chooses its batches.
            client.set_submit_policy(SubmitPolicy {
                max_dispatches: u32::MAX,
                max_bytes: u64::MAX,
            });
            Some(client)
        }
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(_) => None,
    }
}

fn words(value: u32) -> Vec<u8> {
    [value; 4].iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Submits what is recorded so far (it runs), then records `work` and a refused copy in
/// one batch and submits it: what `work` wrote is claimed by that batch's failure.
pub(super) fn in_a_refused_batch(client: &Client, work: impl FnOnce()) {
    client.flush().unwrap();
    work();
    let spare = client.create(&[0; 64]).unwrap();
    client
        .shared
        .server
        .lock()
        .record_overlapping_copy(&spare)
        .unwrap();
    assert!(
        matches!(client.flush(), Err(ClientError::Wgpu { .. })),
        "the batch should be refused"
    );
}

pub(super) fn unwritten(result: Result<impl std::fmt::Debug, ClientError>) -> String {
    match result {
        Err(ClientError::Unwritten(report)) => report.to_string(),
        other => panic!("expected Unwritten, got {other:?}"),
    }
}

/// Item 3: a launch skipped because an input carries a failure claims what its kernel
/// writes, not every binding it names: the weights it only reads stay clean.
#[test]
fn a_skipped_launch_claims_only_what_its_kernel_writes() {
    let Some(client) = client() else { return };
    let weights = client.create(&words(3)).unwrap();
    let x = client.create(&words(0)).unwrap();
    let y = client.create(&words(0)).unwrap();
    in_a_refused_batch(&client, || client.write(&x, 0, &words(2)).unwrap());
    unwritten(client.read_blocking(&x));
    let scale = Kernel::new("scale", SCALE, "main");
    client.launch(&scale, [1, 1, 1], &[&weights, &x, &y]).unwrap();
    let report = unwritten(client.read_blocking(&y));
    assert!(report.contains("kernel `scale` was skipped"), "{report}");
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    // The weights feed the next launch, which runs.
    let fresh = client.create(&words(5)).unwrap();
    let z = client.create(&words(0)).unwrap();
    client.launch(&scale, [1, 1, 1], &[&weights, &fresh, &z]).unwrap();
    assert_eq!(client.read_blocking(&z).unwrap(), words(15));
    assert_eq!(client.read_blocking(&fresh).unwrap(), words(5));
}

/// Item 3: a batch refused as a whole claims what its launches write, not what they
/// only read.
#[test]
fn a_refused_batch_claims_only_what_its_launches_write() {
    let Some(client) = client() else { return };
    let weights = client.create(&words(3)).unwrap();
    let x = client.create(&words(2)).unwrap();
    let y = client.create(&words(0)).unwrap();
    let scale = Kernel::new("scale", SCALE, "main");
    in_a_refused_batch(&client, || {
        client.launch(&scale, [1, 1, 1], &[&weights, &x, &y]).unwrap()
    });
    unwritten(client.read_blocking(&y));
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    assert_eq!(client.read_blocking(&x).unwrap(), words(2));
}

#[allow(dead_code)]
fn _uses(_: &Handle) {}
