//! Pages given back, as wgpu's own allocator counts them: a page the budget credits is
//! gone from the device (no cache of ours keeps it alive).

use crate::device::fresh;
use wgpu_memory::memory_management::parse_memory_config;
use wgpu_memory::{Client, Handle, Kernel};

const MIB: u64 = 1 << 20;

/// What wgpu may allocate beside our pages in these tests (its internal buffers): less
/// than the smallest page a test gives back, so a page kept alive shows.
const SLACK: u64 = MIB;

/// wgpu's allocated bytes, once the reclaimer freed what the device is done with;
/// `None` on a backend without an allocator report.
fn allocated(client: &Client) -> Option<u64> {
    client.device_memory().map(|memory| memory.allocated)
}

fn touch() -> Kernel {
    Kernel::new(
        "touch",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(1) fn main() { x[0] = x[0] + 1u; }",
        "main",
    )
}

/// `install_memory_pools` gives the old pools' pages back; the bind groups cached for
/// launches on them must not keep them alive once the budget credits them.
#[test]
fn install_forgets_given_back_pages_in_the_bind_group_cache() {
    let Some(client) = fresh() else { return };
    let Some(base) = allocated(&client) else {
        eprintln!("skipping: this backend has no allocator report");
        return;
    };
    let kernel = touch();
    let handles: Vec<Handle> = (0..3).map(|_| client.empty(8 * MIB).unwrap()).collect();
    for handle in &handles {
        client.launch(&kernel, [1, 1, 1], &[handle]).unwrap();
    }
    client.sync().unwrap();
    assert!(allocated(&client).unwrap() >= 24 * MIB, "three 8 MiB pages");
    drop(handles);
    let pools = parse_memory_config(
        r#"
[memory]
pools = [{ type = "exclusive", max_alloc_size = "64 MiB", dealloc_period = 1000 }]
"#,
    )
    .unwrap()
    .pools
    .unwrap();
    client.install_memory_pools(&pools).unwrap();
    client.sync().unwrap();
    // wgpu's figure first: it waits for the reclaimer, which credits the budget.
    let now = allocated(&client).unwrap();
    let held = client.budget().held;
    assert!(
        now <= base + held + SLACK,
        "after install and sync the budget holds {held} bytes, wgpu {} bytes above the start",
        now.saturating_sub(base)
    );
    assert!(client.uncaptured_errors().is_empty());
}
