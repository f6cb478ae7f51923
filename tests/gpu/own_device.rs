//! `examples/own_device.rs`, run as a test: the one bring-your-own-device example
//! follows the contract the README asks of applications (issue 24, item 8: it submitted
//! its own pass through the raw `wgpu::Queue`).

use crate::device::fresh;
use crate::own_device_example::run;

/// After the example, every handle and resource dropped, the main memory holds nothing
/// in use: the slices it exported were let go at its submission through
/// `client.queue()`. A pass submitted through the raw queue leaves them held (up to
/// `MAX_HELD_EXPORTS`), reserved for nobody.
#[test]
fn the_own_device_example_leaves_nothing_held() {
    if fresh().is_none() {
        return;
    }
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter =
        pollster::block_on(instance.request_adapter(&Default::default())).expect("an adapter");
    let (device, queue) =
        pollster::block_on(adapter.request_device(&Default::default())).expect("a device");
    let client = run(device, queue).expect("the example runs");
    client.cleanup();
    let report = client.memory_report();
    let main = report.streams[0].pools.usage();
    assert_eq!(main.bytes_in_use, 0, "{main:?}");
    assert_eq!(main.bytes_reserved, 0, "{main:?}");
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
