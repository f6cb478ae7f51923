//! A destroyed device (issue 11, Tests 4): the faults "after `device.destroy()`, unmapping
//! staging sends errors to wgpu's uncaptured-error handler" and "`write` (and a `create`
//! that lands in an existing page) returns `Ok(())` and the bytes are silently dropped,
//! even after `sync()`; a launch right after the loss also returned `Ok`".
//!
//! Reads in flight when the device goes, whether awaited afterwards (held) or dropped
//! (abandoned), end with an error; every later write, create, launch, read and sync
//! returns an error; nothing reaches the uncaptured-error list, and no staging slice is
//! forgotten. Each test destroys the device of a client of its own, under a watchdog.

use crate::device::{fresh, pattern};
use crate::kernels::{ADD_ONE, busy, groups_for};
use crate::reports::auxiliary_slices;
use crate::reports::upload_slices;
use crate::watchdog::within;
use std::time::Duration;
use wgpu_memory::{Client, ClientError, Handle, Kernel};

const READS: u64 = 8;
const LEN: usize = 4096;
/// Long enough on lavapipe (about 0.3 s over 1 MiB) that the reads queued behind it are
/// still in flight when the device is destroyed.
const BUSY_ROUNDS: u32 = 2500;
const BUSY_SIZE: u64 = 1 << 20;

/// What was wrong with one operation after the loss, if anything.
fn not_lost<T>(what: &str, result: Result<T, ClientError>) -> Option<String> {
    match result {
        Ok(_) => Some(format!("{what} returned Ok")),
        Err(error) if !is_device_lost(&error) => Some(format!("{what}: {error}")),
        Err(_) => None,
    }
}

/// Fails with every operation that did not end with a lost-device error.
fn assert_all_lost(wrong: Vec<Option<String>>) {
    let wrong: Vec<String> = wrong.into_iter().flatten().collect();
    assert!(
        wrong.is_empty(),
        "after device.destroy(), {} operation(s) did not fail as lost:\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
}

/// Handles with known bytes, and reads of them started behind a busy kernel.
fn handles_behind_a_busy_kernel(client: &Client) -> (Vec<Handle>, Handle) {
    let busy_handle = client.create(&pattern(BUSY_SIZE as usize, 40)).unwrap();
    let handles = (0..READS)
        .map(|i| client.create(&pattern(LEN, i)).unwrap())
        .collect();
    client
        .launch(&busy(BUSY_ROUNDS), groups_for(BUSY_SIZE), &[&busy_handle])
        .unwrap();
    (handles, busy_handle)
}

/// Cleans up until no staging slice is left (a bounded number of times), then checks
/// that none is and that no wgpu error reached the uncaptured handler.
fn settle_and_check(client: &Client) {
    let mut report = client.memory_report();
    for _ in 0..50 {
        let _ = client.sync();
        client.cleanup();
        report = client.memory_report();
        if auxiliary_slices(&report, "staging") == Some(0) && upload_slices(&report) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        client.uncaptured_errors().is_empty(),
        "errors reached wgpu's uncaptured-error handler: {:?}",
        client.uncaptured_errors()
    );
    assert_eq!(
        auxiliary_slices(&report, "staging"),
        Some(0),
        "readback staging slices forgotten after the loss"
    );
    assert_eq!(
        upload_slices(&report),
        0,
        "upload staging slices forgotten after the loss"
    );
}

#[test]
fn held_reads_end_with_an_error_when_the_device_is_destroyed() {
    let Some(client) = fresh() else { return };
    within(
        "held reads across device.destroy()",
        Duration::from_secs(60),
        move || {
            let (handles, busy_handle) = handles_behind_a_busy_kernel(&client);
            let reads: Vec<_> = handles.iter().map(|handle| client.read(handle)).collect();
            client.device().destroy();
            // A read whose map wgpu completed before it reported the loss (its copy ran
            // before the device went; wgpu reports a destroyed device only once its queue
            // is empty) may return its bytes, which must then be exactly the handle's.
            let wrong = reads
                .into_iter()
                .enumerate()
                .map(|(i, read)| match pollster::block_on(read) {
                    Ok(bytes) if bytes == pattern(LEN, i as u64) => None,
                    result => not_lost(&format!("held read {i}"), result),
                })
                .collect();
            drop((handles, busy_handle));
            assert_all_lost(wrong);
            settle_and_check(&client);
        },
    );
}

#[test]
fn abandoned_reads_leave_no_error_and_no_staging_slice_after_device_destroy() {
    let Some(client) = fresh() else { return };
    within(
        "abandoned reads across device.destroy()",
        Duration::from_secs(60),
        move || {
            let (handles, busy_handle) = handles_behind_a_busy_kernel(&client);
            // Half dropped before the loss, half after it, none awaited.
            let mut reads: Vec<_> = handles.iter().map(|handle| client.read(handle)).collect();
            let after = reads.split_off(reads.len() / 2);
            drop(reads);
            client.device().destroy();
            drop(after);
            drop((handles, busy_handle));
            settle_and_check(&client);
        },
    );
}

#[test]
fn every_operation_after_device_destroy_returns_an_error() {
    let Some(client) = fresh() else { return };
    within(
        "operations after device.destroy()",
        Duration::from_secs(60),
        move || {
            let kernel = Kernel::new("add one", ADD_ONE, "main");
            let handle = client.create(&pattern(LEN, 1)).unwrap();
            // A page with free room, so that a later small create lands in it.
            let neighbour = client.create(&pattern(LEN, 2)).unwrap();
            drop(neighbour);
            client.sync().unwrap();
            client.device().destroy();

            let data = pattern(LEN, 3);
            let groups = groups_for(LEN as u64);
            let wrong = vec![
                not_lost("launch", client.launch(&kernel, groups, &[&handle])),
                not_lost("write", client.write(&handle, 0, &data)),
                not_lost("unaligned write", client.write(&handle, 3, &data[..5])),
                not_lost(
                    "write_with",
                    client.write_with(&handle, 0, 64, |mut bytes| bytes.fill(9)),
                ),
                not_lost("create in an existing page", client.create(&data)),
                not_lost("create of a new page", client.create(&vec![5; 64 << 20])),
                not_lost(
                    "create_with",
                    client.create_with(LEN as u64, |mut bytes| bytes.fill(7)),
                ),
                not_lost("read", client.read_blocking(&handle)),
                not_lost("read_many", client.read_many_blocking(&[&handle])),
                not_lost("sync", client.sync()),
                // Still errors after sync.
                not_lost("write after sync", client.write(&handle, 0, &data)),
                not_lost("create after sync", client.create(&data)),
                not_lost(
                    "launch after sync",
                    client.launch(&kernel, groups, &[&handle]),
                ),
            ];
            assert_all_lost(wrong);
            drop(handle);
            settle_and_check(&client);
        },
    );
}

/// Whether `error` is the client's lost-device error.
fn is_device_lost(error: &ClientError) -> bool {
    matches!(error, ClientError::DeviceLost { .. })
}
