//! Abandoned reads under load (issue 11, Tests 5): the fault "eight threads that drop half
//! of their read futures leaked 18-25 staging slices"; an abandoned read's fence gave up
//! after a count of polls while another thread ran the map callback, and the drop queue
//! forgot the slice.
//!
//! Eight threads loop create / launch / read on one client for 20 s
//! (`WGPU_MEMORY_SOAK_SECS` overrides), dropping every other read future unawaited and
//! checking the bytes of the others. Afterwards, once synced and cleaned up (a bounded
//! number of times), the readback and upload staging memories hold no slice.

use crate::device::{fresh, pattern};
use crate::kernels::{ADD_ONE, groups_for, words};
use crate::reports::upload_slices;
use crate::reports::{auxiliary_slices, main_slices};
use crate::watchdog::within;
use std::time::{Duration, Instant};
use wgpu_memory::{Client, Kernel};

const THREADS: u64 = 8;
const DEFAULT_SECS: u64 = 20;

fn soak_time() -> Duration {
    let secs = std::env::var("WGPU_MEMORY_SOAK_SECS").map_or(DEFAULT_SECS, |value| {
        value
            .parse()
            .unwrap_or_else(|_| panic!("WGPU_MEMORY_SOAK_SECS={value:?} is not seconds"))
    });
    Duration::from_secs(secs)
}

/// One thread's loop; returns how many reads it awaited and how many it dropped.
fn work(client: &Client, kernel: &Kernel, thread: u64, until: Instant) -> (u64, u64) {
    let (mut awaited, mut dropped) = (0, 0);
    let mut i = 0u64;
    while Instant::now() < until {
        // 256 B to 8 KiB, different per thread and iteration.
        let len = 256 * (1 + ((thread * 7 + i) % 32) as usize);
        let data = pattern(len, thread * 1_000_000 + i);
        let handle = client.create(&data).unwrap();
        client
            .launch(kernel, groups_for(len as u64), &[&handle])
            .unwrap();
        let read = client.read(&handle);
        if i.is_multiple_of(2) {
            drop(read);
            dropped += 1;
        } else {
            let bytes = pollster::block_on(read).unwrap();
            let expected: Vec<u32> = words(&data).map(|word| word.wrapping_add(1)).collect();
            assert!(
                words(&bytes).eq(expected.iter().copied()),
                "thread {thread}, iteration {i}: the read's bytes differ"
            );
            awaited += 1;
        }
        i += 1;
    }
    (awaited, dropped)
}

#[test]
fn eight_threads_dropping_half_their_reads_leave_no_staging_slice() {
    let Some(client) = fresh() else { return };
    let soak = soak_time();
    within(
        "eight threads dropping half their reads",
        soak + Duration::from_secs(90),
        move || {
            let kernel = Kernel::new("add one", ADD_ONE, "main");
            let until = Instant::now() + soak;
            let counts: Vec<(u64, u64)> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|thread| {
                        let (client, kernel) = (&client, &kernel);
                        scope.spawn(move || work(client, kernel, thread, until))
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().expect("a worker panicked"))
                    .collect()
            });
            let (awaited, dropped) = counts.iter().fold((0, 0), |(a, d), (awaited, dropped)| {
                (a + awaited, d + dropped)
            });
            eprintln!("{awaited} reads awaited, {dropped} dropped over {soak:?}");
            assert!(dropped > 0 && awaited > 0);

            let mut report = client.memory_report();
            for _ in 0..50 {
                client.sync().unwrap();
                client.cleanup();
                report = client.memory_report();
                if auxiliary_slices(&report, "staging") == Some(0) && upload_slices(&report) == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(
                auxiliary_slices(&report, "staging"),
                Some(0),
                "readback staging slices left after sync and cleanup"
            );
            assert_eq!(
                upload_slices(&report),
                0,
                "upload staging slices left after sync and cleanup"
            );
            assert_eq!(main_slices(&report), 0, "every handle was dropped");
            assert!(
                client.uncaptured_errors().is_empty(),
                "{:?}",
                client.uncaptured_errors()
            );
        },
    );
}
