//! Eight threads sharing one client: each creates, launches on, reads back and drops its
//! own handles, a bounded number of times. No deadlock (every wait has a timeout), every
//! byte intact, no uncaptured wgpu error.

use crate::device::{fresh, pattern};
use std::sync::mpsc;
use std::time::Duration;
use wgpu_memory::{Client, Kernel};

const THREADS: u64 = 8;
const ITERATIONS: u64 = 25;

const ADD_ONE: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] + 1u; }
}
";

/// FNV-1a over the bytes.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn add_one(bytes: &[u8]) -> Vec<u8> {
    bytes
        .chunks_exact(4)
        .flat_map(|word| {
            u32::from_le_bytes(word.try_into().unwrap())
                .wrapping_add(1)
                .to_le_bytes()
        })
        .collect()
}

fn work(client: &Client, kernel: &Kernel, thread: u64) -> Result<(), String> {
    for iteration in 0..ITERATIONS {
        // 1 to 8 KiB, different per thread and iteration.
        let words = 256 * (1 + ((thread + iteration) % 8) as usize);
        let data = pattern(words * 4, thread * 1000 + iteration);
        let expected = add_one(&data);
        let handle = client.create(&data).map_err(|e| e.to_string())?;
        let groups = words.div_ceil(64) as u32;
        client
            .launch(kernel, [groups, 1, 1], &[&handle])
            .map_err(|e| e.to_string())?;
        let read = client.read_blocking(&handle).map_err(|e| e.to_string())?;
        if read.len() != expected.len() || checksum(&read) != checksum(&expected) {
            let at = read.iter().zip(&expected).position(|(a, b)| a != b);
            return Err(format!(
                "iteration {iteration}: {} bytes read, {} expected, checksum {:x} != {:x}, \
                 first difference at {at:?}",
                read.len(),
                expected.len(),
                checksum(&read),
                checksum(&expected)
            ));
        }
        drop(read);
        drop(handle);
    }
    Ok(())
}

#[test]
fn eight_threads_share_one_client() {
    let Some(client) = fresh() else { return };
    let kernel = Kernel::new("add one", ADD_ONE, "main");
    let (sender, receiver) = mpsc::channel();
    let shared = client.clone();
    // The scope runs on its own thread so that a deadlock fails the test on the timeout
    // below instead of hanging it.
    std::thread::spawn(move || {
        let outcomes: Vec<(u64, Result<(), String>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let (client, kernel) = (&shared, &kernel);
                    scope.spawn(move || (thread, work(client, kernel, thread)))
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|_| (u64::MAX, Err("a worker panicked".into())))
                })
                .collect()
        });
        let _ = sender.send(outcomes);
    });
    let outcomes = receiver
        .recv_timeout(Duration::from_secs(180))
        .expect("deadlock: 8 threads x 25 iterations did not finish within 180 s");
    assert_eq!(outcomes.len(), THREADS as usize);
    for (thread, outcome) in outcomes {
        outcome.unwrap_or_else(|error| panic!("thread {thread}: {error}"));
    }
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
    let report = client.memory_report();
    assert_eq!(
        report.streams[0].pools.usage().number_allocs,
        0,
        "every handle was dropped"
    );
    assert_eq!(
        report.streams[0].auxiliary[0].pools.usage().number_allocs,
        0
    );
}
