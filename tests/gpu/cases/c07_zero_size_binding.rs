//! C07: zero-size allocations bind as a real range, read as nothing, and cost nothing.

use crate::device::fresh;
use wgpu_memory::Kernel;

const TOUCHES_NOTHING: &str = "
@group(0) @binding(0) var<storage, read_write> unused: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() {
    // Mentions `unused` so the binding stays in the layout, without reading it.
    if (arrayLength(&unused) == 123456u) { out[1] = 1u; }
    out[0] = 42u;
}
";

#[test]
fn c07_zero_size_binding() {
    let Some(client) = fresh() else { return };
    let empty = client.empty(0).unwrap();
    let out = client.create(&[0; 8]).unwrap();

    let resource = client.resource(&empty).unwrap();
    assert_eq!(resource.size, 0);
    assert!(resource.binding_size() >= 4);
    assert!(resource.offset + resource.binding_size() <= resource.buffer.size());

    let kernel = Kernel::new("touches nothing", TOUCHES_NOTHING, "main");
    client.launch(&kernel, [1, 1, 1], &[&empty, &out]).unwrap();
    assert_eq!(
        &client.read_blocking(&out).unwrap()[..4],
        &42u32.to_le_bytes()
    );
    assert_eq!(client.read_blocking(&empty).unwrap(), Vec::<u8>::new());

    drop(resource);
    let before = client.memory_report().usage();
    for _ in 0..1000 {
        drop(client.empty(0).unwrap());
    }
    let after = client.memory_report().usage();
    assert_eq!(after.bytes_in_use, before.bytes_in_use);
    assert_eq!(after.bytes_reserved, before.bytes_reserved);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
