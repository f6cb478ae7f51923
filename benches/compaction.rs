//! Compaction benchmark: bytes moved per second by `Client::compact` against a bare
//! `copy_buffer_to_buffer` of the same bytes, on the same adapter, in one run.
//!
//! Setup, per repetition: a sliced pool of 32 MiB pages holding 1 MiB slices is filled
//! (`2 * MOVED / 16 MiB` pages), then every other slice is dropped, so every page is half
//! full. `Client::compact` (default bound: 256 MiB per pass) then moves the live slices
//! of half the pages into the holes of the other half: `MOVED` bytes in 1 MiB copies.
//! Ours is timed from the call to the end of `sync()` (planning, recording, submitting
//! and the GPU's copies). Bare: the same number of 1 MiB copies between two buffers in
//! one encoder, submitted, waited for. Both report GB/s; the ratio is ours / bare (the
//! issue's target: at least 0.5). Also printed: the milliseconds one pass adds, per 256
//! MiB and per MiB moved.
//!
//! `cargo bench --bench compaction` (256 MiB moved); `COMPACTION_REPS=N` repetitions
//! (default 7, medians); `COMPACTION_MIB=N` moves N MiB instead (a multiple of 16, for
//! profiling); `cargo test --benches` runs one repetition of 16 MiB. The bytes
//! of every moved slice are checked once, after the first repetition.

use std::time::{Duration, Instant};

use wgpu_memory::memory_management::parse_memory_config;
use wgpu_memory::{Client, Handle};

const MIB: u64 = 1 << 20;
const SLICE: u64 = MIB;
const PAGE: u64 = 32 * MIB;

fn main() {
    let bench = std::env::args().any(|arg| arg == "--bench");
    let moved = std::env::var("COMPACTION_MIB")
        .ok()
        .and_then(|mib| mib.parse::<u64>().ok())
        .filter(|mib| *mib > 0 && mib % 16 == 0)
        .map_or(if bench { 256 * MIB } else { 16 * MIB }, |mib| mib * MIB);
    let reps: usize = std::env::var("COMPACTION_REPS")
        .ok()
        .and_then(|reps| reps.parse().ok())
        .unwrap_or(if bench { 7 } else { 1 });
    let client = match Client::open_default() {
        Ok(client) => client,
        Err(error) => {
            eprintln!("compaction bench: no adapter ({error}); nothing measured");
            return;
        }
    };
    let info = client.adapter_info().map(|info| info.name.clone());
    println!("adapter: {}", info.unwrap_or_default());
    install(&client);
    let (mut ours, mut bare, mut freeing) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_host, mut bare_host) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let (total, host) = time_compaction(&client, moved, rep == 0);
        ours.push(total);
        ours_host.push(host);
        let (total, host) = time_bare(&client, moved);
        bare.push(total);
        bare_host.push(host);
        freeing.push(time_bare_freeing(&client, moved));
    }
    let freeing = median(freeing);
    report(moved, median(ours), median(bare));
    println!(
        "host part, median: ours {:.3} ms (plan, record, give back pages, submit); bare {:.3} ms (record the same copies, submit)",
        median(ours_host).as_secs_f64() * 1e3,
        median(bare_host).as_secs_f64() * 1e3
    );
    println!(
        "bare copies and dropping {} used pages of {} MiB, until the device is done: {:.3} ms (what giving pages back costs wgpu and the driver)",
        moved * 2 / PAGE,
        PAGE / MIB,
        freeing.as_secs_f64() * 1e3
    );
}

/// The bare copies, then dropping as many used pages of [`PAGE`] bytes as a pass gives
/// back, timed until the device is done (wgpu frees their memory once the copies ran):
/// how much of a pass is the driver freeing pages.
fn time_bare_freeing(client: &Client, moved: u64) -> Duration {
    let device = client.device();
    let buffer = |label, size| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let (source, target) = (buffer("bare source", moved), buffer("bare target", moved));
    let pages: Vec<wgpu::Buffer> = (0..moved * 2 / PAGE)
        .map(|_| buffer("bare page", PAGE))
        .collect();
    let mut encoder = device.create_command_encoder(&Default::default());
    for page in &pages {
        encoder.copy_buffer_to_buffer(&source, 0, page, 0, SLICE);
    }
    client.queue().submit([encoder.finish()]);
    warm(client, &source, &target, moved);
    let start = Instant::now();
    let mut encoder = device.create_command_encoder(&Default::default());
    for i in 0..moved / SLICE {
        encoder.copy_buffer_to_buffer(&source, i * SLICE, &target, i * SLICE, SLICE);
    }
    for page in &pages {
        encoder.copy_buffer_to_buffer(page, 0, &target, 0, SLICE);
    }
    client.queue().submit([encoder.finish()]);
    drop(pages);
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    start.elapsed()
}

/// One sliced pool of 32 MiB pages for 1 MiB slices.
fn install(client: &Client) {
    let toml = "[memory]\npools = [ { type = \"sliced\", page_size = \"32 MiB\", max_slice_size = \"32 MiB\" } ]\n";
    let pools = parse_memory_config(toml)
        .expect("layout")
        .pools
        .expect("pools");
    client.install_memory_pools(&pools).expect("install");
}

/// Half-full pages holding `2 * moved` bytes of slices; the kept ones, filled by a copy
/// of a known pattern.
fn half_full(client: &Client, moved: u64) -> Vec<(Handle, u8)> {
    let slices = 4 * moved / SLICE;
    let held: Vec<(Handle, u8)> = (0..slices)
        .map(|i| {
            let byte = (i % 251) as u8;
            let bytes = vec![byte; SLICE as usize];
            (client.create(&bytes).expect("create"), byte)
        })
        .collect();
    client.sync().expect("sync");
    // Waits until pages the last repetition gave back are freed (on the client's
    // reclaimer thread), so no free of theirs overlaps the timed pass.
    let _ = client.device_memory();
    held.into_iter().step_by(2).collect()
}

/// One pass, timed until the device is done, and its host part (until `compact` returns).
fn time_compaction(client: &Client, moved: u64, check: bool) -> (Duration, Duration) {
    let kept = half_full(client, moved);
    let start = Instant::now();
    let report = client.compact().expect("compact");
    let recorded = start.elapsed();
    client.sync().expect("sync");
    let elapsed = start.elapsed();
    println!(
        "pass: {:.3} ms to plan, record, give back pages and submit; {:.3} ms until the device is done",
        recorded.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e3
    );
    assert_eq!(
        report.bytes_moved, moved,
        "one pass moves half the pages: {report:?}"
    );
    assert_eq!(report.pages_given_back, moved * 2 / PAGE, "{report:?}");
    if check {
        for (handle, byte) in &kept {
            let read = client.read_blocking(handle).expect("read");
            assert!(
                read.iter().all(|b| b == byte),
                "a moved slice lost its bytes"
            );
        }
    }
    drop(kept);
    client.cleanup();
    (elapsed, recorded)
}

/// The bare copies timed until the device is done, and their host part (recording and
/// submitting).
fn time_bare(client: &Client, moved: u64) -> (Duration, Duration) {
    let device = client.device();
    let buffer = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: moved,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let (source, target) = (buffer("bare source"), buffer("bare target"));
    // Touch both once, so the timed copies are not the first use of the pages.
    warm(client, &source, &target, moved);
    let start = Instant::now();
    let host = warm(client, &source, &target, moved);
    (start.elapsed(), host)
}

/// `moved / SLICE` copies of one slice each from `source` to `target`, waited for.
/// Returns the time taken to record and submit them.
fn warm(client: &Client, source: &wgpu::Buffer, target: &wgpu::Buffer, moved: u64) -> Duration {
    let device = client.device();
    let start = Instant::now();
    let mut encoder = device.create_command_encoder(&Default::default());
    for i in 0..moved / SLICE {
        encoder.copy_buffer_to_buffer(source, i * SLICE, target, i * SLICE, SLICE);
    }
    client.queue().submit([encoder.finish()]);
    let host = start.elapsed();
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    host
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn report(moved: u64, ours: Duration, bare: Duration) {
    let rate = |time: Duration| moved as f64 / time.as_secs_f64() / 1e9;
    let per_256 = ours.as_secs_f64() * 1e3 * (256.0 * MIB as f64) / moved as f64;
    println!("| side | bytes moved | time (ms) | GB/s |");
    println!("|---|---:|---:|---:|");
    for (side, time) in [
        ("Client::compact", ours),
        ("bare copy_buffer_to_buffer", bare),
    ] {
        println!(
            "| {side} | {} MiB | {:.3} | {:.2} |",
            moved / MIB,
            time.as_secs_f64() * 1e3,
            rate(time)
        );
    }
    println!(
        "ours / bare: {:.2}x (target at least 0.50); a pass costs {:.3} ms per 256 MiB moved, {:.4} ms per MiB",
        rate(ours) / rate(bare),
        per_256,
        per_256 / 256.0
    );
}
