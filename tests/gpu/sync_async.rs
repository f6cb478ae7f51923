//! `Client::sync_async`: `sync` as a future, on every target (the web's only way to wait
//! for the device).

use crate::device::{fresh, pattern};
use crate::kernels::{busy, groups_for};
use crate::watchdog::within;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wgpu_memory::ClientError;

/// The future resolves only once the device has finished the work submitted before it:
/// a work-done callback the application registered on that work has run by then (wgpu
/// runs them in order, and on native backends only inside a device poll, which nothing
/// but the future's wait makes here).
#[test]
fn sync_async_resolves_once_the_work_submitted_before_it_is_done() {
    let Some(client) = fresh() else { return };
    within("sync_async", Duration::from_secs(60), move || {
        // About 0.3 s of work on lavapipe: still running when the future is made.
        let handle = client.create(&pattern(1 << 20, 3)).unwrap();
        client
            .launch(&busy(2500), groups_for(1 << 20), &[&handle])
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        // `queue()` submits the launch first; the callback follows it.
        client
            .queue()
            .on_submitted_work_done(move || flag.store(true, Ordering::SeqCst));
        pollster::block_on(client.sync_async()).unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "resolved before the work was done"
        );
    });
}

/// Work recorded before the call is submitted by the call itself (not when the future
/// is first polled), and the future is `Send + 'static`: awaited on another thread it
/// still resolves, and the launch recorded before it has run.
#[test]
fn sync_async_submits_at_the_call_and_resolves_on_another_thread() {
    let Some(client) = fresh() else { return };
    within("sync_async elsewhere", Duration::from_secs(60), move || {
        let handle = client.create(&[0; 16]).unwrap();
        let add_one = wgpu_memory::Kernel::new("add one", crate::kernels::ADD_ONE, "main");
        client.launch(&add_one, [1, 1, 1], &[&handle]).unwrap();
        let future = client.sync_async();
        std::thread::spawn(move || pollster::block_on(future))
            .join()
            .unwrap()
            .unwrap();
        let words: Vec<u32> = client
            .read_blocking(&handle)
            .unwrap()
            .chunks_exact(4)
            .map(|word| u32::from_le_bytes(word.try_into().unwrap()))
            .collect();
        assert_eq!(words, [1, 1, 1, 1]);
    });
}

/// As `sync` does, the call counts as this thread's submission for the exported
/// slices it dropped: once it returned, the next reservation lets their holds go.
#[test]
fn sync_async_ends_this_threads_export_holds() {
    let Some(client) = fresh() else { return };
    let handle = client.create(&[5; 100]).unwrap();
    drop(client.resource(&handle).unwrap());
    drop(handle);
    let _reservation = client.empty(4).unwrap();
    assert_eq!(client.held_exports(), 1, "held until this thread submits");
    pollster::block_on(client.sync_async()).unwrap();
    let _reservation = client.empty(4).unwrap();
    assert_eq!(client.held_exports(), 0);
}

/// On a destroyed device the future ends with the lost-device error, as `sync` does.
#[test]
fn sync_async_on_a_lost_device_is_a_lost_device_error() {
    let Some(client) = fresh() else { return };
    within(
        "sync_async on a lost device",
        Duration::from_secs(60),
        move || {
            let handle = client.create(&pattern(1 << 20, 9)).unwrap();
            client
                .launch(&busy(500), groups_for(1 << 20), &[&handle])
                .unwrap();
            let pending = client.sync_async();
            client.device().destroy();
            let during = pollster::block_on(pending);
            let after = pollster::block_on(client.sync_async());
            for (what, result) in [("during", during), ("after", after)] {
                match result {
                    Err(ClientError::DeviceLost { operation, .. }) => {
                        assert!(
                            operation == "sync" || operation == "submit",
                            "{what}: {operation}"
                        )
                    }
                    // Done before the loss was seen.
                    Ok(()) if what == "during" => {}
                    other => panic!("{what}: {other:?}"),
                }
            }
        },
    );
}
