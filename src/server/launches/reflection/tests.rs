//! What naga tells of a kernel's bindings.

use super::*;

const SOURCE: &str = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read> z: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = x[0] + z[0]; }
";

fn written(source: &str, entry_point: &str) -> Option<Vec<u32>> {
    binding_use(source, entry_point, "k").written
}

#[test]
fn read_only_storage_bindings_are_found() {
    assert_eq!(binding_use(SOURCE, "main", "k").read_only, vec![0, 2]);
    let torn = binding_use("not wgsl", "main", "k");
    assert!(torn.refused.is_some());
    assert_eq!(
        torn,
        BindingUse {
            refused: torn.refused.clone(),
            ..BindingUse::default()
        }
    );
}

/// naga's verdict, with the kernel's label where its message names the source: a
/// source that does not parse, one that does not validate, and one without the
/// launched compute entry point are refused; a valid one is not.
#[test]
fn naga_refuses_what_does_not_compile() {
    assert_eq!(binding_use(SOURCE, "main", "k").refused, None);
    let torn = binding_use("fn main( {", "main", "torn").refused.unwrap();
    assert!(torn.contains("torn:1:"), "{torn}");
    let store_to_read_only = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@compute @workgroup_size(1) fn main() { x[0] = 1u; }";
    let invalid = binding_use(store_to_read_only, "main", "bad")
        .refused
        .unwrap();
    assert!(
        invalid.contains("bad:3:") && invalid.contains("is invalid"),
        "{invalid}"
    );
    let missing = binding_use(SOURCE, "absent", "k").refused.unwrap();
    assert_eq!(
        missing,
        "the module has no compute entry point named `absent`"
    );
}

#[test]
fn a_read_write_binding_only_read_is_not_written() {
    let source = "
@group(0) @binding(0) var<storage, read_write> w: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(4) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
    y[i.x] = w[i.x] * x[i.x];
}";
    assert_eq!(written(source, "main"), Some(vec![2]));
    let usage = binding_use(source, "main", "k");
    assert!(!usage.may_write(0) && !usage.may_write(1) && usage.may_write(2));
}

#[test]
fn stores_through_pointers_fields_and_atomics_are_writes() {
    let source = "
struct Out { count: atomic<u32>, values: array<u32> }
@group(0) @binding(0) var<storage, read_write> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(2) var<storage, read_write> out: Out;
@group(0) @binding(3) var<storage, read_write> via_pointer: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> loaded_atomic: atomic<u32>;
@compute @workgroup_size(1) fn main() {
    atomicAdd(&counter, input[0]);
    out.values[1] = atomicLoad(&loaded_atomic);
    let p = &via_pointer[2];
    (*p).y = 3u;
}";
    // An atomic load alone is a read; every other access here stores.
    assert_eq!(written(source, "main"), Some(vec![1, 2, 3]));
}

#[test]
fn what_a_called_function_stores_counts_for_the_entry_point() {
    let source = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
fn deepest(i: u32) { c[i] = a[i]; }
fn helper(i: u32) { deepest(i); }
@compute @workgroup_size(1) fn main() { helper(b[0]); }
@compute @workgroup_size(1) fn other() { b[0] = 1u; }
";
    assert_eq!(written(source, "main"), Some(vec![2]));
    assert_eq!(written(source, "other"), Some(vec![1]));
}

#[test]
fn an_unanalysable_source_counts_every_binding_as_written() {
    // Validates not (a store to a read-only binding): every binding but the read-only
    // one may be written.
    let invalid = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { x[0] = 1u; }";
    let usage = binding_use(invalid, "main", "k");
    assert_eq!(usage.written, None);
    assert!(!usage.may_write(0) && usage.may_write(1) && usage.may_write(7));
    // No such entry point.
    assert_eq!(written(SOURCE, "missing"), None);
    assert!(binding_use("not wgsl", "main", "k").may_write(0));
}

#[test]
fn other_groups_and_uniforms_are_not_bindings_of_the_launch() {
    let source = "
@group(0) @binding(0) var<uniform> scale: vec4<u32>;
@group(1) @binding(0) var<storage, read_write> elsewhere: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = scale.x; elsewhere[0] = 1u; }";
    assert_eq!(written(source, "main"), Some(vec![1]));
    let usage = binding_use(source, "main", "k");
    assert_eq!(usage.other_group, Some((1, 0)));
    assert_eq!(usage.last_binding, Some(1));
}

/// Two entry points declaring different globals at binding 0: each launch sees only
/// the globals its own entry point uses.
const SHARED_NUMBER: &str = "
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(2) @binding(5) var<storage, read_write> far: array<u32>;
@group(1) @binding(7) var<storage, read_write> near: array<u32>;
fn touch_far() { far[0] = 1u; }
@compute @workgroup_size(1) fn bump() { data[0] = data[0] + 1u; }
@compute @workgroup_size(1) fn copy() { out[0] = source[0]; }
@compute @workgroup_size(1) fn elsewhere() { touch_far(); near[0] = 2u; }
";

#[test]
fn a_binding_number_shared_by_two_entry_points_is_the_launched_ones() {
    let bump = binding_use(SHARED_NUMBER, "bump", "k");
    assert_eq!(bump.read_only, Vec::<u32>::new());
    assert_eq!(bump.written, Some(vec![0]));
    assert!(bump.may_write(0));
    assert_eq!(bump.last_binding, Some(0), "binding 1 is copy's alone");
    assert_eq!(bump.other_group, None);
    let copy = binding_use(SHARED_NUMBER, "copy", "k");
    assert_eq!(copy.read_only, vec![0]);
    assert_eq!(copy.written, Some(vec![1]));
    assert_eq!(copy.last_binding, Some(1));
    // Through a called function too; the lowest group is named.
    let elsewhere = binding_use(SHARED_NUMBER, "elsewhere", "k");
    assert_eq!(elsewhere.other_group, Some((1, 7)));
    assert_eq!(elsewhere.last_binding, None);
}

#[test]
fn without_the_entry_point_a_shared_number_is_never_read_only() {
    // No such entry point: binding 0 may be either global, so it is not read-only, and
    // every binding counts as written.
    let usage = binding_use(SHARED_NUMBER, "missing", "k");
    assert_eq!(usage.read_only, Vec::<u32>::new());
    assert!(usage.may_write(0) && usage.may_write(1));
    assert_eq!((usage.last_binding, usage.other_group), (None, None));
    // A number only read-only globals declare stays read-only.
    assert_eq!(binding_use(SOURCE, "missing", "k").read_only, vec![0, 2]);
}

#[test]
fn a_read_only_binding_in_a_writable_bindings_buffer_is_found() {
    assert_eq!(
        aliased_read_only(&[0, 2], &["a", "a", "b"], |b| b),
        Some((0, 1))
    );
    // Two read-only bindings may share a buffer.
    assert_eq!(aliased_read_only(&[0, 2], &["a", "b", "a"], |b| b), None);
    assert_eq!(aliased_read_only(&[], &["a", "a"], |b| b), None);
}
