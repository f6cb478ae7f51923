//! Failures travel the dataflow, on the real adapter (issue 11; issue 24, item 3), with
//! a batch wgpu refuses as a whole as the root failure. Since a launch that returns an
//! error claims nothing (issue 24, item 2; `tests/gpu/failures.rs`), the failures that
//! claim bytes are those wgpu finds after the work was recorded: a batch refused when its
//! encoder is finished. The refusal is made here with a copy whose source and
//! destination overlap in one buffer, which only the crate's tests can record.

use super::{Client, ClientError, Handle, Kernel, SubmitPolicy};
use proptest::prelude::*;

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
    client
        .launch(&scale, [1, 1, 1], &[&weights, &x, &y])
        .unwrap();
    let report = unwritten(client.read_blocking(&y));
    assert!(report.contains("kernel `scale` was skipped"), "{report}");
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    // The weights feed the next launch, which runs.
    let fresh = client.create(&words(5)).unwrap();
    let z = client.create(&words(0)).unwrap();
    client
        .launch(&scale, [1, 1, 1], &[&weights, &fresh, &z])
        .unwrap();
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
        client
            .launch(&scale, [1, 1, 1], &[&weights, &x, &y])
            .unwrap()
    });
    unwritten(client.read_blocking(&y));
    assert_eq!(client.read_blocking(&weights).unwrap(), words(3));
    assert_eq!(client.read_blocking(&x).unwrap(), words(2));
}

const ADD: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { c[i.x] = a[i.x] + b[i.x]; }
";

/// `c = a + b`; `c` is written whole without being read.
fn add() -> Kernel {
    Kernel::new("add", ADD, "main").writes(&[2])
}

#[test]
fn a_failed_launch_claims_its_output_and_a_reader_is_skipped() {
    let Some(client) = client() else { return };
    let (a, b) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
    );
    let (c, d) = (
        client.create(&words(0)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    in_a_refused_batch(&client, || {
        client.launch(&add(), [1, 1, 1], &[&a, &b, &c]).unwrap()
    });
    // The reader of c is not dispatched; its output d takes the failure.
    client.launch(&add(), [1, 1, 1], &[&c, &b, &d]).unwrap();
    let report = unwritten(client.read_blocking(&d));
    assert!(
        report.contains("a batch of recorded work failed"),
        "names the root failure: {report}"
    );
    assert!(
        report.contains("kernel `add` was skipped"),
        "names the skipped kernel: {report}"
    );
    // c, d, and the spare handle the refused batch also wrote.
    assert!(report.contains("carried by 3 allocations"), "{report}");
    // Clean inputs stay readable.
    assert_eq!(client.read_blocking(&a).unwrap(), words(1));
    assert!(client.uncaptured_errors().is_empty());
}

#[test]
fn a_partial_write_clears_only_its_bytes_and_a_full_rewrite_clears_all() {
    let Some(client) = client() else { return };
    let (a, b, c) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    in_a_refused_batch(&client, || {
        client.launch(&add(), [1, 1, 1], &[&a, &b, &c]).unwrap()
    });
    client.write(&c, 0, &[7; 8]).unwrap();
    unwritten(client.read_blocking(&c));
    client.write(&c, 8, &[9; 8]).unwrap();
    let mut expected = vec![7; 8];
    expected.extend([9; 8]);
    assert_eq!(client.read_blocking(&c).unwrap(), expected);
}

#[test]
fn a_loop_failing_the_same_way_does_not_grow_the_graph() {
    let Some(client) = client() else { return };
    let (a, b, c) = (
        client.create(&words(1)).unwrap(),
        client.create(&words(2)).unwrap(),
        client.create(&words(0)).unwrap(),
    );
    for _ in 0..10 {
        in_a_refused_batch(&client, || {
            client.launch(&add(), [1, 1, 1], &[&a, &b, &c]).unwrap()
        });
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

/// Two entry points declaring different globals at binding 0 (legal: a binding number
/// must be unique only among the globals one entry point uses): `bump` stores to `data`,
/// `copy` reads `source`, declared read-only.
const TWO_ENTRY_POINTS: &str = "
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(4)
fn bump(@builtin(global_invocation_id) i: vec3<u32>) { data[i.x] = data[i.x] + 1u; }
@compute @workgroup_size(4)
fn copy(@builtin(global_invocation_id) i: vec3<u32>) { out[i.x] = source[i.x]; }
";

/// What a refused batch claims comes from the launched entry point alone: `bump` stores
/// to its binding 0, so a failure of its batch claims it, although another entry point
/// declares a read-only global at binding 0.
#[test]
fn a_refused_batch_claims_what_the_launched_entry_point_stores_to() {
    let Some(client) = client() else { return };
    let data = client.create(&words(10)).unwrap();
    let bump = Kernel::new("bump", TWO_ENTRY_POINTS, "bump");
    in_a_refused_batch(&client, || {
        client.launch(&bump, [1, 1, 1], &[&data]).unwrap()
    });
    unwritten(client.read_blocking(&data));
}

/// Stores to `@group(1)`, which a launch does not bind.
const SECOND_GROUP: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(1) @binding(0) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { b[i.x] = a[i.x]; }
";

/// Every check a launch can fail runs before a claimed input skips it: a launch over an
/// input that carries a failure is refused as it would be over a clean one (a kernel
/// that does not compile, a missing entry point, a binding outside `@group(0)`, one
/// binding short, a read-only binding beside a writable one in its page), and a launch
/// that returns `Err` claims nothing, its outputs and its clean inputs alike.
#[test]
fn a_launch_over_a_failed_input_is_checked_before_it_is_skipped() {
    let Some(client) = client() else { return };
    let x = client.create(&words(2)).unwrap();
    in_a_refused_batch(&client, || client.write(&x, 0, &words(3)).unwrap());
    unwritten(client.read_blocking(&x));
    let held = client.failures_held();
    let y = client.create(&words(0)).unwrap();
    let w = client.create(&words(4)).unwrap();
    let refusals: [(Kernel, Vec<&Handle>); 5] = [
        (Kernel::new("broken", "fn main( {", "main"), vec![&x, &y]),
        (
            Kernel::new("no such entry", SCALE, "missing"),
            vec![&w, &x, &y],
        ),
        (Kernel::new("second group", SECOND_GROUP, "main"), vec![&x]),
        (Kernel::new("one short", SCALE, "main"), vec![&w, &x]),
        (
            Kernel::new("copy", TWO_ENTRY_POINTS, "copy"),
            // x and y share a page: a read-only binding beside a writable one.
            vec![&x, &y],
        ),
    ];
    let page = |handle: &Handle| client.resource(handle).unwrap().buffer;
    assert_eq!(page(&x), page(&y), "the last case needs one page");
    for (kernel, handles) in &refusals {
        let refused = client.launch(kernel, [1, 1, 1], handles);
        let expected = match kernel.label() {
            "second group" => matches!(refused, Err(ClientError::UnsupportedGroup { .. })),
            "one short" => matches!(refused, Err(ClientError::MissingBinding { .. })),
            "copy" => matches!(refused, Err(ClientError::ReadOnlyAliasesWritable { .. })),
            _ => matches!(refused, Err(ClientError::Wgpu { .. })),
        };
        assert!(expected, "{}: {refused:?}", kernel.label());
        assert_eq!(client.failures_held(), held, "{}", kernel.label());
        assert_eq!(client.read_blocking(&y).unwrap(), words(0));
        assert_eq!(client.read_blocking(&w).unwrap(), words(4));
    }
    client.flush().unwrap();
    assert!(client.uncaptured_errors().is_empty());
}

/// A buffer of the model: its value, or the failure that claims it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Clean(u32),
    Failed(u64),
}

#[derive(Debug, Clone)]
enum Step {
    /// c = a + b, in a batch wgpu refuses when `fail`.
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
            let launch = || {
                let bindings = [&handles[a], &handles[b], &handles[c]];
                client.launch(&add(), [1, 1, 1], &bindings).unwrap();
            };
            if fail {
                in_a_refused_batch(client, launch);
            } else {
                launch();
            }
            model[c] = match (model[a], model[b]) {
                // A claimed input: skipped, the output takes the first input's failure.
                (State::Failed(root), _) | (_, State::Failed(root)) => State::Failed(root),
                _ if fail => State::Failed(failure_of(client, &handles[c])),
                (State::Clean(x), State::Clean(y)) => State::Clean(x + y),
            };
        }
    }
}

/// Cases of the property: 256 by default (what CI runs; a fresh client per case),
/// `FAILURE_CASES` to change it (an empty or unparsable value keeps the default).
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
        let Some(client) = client() else { return Ok(()) };
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
