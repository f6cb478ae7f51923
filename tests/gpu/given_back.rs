//! Pages given back, as wgpu's own allocator counts them: a page the budget credits is
//! gone from the device (no cache of ours keeps it alive), and a pool that gives pages
//! back before it grows frees them at the device first when no work in flight uses
//! them; when some may, the budget counts both.

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

/// A pool that grows after giving a free page back, with no work in flight on that
/// page, frees it at the device before it makes the new one: the device never holds
/// both, and the budget holds only the new page.
#[test]
fn a_grow_after_a_give_back_frees_the_old_page_first() {
    let Some(client) = fresh() else { return };
    let Some(base) = allocated(&client) else {
        eprintln!("skipping: this backend has no allocator report");
        return;
    };
    let kernel = touch();
    let small = client.empty(2 * MIB).unwrap();
    client.launch(&kernel, [1, 1, 1], &[&small]).unwrap();
    client.sync().unwrap();
    assert!(allocated(&client).unwrap() >= 2 * MIB, "a 2 MiB page");
    drop(small);
    // The shared band has only a free 2 MiB page: it gives it back, then makes 4 MiB.
    let large = client.empty(4 * MIB).unwrap();
    let now = allocated(&client).unwrap();
    let held = client.budget().held;
    assert!(
        now <= base + 4 * MIB + SLACK,
        "wgpu holds {} bytes above the start for one 4 MiB page (budget: {held})",
        now.saturating_sub(base)
    );
    assert!(held <= 4 * MIB, "the budget still holds {held} bytes");
    let report = client.memory_report();
    assert_eq!(report.streams[0].pools.usage().bytes_reserved, 4 * MIB);
    // The new page works.
    client.launch(&kernel, [1, 1, 1], &[&large]).unwrap();
    client.sync().unwrap();
    assert!(client.uncaptured_errors().is_empty());
}

/// When the page given back may still be used by recorded work (a launch on it not
/// submitted yet), it cannot be freed first: the device holds both until that work is
/// done, and the budget counts both meanwhile (never less than the device holds).
#[test]
fn a_grow_after_a_give_back_under_recorded_work_counts_both() {
    let Some(client) = fresh() else { return };
    let Some(base) = allocated(&client) else {
        eprintln!("skipping: this backend has no allocator report");
        return;
    };
    let kernel = touch();
    let small = client.empty(2 * MIB).unwrap();
    client.launch(&kernel, [1, 1, 1], &[&small]).unwrap();
    drop(small);
    let large = client.empty(4 * MIB).unwrap();
    let now = allocated(&client).unwrap();
    let held = client.budget().held;
    assert_eq!(
        held,
        6 * MIB,
        "the old page is held until the launch on it is done"
    );
    assert!(
        held + SLACK >= now.saturating_sub(base),
        "the budget holds {held} bytes while wgpu holds {} above the start",
        now.saturating_sub(base)
    );
    client.launch(&kernel, [1, 1, 1], &[&large]).unwrap();
    client.sync().unwrap();
    let after = allocated(&client).unwrap();
    assert!(
        after <= base + 4 * MIB + SLACK,
        "once the work is done only the new page stays: {} bytes above the start",
        after.saturating_sub(base)
    );
    assert_eq!(client.budget().held, 4 * MIB);
    assert!(client.uncaptured_errors().is_empty());
}

/// A page whose buffer the application was lent (`resource`) is never destroyed when it
/// is given back: the application's own work on it, recorded before and submitted
/// after, is not seen by the client, and must not meet a destroyed buffer.
#[test]
fn a_lent_page_given_back_is_not_destroyed_under_the_applications_work() {
    let Some(client) = fresh() else { return };
    let small = client.empty(2 * MIB).unwrap();
    let other = client.empty(4096).unwrap();
    let mut encoder = client.device().create_command_encoder(&Default::default());
    {
        let from = client.resource(&other).unwrap();
        let to = client.resource(&small).unwrap();
        encoder.copy_buffer_to_buffer(&from.buffer, from.offset, &to.buffer, to.offset, 4096);
    }
    drop(small);
    // Work of the client's own after the export, finished by the sync: the batch the
    // page was handed out in is done. The sync also ends the export's hold; the grow
    // then gives the 2 MiB page back.
    client.write(&other, 0, &[1; 4]).unwrap();
    client.sync().unwrap();
    let _large = client.empty(4 * MIB).unwrap();
    client.queue().submit([encoder.finish()]);
    client.sync().unwrap();
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
