//! Layouts and modes through the client, on the real adapter.

use crate::device::fresh;
use wgpu_memory::ClientError;
use wgpu_memory::memory_management::{
    InstallMemoryPoolsError, MemoryAllocationMode, MemoryPoolKind, parse_memory_config,
};

const TWO_POOLS: &str = r#"
[memory]
pools = [
    { type = "sliced", page_size = "1 MiB", max_slice_size = "64 KiB" },
    { type = "exclusive", max_alloc_size = "64 MiB", dealloc_period = 1000 },
]
"#;

#[test]
fn install_memory_pools_from_toml_then_refuse_while_in_use() {
    let Some(client) = fresh() else { return };
    let pools = parse_memory_config(TWO_POOLS).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
    let small = client.create(&[7; 1000]).unwrap();
    let big = client.create(&vec![9; 100_000]).unwrap();
    let report = client.memory_report();
    let main = &report.streams[0].pools;
    assert!(matches!(
        main.dynamic[0].kind,
        MemoryPoolKind::Sliced {
            page_size: 1048576,
            ..
        }
    ));
    assert_eq!(main.dynamic[0].usage.bytes_in_use, 1000);
    assert_eq!(main.dynamic[1].usage.bytes_in_use, 100_000);
    assert_eq!(client.read_blocking(&small).unwrap(), vec![7; 1000]);

    match client.install_memory_pools(&pools) {
        Err(ClientError::Install(InstallMemoryPoolsError::PoolsInUse {
            bytes_in_use,
            allocations,
        })) => {
            assert_eq!((bytes_in_use, allocations), (101_000, 2))
        }
        other => panic!("expected PoolsInUse, got {other:?}"),
    }
    drop((small, big));
    client.install_memory_pools(&pools).unwrap();
    assert!(client.uncaptured_errors().is_empty());
}

#[test]
fn a_persistent_window_puts_weights_in_the_persistent_pool() {
    let Some(client) = fresh() else { return };
    let weights = client.with_mode(MemoryAllocationMode::Persistent, || {
        client.create(&[1; 4096]).unwrap()
    });
    let activation = client.create(&[2; 4096]).unwrap();
    let report = client.memory_report();
    let main = &report.streams[0].pools;
    assert_eq!(main.persistent.usage.bytes_in_use, 4096);
    assert_eq!(main.usage().bytes_in_use, 8192);
    assert_eq!(client.read_blocking(&weights).unwrap(), vec![1; 4096]);
    drop(activation);
}

#[test]
fn record_memory_keeps_labelled_snapshots() {
    let Some(client) = fresh() else { return };
    client.record_memory("empty");
    let handle = client.create(&[1; 4096]).unwrap();
    let record = client.record_memory("one buffer");
    assert_eq!(record.label, "one buffer");
    // The main pools hold the handle; upload staging is an auxiliary memory of its own.
    assert_eq!(record.report.streams[0].pools.usage().bytes_in_use, 4096);
    let records = client.memory_records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].label, "empty");
    assert_eq!(records[0].report.usage().bytes_in_use, 0);
    drop(handle);
}

#[test]
fn memory_records_keep_only_the_newest_within_their_bound() {
    let Some(client) = fresh() else { return };
    client.set_record_capacity(3);
    for step in 0..10 {
        client.record_memory(format!("step {step}"));
    }
    let labels: Vec<String> = client
        .memory_records()
        .into_iter()
        .map(|record| record.label)
        .collect();
    assert_eq!(labels, ["step 7", "step 8", "step 9"]);
}

/// Once the application dropped every handle and resource, an install succeeds: the
/// export hold of a slice whose resource this thread dropped ends with the install
/// itself (before, it was refused: "1 allocations (100 bytes) are still live ... drop
/// those handles and bindings and retry").
#[test]
fn install_succeeds_once_every_handle_and_resource_is_dropped() {
    let Some(client) = fresh() else { return };
    let pools = parse_memory_config(TWO_POOLS).unwrap().pools.unwrap();
    let handle = client.create(&[3; 100]).unwrap();
    let resource = client.resource(&handle).unwrap();
    drop(resource);
    drop(handle);
    client.install_memory_pools(&pools).unwrap();
    let usage = client.memory_report().streams[0].pools.usage();
    assert_eq!((usage.number_allocs, usage.bytes_in_use), (0, 0));
    assert_eq!(client.held_exports(), 0);
}

/// A slice whose resource another, still running, thread dropped stays held until that
/// thread submits: the install is refused with an error naming the held slices, their
/// thread and the calls that let them go; after the thread's submit it succeeds.
#[test]
fn install_refused_for_another_threads_held_export_names_it() {
    let Some(client) = fresh() else { return };
    let pools = parse_memory_config(TWO_POOLS).unwrap().pools.unwrap();
    let (dropped, dropped_here) = std::sync::mpsc::channel();
    let (submit, submit_there) = std::sync::mpsc::channel::<()>();
    let inner = client.clone();
    let thread = std::thread::Builder::new()
        .name("exporting thread".into())
        .spawn(move || {
            let handle = inner.create(&[3; 100]).unwrap();
            drop(inner.resource(&handle).unwrap());
            drop(handle);
            dropped.send(()).unwrap();
            submit_there.recv().unwrap();
            inner.queue().submit([]);
            dropped.send(()).unwrap();
            // Alive until the install is done: only its submit lets the slice go.
            submit_there.recv().unwrap();
        })
        .unwrap();
    dropped_here.recv().unwrap();
    // Another thread's submission, sync and cleanup do not end the hold.
    client.queue().submit([]);
    client.sync().unwrap();
    client.cleanup();
    let refused = client.install_memory_pools(&pools);
    match &refused {
        Err(ClientError::ExportsHeld {
            operation,
            allocations: 1,
            bytes_in_use: 100,
            slices: 1,
            bytes: 100,
            threads,
        }) => {
            assert_eq!(operation, "install_memory_pools");
            assert!(threads[0].contains("'exporting thread'"), "{threads:?}");
        }
        other => panic!("expected ExportsHeld, got {other:?}"),
    }
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("'exporting thread'") && message.contains("Client::queue().submit"),
        "{message}"
    );
    submit.send(()).unwrap();
    dropped_here.recv().unwrap();
    client.install_memory_pools(&pools).unwrap();
    submit.send(()).unwrap();
    thread.join().unwrap();
}
