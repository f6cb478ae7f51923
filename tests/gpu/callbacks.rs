//! Application callbacks that call the client (issue 11, Tests 3).
//!
//! wgpu runs `map_async` callbacks inside `device.poll` and `queue.submit`. The client
//! called both under its mutex, so an application callback that called the `Client` on
//! that thread deadlocked (the fault "`device.poll` and `queue.submit` run under the client
//! mutex"). Here the application maps a buffer of its own, its callback calls
//! `memory_report()` and then `sync()`, and the client's own activity runs the callback:
//! every call must return (a watchdog turns a deadlock into a failure).

use crate::device::{fresh, pattern};
use crate::kernels::{ADD_ONE, groups_for};
use crate::watchdog::within;
use std::sync::mpsc;
use std::time::Duration;
use wgpu_memory::{Client, Kernel};

/// The client call that makes wgpu run the application's callback.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    Sync,
    ReadBlocking,
    Launch,
    Flush,
    Cleanup,
}

impl Trigger {
    fn run(self, client: &Client) {
        let handle = client.create(&pattern(256, 3)).unwrap();
        match self {
            Trigger::Sync => client.sync().unwrap(),
            Trigger::ReadBlocking => {
                assert!(client.read_blocking(&handle).unwrap() == pattern(256, 3));
            }
            Trigger::Launch => client
                .launch(
                    &Kernel::new("add one", ADD_ONE, "main"),
                    groups_for(256),
                    &[&handle],
                )
                .unwrap(),
            Trigger::Flush => client.flush().unwrap(),
            Trigger::Cleanup => {
                client.cleanup();
            }
        }
    }
}

/// What the application's callback saw.
#[derive(Debug)]
struct Seen {
    mapped: bool,
    report_streams: usize,
    sync: Result<(), String>,
}

fn callback_calling_the_client_returns(trigger: Trigger) {
    let Some(client) = fresh() else { return };
    let seen = within(
        &format!("an application map callback calling the client, run by {trigger:?}"),
        Duration::from_secs(30),
        move || {
            let buffer = client.device().create_buffer(&wgpu::BufferDescriptor {
                label: Some("the application's own buffer"),
                size: 256,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let (sender, receiver) = mpsc::channel();
            let inner = client.clone();
            buffer
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |mapped| {
                    let report = inner.memory_report();
                    let sync = inner.sync().map_err(|error| error.to_string());
                    let _ = sender.send(Seen {
                        mapped: mapped.is_ok(),
                        report_streams: report.streams.len(),
                        sync,
                    });
                });
            trigger.run(&client);
            // The call may have left the callback to a later poll; drive the client until
            // it ran (a bounded number of times).
            let mut seen = receiver.try_recv().ok();
            let ran_inside = seen.is_some();
            for _ in 0..100 {
                if seen.is_some() {
                    break;
                }
                client.sync().unwrap();
                seen = receiver.recv_timeout(Duration::from_millis(50)).ok();
            }
            eprintln!("{trigger:?}: the callback ran inside the call: {ran_inside}");
            let seen = seen.expect("the application's map callback never ran");
            buffer.unmap();
            (client, seen)
        },
    );
    let (client, seen) = seen;
    assert!(seen.mapped, "{seen:?}");
    assert_eq!(seen.report_streams, 1, "{seen:?}");
    assert_eq!(seen.sync, Ok(()), "{seen:?}");
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

#[test]
fn an_app_map_callback_may_call_the_client_when_sync_runs_it() {
    callback_calling_the_client_returns(Trigger::Sync);
}

#[test]
fn an_app_map_callback_may_call_the_client_when_read_blocking_runs_it() {
    callback_calling_the_client_returns(Trigger::ReadBlocking);
}

#[test]
fn an_app_map_callback_may_call_the_client_when_launch_runs_it() {
    callback_calling_the_client_returns(Trigger::Launch);
}

#[test]
fn an_app_map_callback_may_call_the_client_when_flush_runs_it() {
    callback_calling_the_client_returns(Trigger::Flush);
}

#[test]
fn an_app_map_callback_may_call_the_client_when_cleanup_runs_it() {
    callback_calling_the_client_returns(Trigger::Cleanup);
}
