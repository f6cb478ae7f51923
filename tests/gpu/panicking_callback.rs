//! A panicking application callback inside the client's `queue.submit` does not poison
//! upload staging (issue 18, item 3).
//!
//! wgpu runs the application's `on_submitted_work_done` callbacks (and its map callbacks)
//! inside the next `queue.submit` or `device.poll`, whoever makes it. Here the client's
//! own submit runs one that panics. The panic reaches the caller of that submit (it is
//! the application's), and afterwards upload staging is whole: every page was mapped
//! again, no byte stays in flight, the next writes work, and the work that ran is not
//! claimed as failed.

use crate::device::{fresh, pattern};
use crate::watchdog::within;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

/// A client over a device and queue of the application's own, and that queue.
fn own_client() -> Option<(wgpu_memory::Client, wgpu::Queue)> {
    fresh()?;
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).ok()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&Default::default())).ok()?;
    Some((wgpu_memory::Client::new(device, queue.clone()), queue))
}

#[test]
fn a_panicking_callback_in_our_submit_leaves_upload_staging_whole() {
    let Some((client, queue)) = own_client() else {
        return;
    };
    let first = pattern(4096, 1);
    let handle = client.create(&first).unwrap();
    let large = pattern(2 << 20, 2);
    let other = client.empty(large.len() as u64).unwrap();
    client.sync().unwrap();
    client.write(&handle, 0, &pattern(4096, 3)).unwrap();
    client.write(&other, 0, &large).unwrap();
    // The queue is idle, so the next maintain, the client's submit of these writes,
    // runs the callback.
    queue.on_submitted_work_done(|| panic!("the application's callback panics"));
    let panicked = catch_unwind(AssertUnwindSafe(|| client.flush()));
    assert!(
        panicked.is_err(),
        "the callback ran inside the client's submit"
    );

    within(
        "upload staging after a panicking callback",
        Duration::from_secs(60),
        move || {
            client.sync().unwrap();
            assert_eq!(
                client.pending_upload_bytes(),
                0,
                "every staging page of the batch was mapped again"
            );
            // The batch ran: its writes are not claimed as failed.
            assert!(client.read_blocking(&handle).unwrap() == pattern(4096, 3));
            assert!(client.read_blocking(&other).unwrap() == large);
            assert_eq!(client.failures_held(), 0);
            // The pages are free and mapped: the next writes use them without a map error.
            for round in 0..4u64 {
                let data = pattern(4096, 10 + round);
                client.write(&handle, 0, &data).unwrap();
                client.write(&other, 0, &large).unwrap();
                assert!(
                    client.read_blocking(&handle).unwrap() == data,
                    "round {round}"
                );
            }
            client.sync().unwrap();
            assert_eq!(client.pending_upload_bytes(), 0);
            assert!(
                client.uncaptured_errors().is_empty(),
                "{:?}",
                client.uncaptured_errors()
            );
        },
    );
}
