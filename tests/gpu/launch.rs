//! Launch errors and limits.

use crate::device::{fresh, shared};
use wgpu_memory::{ClientError, Kernel, SubmitPolicy};

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

/// A kernel that parses but does not validate is refused by naga, with naga's own
/// message, before wgpu (or, on the web, the browser) is handed the source: the launch
/// claims nothing and the bound handle keeps its bytes.
#[test]
fn a_kernel_that_does_not_validate_is_refused_before_the_device_sees_it() {
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    let Some(client) = shared() else { return };
    let out = client.create(&[9, 8, 7, 6]).unwrap();
    // A store to a read-only binding.
    let source = "
@group(0) @binding(0) var<storage, read> out: array<u32>;
@compute @workgroup_size(1)
fn main() { out[0] = 1u; }
";
    let module = naga::front::wgsl::parse_str(source).unwrap();
    let naga_says = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .unwrap_err()
        .emit_to_string_with_path(source, "invalid");
    let error = client
        .launch(&Kernel::new("invalid", source, "main"), [1, 1, 1], &[&out])
        .unwrap_err();
    match &error {
        ClientError::Wgpu { operation, message } => {
            assert_eq!(operation, "compiling invalid");
            assert_eq!(message, &naga_says, "naga's message, not wgpu's");
        }
        other => panic!("{other}"),
    }
    // A source that does not parse, and an entry point the module lacks, alike.
    let torn = client
        .launch(
            &Kernel::new("torn", "fn main( {", "main"),
            [1, 1, 1],
            &[&out],
        )
        .unwrap_err();
    let parse = naga::front::wgsl::parse_str("fn main( {")
        .unwrap_err()
        .emit_to_string_with_path("fn main( {", "torn");
    assert!(
        matches!(&torn, ClientError::Wgpu { operation, message } if operation == "compiling torn" && message == &parse),
        "{torn}"
    );
    let missing = client
        .launch(&Kernel::new("fill", FILL, "absent"), [1, 1, 1], &[&out])
        .unwrap_err();
    assert!(
        matches!(&missing, ClientError::Wgpu { operation, message } if operation == "compiling fill" && message.contains("no compute entry point named `absent`")),
        "{missing}"
    );
    assert_eq!(client.read_blocking(&out).unwrap(), [9, 8, 7, 6]);
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

/// Two entry points that declare different globals at binding 0 (legal: a binding number
/// must be unique only among the globals one entry point uses). `bump` reads and stores
/// `data` at binding 0 and writes `out` at binding 1; `copy` only reads `source` at
/// binding 0, declared read-only.
const TWO_ENTRY_POINTS: &str = "
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn bump() { data[0] = data[0] + 1u; out[0] = 5u; }
@compute @workgroup_size(1)
fn copy() { out[0] = source[0]; }
";

/// What a launch may bind comes from the launched entry point alone: another entry
/// point's read-only global at the same binding number does not make `bump`'s writable
/// binding read-only, so two slices of one page bound to it and to `out` are a valid
/// launch, and it runs.
#[test]
fn another_entry_points_read_only_global_does_not_refuse_a_launch() {
    let Some(client) = fresh() else { return };
    let data = client.create(&10u32.to_le_bytes()).unwrap();
    let out = client.create(&0u32.to_le_bytes()).unwrap();
    assert_eq!(
        client.resource(&data).unwrap().buffer,
        client.resource(&out).unwrap().buffer,
        "the test needs two slices of one page"
    );
    let bump = Kernel::new("bump", TWO_ENTRY_POINTS, "bump");
    client.launch(&bump, [1, 1, 1], &[&data, &out]).unwrap();
    assert_eq!(client.read_blocking(&data).unwrap(), 11u32.to_le_bytes());
    assert_eq!(client.read_blocking(&out).unwrap(), 5u32.to_le_bytes());
    // The other entry point's binding 0 is read-only: bound beside a writable binding in
    // the same page, that launch is refused alone.
    let copy = Kernel::new("copy", TWO_ENTRY_POINTS, "copy");
    let refused = client.launch(&copy, [1, 1, 1], &[&data, &out]);
    assert!(
        matches!(
            refused,
            Err(ClientError::ReadOnlyAliasesWritable {
                read_only: 0,
                writable: 1,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(client.uncaptured_errors().is_empty());
}

/// Stores to `@group(1)`, which a launch does not bind.
const SECOND_GROUP: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(1) @binding(0) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(1)
fn main() { a[0] = 1u; b[0] = 2u; }
";

/// A kernel that uses a group other than 0 is refused at `launch` with a typed error
/// naming the group and binding (never `Ok` and then a batch that fails as a whole at
/// submit), and the rest of its batch runs.
#[test]
fn a_kernel_using_another_group_is_refused_at_launch() {
    let Some(client) = fresh() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let unrelated = client.create(&[1, 2, 3, 4]).unwrap();
    let a = client.create(&9u32.to_le_bytes()).unwrap();
    let kernel = Kernel::new("second group", SECOND_GROUP, "main");
    let refused = client.launch(&kernel, [1, 1, 1], &[&a]);
    match &refused {
        Err(
            error @ ClientError::UnsupportedGroup {
                group: 1,
                binding: 0,
                ..
            },
        ) => {
            let message = error.to_string();
            assert!(
                message.contains("@group(0)") && message.contains("Client::resource"),
                "{message}"
            );
        }
        other => panic!("expected UnsupportedGroup, got {other:?}"),
    }
    client.flush().unwrap();
    assert_eq!(client.read_blocking(&unrelated).unwrap(), [1, 2, 3, 4]);
    assert_eq!(client.read_blocking(&a).unwrap(), 9u32.to_le_bytes());
    assert_eq!(client.failures_held(), 0);
    assert!(client.uncaptured_errors().is_empty());
}

/// Uses bindings 0 to 2.
const THIRD_BINDING: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(1)
fn main() { c[0] = a[0] + b[0]; }
";

/// A binding the entry point uses past the handles given is a typed error naming the
/// binding and the count, and the launch claims nothing.
#[test]
fn a_binding_past_the_handles_given_is_refused() {
    let Some(client) = fresh() else { return };
    let a = client.create(&3u32.to_le_bytes()).unwrap();
    let b = client.create(&4u32.to_le_bytes()).unwrap();
    let kernel = Kernel::new("third binding", THIRD_BINDING, "main");
    let refused = client.launch(&kernel, [1, 1, 1], &[&a, &b]);
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
    assert_eq!(client.failures_held(), 0);
    assert_eq!(client.read_blocking(&b).unwrap(), 4u32.to_le_bytes());
}
