//! C12: reads complete with nobody polling wgpu, concurrent reads do not deadlock, and an
//! abandoned read gives its staging slice back.
//!
//! The scenario's 4 threads x 1000 iterations are cut to 4 x 200 to keep the test short
//! on lavapipe with 2 CPU cores; every wait is bounded by a timeout so a deadlock fails
//! the test instead of hanging it.

use crate::device::{fresh, pattern};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wgpu_memory::Client;

const THREADS: u64 = 4;
const ITERATIONS: u64 = 200;
const LEN: usize = 1000;

fn staging_reserved_and_pages(client: &Client) -> (u64, u64) {
    let report = client.memory_report();
    let pools = &report.streams[0].auxiliary[0].pools;
    let all = pools
        .dynamic
        .iter()
        .chain([&pools.persistent, &pools.dedicated]);
    all.fold((0, 0), |(reserved, pages), pool| {
        (reserved + pool.usage.bytes_reserved, pages + pool.pages)
    })
}

#[test]
fn c12_reads_with_nobody_polling() {
    let Some(client) = fresh() else { return };

    // 1. On an idle device, a read awaited on an executor that never polls wgpu.
    let data = pattern(4096, 12);
    let handle = client.create(&data).unwrap();
    client.sync().unwrap();
    let (sender, receiver) = mpsc::channel();
    let reader = client.clone();
    let read_handle = handle.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        let result = pollster::block_on(reader.read(&read_handle)).map(|bytes| bytes.to_vec());
        let _ = sender.send((result, started.elapsed()));
    });
    let (result, took) = receiver
        .recv_timeout(Duration::from_secs(2))
        .expect("a read awaited with nobody polling wgpu did not complete within 2 s");
    assert_eq!(result.unwrap(), data);
    eprintln!("c12: the unpolled read took {took:?}");

    // 2. Threads interleaving writes and reads on their own handles.
    let (sender, receiver) = mpsc::channel();
    for thread in 0..THREADS {
        let client = client.clone();
        let sender = sender.clone();
        std::thread::spawn(move || {
            let outcome = (|| -> Result<(), String> {
                let own = client
                    .create(&pattern(LEN, thread * 10_000))
                    .map_err(|e| e.to_string())?;
                for iteration in 0..ITERATIONS {
                    let seed = thread * 10_000 + iteration + 1;
                    let expected = pattern(LEN, seed);
                    client
                        .write(&own, 0, &expected)
                        .map_err(|e| e.to_string())?;
                    let read = pollster::block_on(client.read(&own)).map_err(|e| e.to_string())?;
                    if *read != *expected {
                        let at = read.iter().zip(&expected).position(|(a, b)| a != b);
                        return Err(format!(
                            "thread {thread} iteration {iteration}: first difference at {at:?}"
                        ));
                    }
                }
                Ok(())
            })();
            let _ = sender.send((thread, outcome));
        });
    }
    drop(sender);
    let deadline = Instant::now() + Duration::from_secs(120);
    for _ in 0..THREADS {
        let left = deadline.saturating_duration_since(Instant::now());
        let (thread, outcome) = receiver
            .recv_timeout(left)
            .expect("deadlock: the reading threads did not finish within 120 s");
        outcome.unwrap_or_else(|error| panic!("thread {thread}: {error}"));
    }

    // 3. A read dropped before it completes gives its staging slice back.
    client.sync().unwrap();
    client.cleanup();
    let baseline = staging_reserved_and_pages(&client);
    let big = client.create(&pattern(256 << 10, 99)).unwrap();
    drop(client.read(&big));
    let in_flight = staging_reserved_and_pages(&client);
    eprintln!("c12: staging baseline {baseline:?}, with the abandoned read {in_flight:?}");
    assert!(
        in_flight.0 > baseline.0,
        "the abandoned read reserved no staging memory: {in_flight:?} vs {baseline:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut now = in_flight;
    while now != baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        client.sync().unwrap();
        client.cleanup();
        now = staging_reserved_and_pages(&client);
    }
    assert_eq!(
        now, baseline,
        "staging (reserved bytes, pages) did not return to the baseline after the abandoned read"
    );
    assert_eq!(
        client.memory_report().streams[0].auxiliary[0]
            .pools
            .usage()
            .number_allocs,
        0
    );
    // The client still reads correctly afterwards.
    assert_eq!(client.read_blocking(&handle).unwrap(), data);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
