//! Failures travel the dataflow, on the real adapter.

use crate::device::{fresh, shared};
use proptest::prelude::*;
use wgpu_memory::{Client, ClientError, Handle, Kernel};

const ADD: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { c[i.x] = a[i.x] + b[i.x]; }
";

/// Declares a fourth binding: launched with three handles, wgpu's validation refuses
/// the bind group.
const ADD_NEEDS_FOUR: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@group(0) @binding(3) var<storage, read_write> d: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { c[i.x] = a[i.x] + b[i.x] + d[0]; }
";

fn add() -> Kernel {
    Kernel::new("add", ADD, "main").writes(&[2])
}

fn broken() -> Kernel {
    Kernel::new("broken add", ADD_NEEDS_FOUR, "main").writes(&[2])
}

fn words(value: u32) -> Vec<u8> {
    [value; 4].iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn unwritten(result: Result<impl std::fmt::Debug, ClientError>) -> String {
    match result {
        Err(ClientError::Unwritten(report)) => report.to_string(),
        other => panic!("expected Unwritten, got {other:?}"),
    }
}

#[test]
fn a_failed_launch_taints_its_output_and_a_reader_is_skipped() {
    let Some(client) = fresh() else { return };
    let (a, b) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
    );
    let (c, d) = (
        client.create(&words(0)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    let refused = client.launch(&broken(), [1, 1, 1], &[&a, &b, &c]);
    assert!(
        matches!(refused, Err(ClientError::Wgpu { .. })),
        "{refused:?}"
    );
    // The reader of c is not dispatched; its output d takes the failure.
    client.launch(&add(), [1, 1, 1], &[&c, &b, &d]).unwrap();
    let report = unwritten(client.read_blocking(&d));
    assert!(
        report.contains("broken add"),
        "names the root launch: {report}"
    );
    assert!(
        report.contains("kernel `add` was skipped"),
        "names the skipped kernel: {report}"
    );
    assert!(report.contains("carried by 2 allocations"), "{report}");
    // Clean inputs stay readable.
    assert_eq!(client.read_blocking(&a).unwrap(), words(1));
    assert!(client.uncaptured_errors().is_empty());
}

#[test]
fn a_partial_write_clears_only_its_bytes_and_a_full_rewrite_clears_all() {
    let Some(client) = shared() else { return };
    let (a, b, c) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    let _ = client.launch(&broken(), [1, 1, 1], &[&a, &b, &c]);
    client.write(&c, 0, &[7; 8]).unwrap();
    unwritten(client.read_blocking(&c));
    client.write(&c, 8, &[9; 8]).unwrap();
    let mut expected = vec![7; 8];
    expected.extend([9; 8]);
    assert_eq!(client.read_blocking(&c).unwrap(), expected);
}

#[test]
fn a_loop_failing_the_same_way_does_not_grow_the_graph() {
    let Some(client) = fresh() else { return };
    let (a, b, c) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    for _ in 0..10 {
        let _ = client.launch(&broken(), [1, 1, 1], &[&a, &b, &c]);
        assert_eq!(client.failures_held(), 1);
    }
    drop((a, b, c));
    client.cleanup();
    assert_eq!(
        client.failures_held(),
        0,
        "with every handle dropped the graph is empty"
    );
}

/// A buffer of the model: its value, or the failure that claims it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Clean(u32),
    Failed(u64),
}

#[derive(Debug, Clone)]
enum Step {
    /// c = a + b, or a launch wgpu refuses when `fail`.
    Add {
        a: usize,
        b: usize,
        c: usize,
        fail: bool,
    },
    /// A full rewrite.
    Write { target: usize, value: u32 },
}

fn step(buffers: usize) -> impl Strategy<Value = Step> {
    let index = 0..buffers;
    prop_oneof![
        4 => (index.clone(), index.clone(), index.clone(), prop::bool::weighted(0.25))
            .prop_filter("three buffers", |(a, b, c, _)| a != b && b != c && a != c)
            .prop_map(|(a, b, c, fail)| Step::Add { a, b, c, fail }),
        1 => (index, 0u32..100).prop_map(|(target, value)| Step::Write { target, value }),
    ]
}

fn failure_of(client: &Client, handle: &Handle) -> u64 {
    match client.read_blocking(handle) {
        Err(ClientError::Unwritten(report)) => report.failure.get(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn apply(client: &Client, handles: &[Handle], model: &mut [State], step: &Step) {
    match *step {
        Step::Write { target, value } => {
            client.write(&handles[target], 0, &words(value)).unwrap();
            model[target] = State::Clean(value);
        }
        Step::Add { a, b, c, fail } => {
            let kernel = if fail { broken() } else { add() };
            let result =
                client.launch(&kernel, [1, 1, 1], &[&handles[a], &handles[b], &handles[c]]);
            model[c] = match (model[a], model[b]) {
                // A claimed input: skipped, the output takes the first input's failure.
                (State::Failed(root), _) | (_, State::Failed(root)) => State::Failed(root),
                _ if fail => {
                    assert!(result.is_err());
                    State::Failed(failure_of(client, &handles[c]))
                }
                (State::Clean(x), State::Clean(y)) => State::Clean(x + y),
            };
        }
    }
}

/// Cases of the property: 256 by default (what CI runs: about 35 ms each on lavapipe,
/// a fresh client per case), `FAILURE_CASES` to change it (an empty or unparsable value
/// keeps the default).
fn cases() -> u32 {
    std::env::var("FAILURE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Every read reports exactly the root failure upstream of it, clean buffers read
    /// their values, and the graph is empty once every handle is dropped.
    #[test]
    fn reads_report_exactly_the_root_failures_upstream(steps in prop::collection::vec(step(5), 1..10)) {
        let Some(client) = fresh() else { return Ok(()) };
        let handles: Vec<Handle> = (0..5).map(|i| client.create(&words(i)).unwrap()).collect();
        let mut model: Vec<State> = (0..5).map(State::Clean).collect();
        for step in &steps {
            apply(&client, &handles, &mut model, step);
        }
        for (handle, state) in handles.iter().zip(&model) {
            match *state {
                State::Clean(value) => prop_assert_eq!(client.read_blocking(handle).unwrap(), words(value)),
                State::Failed(root) => prop_assert_eq!(failure_of(&client, handle), root),
            }
        }
        drop(handles);
        client.cleanup();
        prop_assert_eq!(client.failures_held(), 0);
    }
}

/// `y = x * w` with every binding declared `read_write`, as the README asks.
const SCALE: &str = "
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = x[i.x] * w[i.x]; }
";

/// Issue 24, item 2: a launch wgpu refuses at once (one binding short, so
/// `create_bind_group` fails and `launch` returns `Err`) ran nothing and claims nothing:
/// the weights it named stay clean, and the next, correct launches run.
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
        matches!(refused, Err(ClientError::Wgpu { .. })),
        "{refused:?}"
    );
    assert_eq!(client.failures_held(), 0, "a refused launch claims nothing");
    client.launch(&scale, [1, 1, 1], &[&weights, &x, &y]).unwrap();
    assert_eq!(client.read_blocking(&y).unwrap(), words(6));
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    assert_eq!(client.read_blocking(&x).unwrap(), words(2));
}
