//! The soak (issue 18): 8 threads for 30 s (`WGPU_MEMORY_SOAK_SECS` overrides) mixing
//! creates, full and unaligned writes, launches, reads held and dropped, `resource()`
//! exports used by the application's own encoders and submitted through
//! `Client::queue()`, cleanups, compactions, and application callbacks that call the client. Each
//! thread keeps a host model of every handle it owns. At the end: no wrong byte, no hang
//! (each thread under a watchdog), no uncaptured error, and no staging slice left.

use crate::device::{fresh, pattern};
use crate::kernels::{ADD_ONE, groups_for};
use crate::misuse::AppAddOne;
use crate::reports::{auxiliary_slices, upload_slices};
use crate::watchdog::within;
use std::time::{Duration, Instant};
use wgpu_memory::{Client, Handle, Kernel};

const THREADS: u64 = 8;
const MAX_OWNED: usize = 12;

/// A handle and the bytes it must hold.
struct Owned {
    handle: Handle,
    bytes: Vec<u8>,
}

/// A small deterministic generator (one per thread).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Adds 1 to every little-endian word of `bytes` (the host model of `ADD_ONE`).
fn add_one(bytes: &mut [u8]) {
    for word in bytes.chunks_exact_mut(4) {
        let value = u32::from_le_bytes(word.try_into().unwrap()).wrapping_add(1);
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// What one thread found wrong: (operation, detail).
type Wrong = Vec<(String, String)>;

fn check(
    wrong: &mut Wrong,
    what: &str,
    got: Result<wgpu_memory::ReadBytes, wgpu_memory::ClientError>,
    want: &[u8],
) {
    match got {
        Ok(bytes) if bytes == want => {}
        Ok(bytes) => {
            let first = bytes.iter().zip(want).position(|(a, b)| a != b);
            wrong.push((
                what.to_string(),
                format!("bytes differ, first at {first:?}"),
            ));
        }
        Err(error) => wrong.push((what.to_string(), error.to_string())),
    }
}

fn worker(client: Client, seed: u64, until: Instant) -> (Wrong, u64) {
    let mut rng = Lcg(seed);
    let kernel = Kernel::new("add one", ADD_ONE, "main");
    let app = AppAddOne::new(&client);
    let mut owned: Vec<Owned> = Vec::new();
    let mut wrong = Wrong::new();
    let mut ops = 0;
    while Instant::now() < until {
        ops += 1;
        let len = 4 * (1 + rng.below(2048)) as usize;
        match rng.below(10) {
            0 | 1 if owned.len() < MAX_OWNED => {
                let bytes = pattern(len, rng.below(1 << 20));
                let handle = client.create(&bytes).unwrap();
                owned.push(Owned { handle, bytes });
            }
            2 if !owned.is_empty() => {
                let at = rng.below(owned.len() as u64) as usize;
                let target = &mut owned[at];
                let offset = rng.below(target.bytes.len() as u64) as usize;
                let end = offset + rng.below((target.bytes.len() - offset) as u64 + 1) as usize;
                let data = pattern(end - offset, rng.below(1 << 20));
                client.write(&target.handle, offset as u64, &data).unwrap();
                target.bytes[offset..end].copy_from_slice(&data);
            }
            3 if !owned.is_empty() => {
                let at = rng.below(owned.len() as u64) as usize;
                let target = &mut owned[at];
                client
                    .launch(
                        &kernel,
                        groups_for(target.bytes.len() as u64),
                        &[&target.handle],
                    )
                    .unwrap();
                add_one(&mut target.bytes);
            }
            4 if !owned.is_empty() => {
                let at = rng.below(owned.len() as u64) as usize;
                let read = client.read_blocking(&owned[at].handle);
                check(&mut wrong, "read_blocking", read, &owned[at].bytes);
            }
            5 if !owned.is_empty() => {
                // A held read, awaited after more work on the same handle.
                let at = rng.below(owned.len() as u64) as usize;
                let want = owned[at].bytes.clone();
                let held = client.read(&owned[at].handle);
                client
                    .launch(&kernel, groups_for(want.len() as u64), &[&owned[at].handle])
                    .unwrap();
                add_one(&mut owned[at].bytes);
                check(&mut wrong, "held read", pollster::block_on(held), &want);
                // A dropped read.
                drop(client.read(&owned[at].handle));
            }
            6 if !owned.is_empty() => {
                // The helper shape: record on an export, make a new handle, submit
                // through the client's queue, then drop the export. With other threads
                // submitting and cleaning up, the export must outlive the submit (their
                // submissions end the hold a dropped export leaves: `Client::resource`).
                let at = rng.below(owned.len() as u64) as usize;
                let resource = client.resource(&owned[at].handle).unwrap();
                let encoder = app.record(&client, &resource);
                let kept = rng.below(2) == 0;
                if kept {
                    add_one(&mut owned[at].bytes);
                } else {
                    owned.swap_remove(at);
                }
                let bytes = pattern(len, rng.below(1 << 20));
                let handle = client.create(&bytes).unwrap();
                client.queue().submit([encoder.finish()]);
                drop(resource);
                owned.push(Owned { handle, bytes });
                if owned.len() > MAX_OWNED {
                    owned.swap_remove(0);
                }
            }
            7 if !owned.is_empty() => {
                // An application callback that calls the client.
                let inner = client.clone();
                let probe = owned[0].handle.clone();
                let want = owned[0].bytes.clone();
                let (sender, receiver) = std::sync::mpsc::channel();
                client.queue().on_submitted_work_done(move || {
                    let read = inner.read_blocking(&probe).map(|bytes| bytes == want);
                    let _ = inner.memory_report();
                    let _ = sender.send(read);
                });
                client.flush().unwrap();
                // The callback runs at the next poll of anyone's; ours makes sure.
                let _ = client.sync();
                match receiver.recv() {
                    Ok(Ok(true)) => {}
                    other => wrong.push(("callback read".to_string(), format!("{other:?}"))),
                }
            }
            8 if rng.below(2) == 0 => {
                client.cleanup();
            }
            8 => {
                if let Err(error) = client.compact() {
                    wrong.push(("compact".to_string(), error.to_string()));
                }
            }
            _ => {
                if !owned.is_empty() {
                    owned.swap_remove(rng.below(owned.len() as u64) as usize);
                }
            }
        }
    }
    for target in &owned {
        let read = client.read_blocking(&target.handle);
        check(&mut wrong, "final read", read, &target.bytes);
    }
    (wrong, ops)
}

#[test]
fn eight_threads_mixing_every_operation_lose_no_byte_and_never_hang() {
    let Some(client) = fresh() else { return };
    let seconds: u64 = std::env::var("WGPU_MEMORY_SOAK_SECS").map_or(30, |value| {
        value.parse().expect("WGPU_MEMORY_SOAK_SECS: seconds")
    });
    let until = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..THREADS)
        .map(|seed| {
            let client = client.clone();
            std::thread::spawn(move || {
                within(
                    &format!("soak thread {seed}"),
                    Duration::from_secs(seconds + 120),
                    move || worker(client, seed + 1, until),
                )
            })
        })
        .collect();
    let mut wrong = Wrong::new();
    let mut ops = 0;
    for thread in threads {
        let (found, done) = thread.join().expect("a soak thread panicked");
        wrong.extend(found);
        ops += done;
    }
    eprintln!("soak: {ops} operations over {seconds} s");
    assert!(
        wrong.is_empty(),
        "{} wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
    let settled = within("settling the staging", Duration::from_secs(60), move || {
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
        (client, report)
    });
    let (client, report) = settled;
    assert_eq!(
        auxiliary_slices(&report, "staging"),
        Some(0),
        "readback staging left"
    );
    assert_eq!(upload_slices(&report), 0, "upload staging left");
    assert_eq!(client.pending_upload_bytes(), 0);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
