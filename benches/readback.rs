//! Readback benchmark: this crate's `Client` reads against bare wgpu on the same adapter,
//! in one run.
//!
//! - (a) `large_read`: one large read delivered to the caller (1 GiB on a discrete GPU,
//!   256 MiB on a CPU/software adapter such as lavapipe; capped by the device's limits;
//!   `READBACK_BYTES` overrides). Ours: `read_blocking`, then the caller touches every
//!   4096th byte of the zero-copy view. Bare wgpu: copy into a MAP_READ buffer, submit,
//!   `map_async`, poll, `get_mapped_range().to_vec()`, unmap; once with a new staging
//!   buffer per read (what a naive application does) and once with one staging buffer
//!   reused across reads. Ours followed by `to_vec()` is timed as well, for reference.
//! - (b) `small_reads`: 1000 handles of 4 KiB, each with its own pattern. Ours: one
//!   `read_many_blocking` over all of them. Bare wgpu: one copy, submit, map, poll, copy
//!   out and unmap per handle, with a new staging buffer per read and with one reused one.
//!
//! Both sides' results are checked against the written patterns once before timing. At
//! the end a markdown table (medians of this bench's own timing loop, not criterion's
//! estimates) is printed to stdout.
//!
//! `BENCH_QUICK=1` shortens criterion's measurement. `cargo test --benches` runs every
//! function once at a reduced size (4 MiB, 50 handles). See `benches/README.md`.

#[path = "support/median.rs"]
mod support_median;
use support_median::median;

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use wgpu_memory::report::MemorySummary;
use wgpu_memory::{Client, Handle, HandleResource};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Large read sizes: discrete (and other hardware) adapters, CPU adapters, test mode.
const LARGE_GPU: u64 = GIB;
const LARGE_CPU: u64 = 256 * MIB;
const LARGE_TEST: u64 = 4 * MIB;

/// Small reads: how many, of how many bytes.
const SMALL_COUNT: usize = 1000;
const SMALL_COUNT_TEST: usize = 50;
const SMALL_SIZE: u64 = 4 * KIB;

/// Touch stride for the bytes a read delivers (one byte per 4 KiB page).
const TOUCH_STRIDE: usize = 4096;

const LARGE: &str = "large_read";
const SMALL: &str = "small_reads";

const OURS: &str = "wgpu-memory";
const OURS_TO_VEC: &str = "wgpu-memory+to_vec";
const OURS_SCAN: &str = "wgpu-memory+scan";
const HOST_TO_VEC: &str = "host-to_vec";
const HOST_SCAN: &str = "host-scan";
const BARE_NEW: &str = "bare-new-staging";
const BARE_REUSED: &str = "bare-reused-staging";

// ---------------------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------------------

/// Everything the timed routines read from; built once in `main`.
struct Setup {
    client: Client,
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: String,
    /// Why the large size is what it is.
    size_note: String,
    large: Handle,
    large_resource: HandleResource,
    /// The large handle's bytes on the host (the reference side `host-to_vec` copies it).
    large_pattern: Vec<u8>,
    small: Vec<Handle>,
    small_resources: Vec<HandleResource>,
    /// Staging buffers of the "reused" bare variants (large size, small size).
    reused_large: wgpu::Buffer,
    reused_small: wgpu::Buffer,
}

impl Setup {
    fn large_bytes(&self) -> u64 {
        self.large.size()
    }

    fn small_bytes(&self) -> u64 {
        self.small.iter().map(Handle::size).sum()
    }
}

/// The bytes of pattern `seed`: 32-bit words that differ between handles and positions.
fn pattern(seed: u32, len: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len as usize);
    let mut word = 0u32;
    while (bytes.len() as u64) < len {
        let value = word
            .wrapping_mul(0x9E37_79B1)
            .wrapping_add(seed.wrapping_mul(0x85EB_CA6B))
            ^ (word >> 7);
        let take = (len - bytes.len() as u64).min(4) as usize;
        bytes.extend_from_slice(&value.to_le_bytes()[..take]);
        word += 1;
    }
    bytes
}

/// Size of the large read: by adapter type, capped by the device's limits (a handle is
/// one storage-bindable slice, the bare staging buffer one buffer), `READBACK_BYTES`
/// overriding the default; a multiple of 256 bytes.
fn large_size(client: &Client, test_mode: bool) -> (u64, String) {
    let limits = client.device().limits();
    let cap = limits
        .max_buffer_size
        .min(limits.max_storage_buffer_binding_size);
    let cpu = client
        .adapter_info()
        .is_some_and(|info| info.device_type == wgpu::DeviceType::Cpu);
    let (wanted, why) = match std::env::var("READBACK_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(bytes) => (bytes, "READBACK_BYTES".to_string()),
        None if test_mode => (LARGE_TEST, "test mode".to_string()),
        None if cpu => (LARGE_CPU, "CPU adapter".to_string()),
        None => (LARGE_GPU, "hardware adapter".to_string()),
    };
    let mut size = wanted.min(cap) / 256 * 256;
    let mut note = format!("{why}: {}", human(wanted));
    if size < wanted {
        note.push_str(&format!(
            ", capped to {} by max_buffer_size {} / max_storage_buffer_binding_size {}",
            human(size),
            limits.max_buffer_size,
            limits.max_storage_buffer_binding_size
        ));
    }
    if size == 0 {
        size = 256;
        note.push_str(", raised to 256 B");
    }
    (size, note)
}

fn staging_buffer(device: &wgpu::Device, size: u64, label: &str) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

fn prepare(client: Client, test_mode: bool) -> Setup {
    let adapter = match client.adapter_info() {
        Some(info) => format!(
            "{} ({:?}, {:?}, driver {} {})",
            info.name, info.backend, info.device_type, info.driver, info.driver_info
        ),
        None => "unknown adapter".to_string(),
    };
    let (size, size_note) = large_size(&client, test_mode);
    let device = client.device().clone();
    let queue = client.queue().clone();

    let large = client.empty(size).expect("reserve the large handle");
    let large_pattern = pattern(0xA11CE, size);
    client
        .write(&large, 0, &large_pattern)
        .expect("write the large handle");
    let large_resource = client.resource(&large).expect("large handle resource");

    let count = if test_mode {
        SMALL_COUNT_TEST
    } else {
        SMALL_COUNT
    };
    let small_patterns: Vec<Vec<u8>> = (0..count as u32)
        .map(|i| pattern(i + 1, SMALL_SIZE))
        .collect();
    let small: Vec<Handle> = small_patterns
        .iter()
        .map(|p| client.create(p).expect("create a small handle"))
        .collect();
    let small_resources = small
        .iter()
        .map(|h| client.resource(h).expect("small handle resource"))
        .collect();

    let setup = Setup {
        reused_large: staging_buffer(&device, size, "bare reused staging (large)"),
        reused_small: staging_buffer(&device, SMALL_SIZE, "bare reused staging (small)"),
        client,
        device,
        queue,
        adapter,
        size_note,
        large,
        large_resource,
        large_pattern: Vec::new(),
        small,
        small_resources,
    };
    verify(&setup, &large_pattern, &small_patterns);
    Setup {
        large_pattern,
        ..setup
    }
}

/// Every side returns the written patterns (checked once, untimed).
fn verify(setup: &Setup, large_pattern: &[u8], small_patterns: &[Vec<u8>]) {
    let ours = setup.client.read_blocking(&setup.large).expect("our read");
    assert!(
        *ours == *large_pattern,
        "wgpu-memory read_blocking returned other bytes than written"
    );
    drop(ours);
    let bare = bare_read(setup, &setup.large_resource, None);
    assert!(bare == large_pattern, "bare read (new staging) differs");
    let bare = bare_read(setup, &setup.large_resource, Some(&setup.reused_large));
    assert!(bare == large_pattern, "bare read (reused staging) differs");
    drop(bare);

    let refs: Vec<&Handle> = setup.small.iter().collect();
    let ours = setup
        .client
        .read_many_blocking(&refs)
        .expect("our read_many");
    assert_eq!(ours.len(), small_patterns.len());
    for (i, (bytes, expected)) in ours.iter().zip(small_patterns).enumerate() {
        assert!(
            **bytes == **expected,
            "wgpu-memory read_many: handle {i} differs"
        );
    }
    drop(ours);
    for (i, (resource, expected)) in setup.small_resources.iter().zip(small_patterns).enumerate() {
        assert!(
            bare_read(setup, resource, None) == *expected,
            "bare small read (new staging): handle {i} differs"
        );
        assert!(
            bare_read(setup, resource, Some(&setup.reused_small)) == *expected,
            "bare small read (reused staging): handle {i} differs"
        );
    }
    let errors = setup.client.uncaptured_errors();
    assert!(errors.is_empty(), "uncaptured wgpu errors: {errors:?}");
}

// ---------------------------------------------------------------------------------------
// The sides
// ---------------------------------------------------------------------------------------

/// What a caller does with the bytes it got: reads one byte per page.
#[inline(always)]
fn touch(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .step_by(TOUCH_STRIDE)
        .map(|&b| b as u64)
        .sum::<u64>()
        + bytes.last().copied().unwrap_or(0) as u64
}

/// What a caller does that consumes every byte: sums the bytes as 64-bit words.
#[inline(always)]
fn scan(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail: u64 = words.remainder().iter().map(|&b| b as u64).sum();
    words
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .fold(tail, u64::wrapping_add)
}

/// Bare wgpu: copy `source` into a MAP_READ buffer (`staging`, else a new one), submit,
/// map, poll until mapped, copy the mapped bytes into a `Vec`, unmap.
fn bare_read(setup: &Setup, source: &HandleResource, staging: Option<&wgpu::Buffer>) -> Vec<u8> {
    let size = source.size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    let fresh;
    let staging = match staging {
        Some(buffer) => buffer,
        None => {
            fresh = staging_buffer(&setup.device, size, "bare staging");
            &fresh
        }
    };
    let mut encoder = setup
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("bare readback"),
        });
    encoder.copy_buffer_to_buffer(&source.buffer, source.offset, staging, 0, size);
    setup.queue.submit([encoder.finish()]);
    let mapped = Arc::new(Mutex::new(None));
    let slot = mapped.clone();
    let slice = staging.slice(..size);
    slice.map_async(wgpu::MapMode::Read, move |result| {
        *slot.lock().unwrap() = Some(result);
    });
    loop {
        setup
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        if let Some(result) = mapped.lock().unwrap().take() {
            result.expect("map_async");
            break;
        }
    }
    let out = slice.get_mapped_range().expect("mapped range")[..source.size as usize].to_vec();
    staging.unmap();
    out
}

fn ours_large(setup: &Setup) -> u64 {
    let bytes = setup.client.read_blocking(&setup.large).expect("read");
    touch(&bytes)
}

fn ours_large_to_vec(setup: &Setup) -> u64 {
    let bytes = setup.client.read_blocking(&setup.large).expect("read");
    let owned = bytes.to_vec();
    drop(bytes);
    touch(&owned)
}

/// Ours, the caller reading every byte of the view (8 bytes at a time).
fn ours_large_scan(setup: &Setup) -> u64 {
    let bytes = setup.client.read_blocking(&setup.large).expect("read");
    scan(&bytes)
}

/// Reference: reading every byte of ordinary host memory (the same sum as
/// `ours_large_scan`): with `ours_large`'s time, what a scan of the view would cost if
/// the staging memory read like ordinary memory.
fn host_scan(setup: &Setup) -> u64 {
    scan(black_box(&setup.large_pattern))
}

/// Reference: copying the same number of bytes from host memory into a new `Vec`.
fn host_to_vec(setup: &Setup) -> u64 {
    touch(&setup.large_pattern.to_vec())
}

fn bare_large(setup: &Setup, reuse: bool) -> u64 {
    let staging = reuse.then_some(&setup.reused_large);
    touch(&bare_read(setup, &setup.large_resource, staging))
}

fn ours_small(setup: &Setup) -> u64 {
    let refs: Vec<&Handle> = setup.small.iter().collect();
    let parts = setup.client.read_many_blocking(&refs).expect("read_many");
    parts.iter().map(|bytes| touch(bytes)).sum()
}

fn bare_small(setup: &Setup, reuse: bool) -> u64 {
    let staging = reuse.then_some(&setup.reused_small);
    setup
        .small_resources
        .iter()
        .map(|resource| touch(&bare_read(setup, resource, staging)))
        .sum()
}

// ---------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------

/// One call criterion made to a timed routine: seconds per iteration.
struct Timing {
    case: &'static str,
    side: &'static str,
    seconds: f64,
}

/// Every call criterion made, warm-up calls included.
static TIMINGS: Mutex<Vec<Timing>> = Mutex::new(Vec::new());

fn timed(
    case: &'static str,
    side: &'static str,
    iters: u64,
    mut routine: impl FnMut() -> u64,
) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(routine());
    }
    let elapsed = start.elapsed();
    TIMINGS.lock().unwrap().push(Timing {
        case,
        side,
        seconds: elapsed.as_secs_f64() / iters.max(1) as f64,
    });
    elapsed
}

/// Median seconds per iteration of `(case, side)`, and how many calls there were.
fn median_seconds(case: &str, side: &str) -> Option<(f64, usize)> {
    let timings = TIMINGS.lock().unwrap();
    let values: Vec<f64> = timings
        .iter()
        .filter(|t| t.case == case && t.side == side)
        .map(|t| t.seconds)
        .collect();
    let n = values.len();
    median(values).map(|median| (median, n))
}

type Routine = fn(&Setup) -> u64;

fn readback(c: &mut Criterion, setup: Option<&Setup>) {
    let large: [(&'static str, Routine); 7] = [
        (OURS, ours_large),
        (BARE_NEW, |s| bare_large(s, false)),
        (BARE_REUSED, |s| bare_large(s, true)),
        (OURS_SCAN, ours_large_scan),
        (OURS_TO_VEC, ours_large_to_vec),
        (HOST_TO_VEC, host_to_vec),
        (HOST_SCAN, host_scan),
    ];
    let small: [(&'static str, Routine); 3] = [
        (OURS, ours_small),
        (BARE_NEW, |s| bare_small(s, false)),
        (BARE_REUSED, |s| bare_small(s, true)),
    ];
    for (case, routines, bytes) in [
        (LARGE, &large[..], setup.map(Setup::large_bytes)),
        (SMALL, &small[..], setup.map(Setup::small_bytes)),
    ] {
        let mut group = c.benchmark_group(case);
        // Each iteration is long (a whole read, or a whole batch): the same iteration
        // count per sample, instead of criterion's 1, 2, .. n ramp.
        group.sampling_mode(SamplingMode::Flat);
        if let Some(bytes) = bytes {
            group.throughput(Throughput::BytesDecimal(bytes));
        }
        for &(side, routine) in routines {
            group.bench_function(BenchmarkId::from_parameter(side), |b| {
                let setup = setup.expect("benchmarks run only with a device");
                b.iter_custom(|iters| timed(case, side, iters, || routine(setup)))
            });
        }
        group.finish();
    }
}

fn quick() -> bool {
    std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn config() -> Criterion {
    let criterion = Criterion::default().sample_size(10);
    if quick() {
        criterion
            .measurement_time(Duration::from_secs(1))
            .warm_up_time(Duration::from_millis(300))
    } else {
        criterion
            .measurement_time(Duration::from_secs(3))
            .warm_up_time(Duration::from_secs(1))
    }
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

fn human(bytes: u64) -> String {
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= KIB {
        format!("{:.1} KiB", bytes as f64 / KIB as f64)
    } else {
        format!("{bytes} B")
    }
}

fn print_report(setup: &Setup, test_mode: bool) {
    let large_bytes = setup.large_bytes();
    let gbps = |side| median_seconds(LARGE, side).map(|(s, n)| (large_bytes as f64 / s / 1e9, n));
    let ms = |side| median_seconds(SMALL, side).map(|(s, n)| (s * 1e3, n));
    let show = |v: Option<(f64, usize)>, unit: &str| match v {
        Some((v, _)) => format!("{v:.2} {unit}"),
        None => "-".to_string(),
    };
    let h200 = setup.adapter.contains("H200");

    println!();
    println!("## Readback benchmark: wgpu-memory vs bare wgpu");
    println!();
    if test_mode {
        println!("(test mode: reduced sizes, one timed iteration each; not measurements)");
        println!();
    } else if quick() {
        println!("(BENCH_QUICK=1: short criterion measurement)");
        println!();
    }
    println!("Adapter: {}", setup.adapter);
    println!(
        "Large read: {} ({}). Small reads: {} handles of {}. Medians over criterion's \
         calls of elapsed / iterations; GB/s = 10^9 bytes per second delivered to the caller.",
        human(large_bytes),
        setup.size_note,
        setup.small.len(),
        human(SMALL_SIZE)
    );
    println!();
    println!("| adapter | case | ours | bare | ratio | target |");
    println!("|---|---|---:|---:|---:|---|");
    let name = setup
        .client
        .adapter_info()
        .map(|info| info.name.clone())
        .unwrap_or_else(|| "unknown".to_string());
    let large_case = format!("(a) 1 read of {}", human(large_bytes));
    let ours = gbps(OURS);
    for (bare_side, what) in [
        (BARE_NEW, "new staging buffer per read"),
        (BARE_REUSED, "one reused staging buffer"),
    ] {
        let bare = gbps(bare_side);
        let ratio = match (ours, bare) {
            (Some((o, _)), Some((b, _))) => Some(o / b),
            _ => None,
        };
        let mut target = match ratio {
            Some(r) if r >= 3.0 => format!("≥3x: met ({r:.2}x)"),
            Some(r) => format!("≥3x: missed ({r:.2}x)"),
            None => "-".to_string(),
        };
        if let Some((o, _)) = ours {
            if h200 {
                target.push_str(if o >= 40.0 {
                    "; ≥40 GB/s: met"
                } else {
                    "; ≥40 GB/s: missed"
                });
            } else {
                target.push_str("; 40 GB/s: H200 only");
            }
        }
        println!(
            "| {name} | {large_case}, bare = {what} | {} | {} | {} | {target} |",
            show(ours, "GB/s"),
            show(bare, "GB/s"),
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x")),
        );
    }
    let small_case = format!(
        "(b) {} reads of {}, ms per batch",
        setup.small.len(),
        human(SMALL_SIZE)
    );
    let ours = ms(OURS);
    for (bare_side, what) in [
        (BARE_NEW, "new staging buffer + map per read"),
        (BARE_REUSED, "one reused staging buffer, one map per read"),
    ] {
        let bare = ms(bare_side);
        let ratio = match (ours, bare) {
            (Some((o, _)), Some((b, _))) => Some(b / o),
            _ => None,
        };
        println!(
            "| {name} | {small_case}, bare = {what} | {} | {} | {} | {} |",
            show(ours, "ms"),
            show(bare, "ms"),
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x")),
            match ratio {
                Some(r) if r >= 5.0 => format!("≥5x: met ({r:.2}x)"),
                Some(r) => format!("≥5x: missed ({r:.2}x)"),
                None => "-".to_string(),
            }
        );
    }
    println!();
    println!(
        "Reference, (a) {}: what consuming the bytes costs (GB/s delivered; each side \
         includes its read):",
        human(large_bytes)
    );
    println!();
    println!("| side | what the caller does | GB/s |");
    println!("|---|---|---:|");
    for (side, what) in [
        (OURS, "zero-copy view, one byte per 4 KiB touched"),
        (OURS_SCAN, "zero-copy view, every byte read (u64 sum)"),
        (
            OURS_TO_VEC,
            "zero-copy view copied into a new Vec (`to_vec`)",
        ),
        (BARE_REUSED, "bare: mapped range copied into a new Vec"),
        (
            BARE_NEW,
            "bare: new staging buffer, mapped range copied into a new Vec",
        ),
        (
            HOST_TO_VEC,
            "no GPU: the same bytes copied host Vec -> new Vec",
        ),
        (
            HOST_SCAN,
            "no GPU: every byte of host memory read (u64 sum)",
        ),
    ] {
        println!("| {side} | {what} | {} |", show(gbps(side), "GB/s"));
    }
    println!();
    println!("Calls per median:");
    for (case, sides) in [
        (
            LARGE,
            &[
                OURS,
                BARE_NEW,
                BARE_REUSED,
                OURS_SCAN,
                OURS_TO_VEC,
                HOST_TO_VEC,
                HOST_SCAN,
            ][..],
        ),
        (SMALL, &[OURS, BARE_NEW, BARE_REUSED][..]),
    ] {
        let counts: Vec<String> = sides
            .iter()
            .map(|side| {
                let n = median_seconds(case, side).map_or(0, |(_, n)| n);
                format!("{side} {n}")
            })
            .collect();
        println!("- `{case}`: {}", counts.join(", "));
    }
    println!();
    println!("Memory after the run:");
    println!();
    println!("```text");
    print!(
        "{}",
        MemorySummary::new(&setup.client.memory_report()).with_budget(setup.client.budget())
    );
    println!("```");
    let errors = setup.client.uncaptured_errors();
    if !errors.is_empty() {
        println!();
        println!("Uncaptured wgpu errors: {errors:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // Criterion's rule: without `--bench` (cargo test --benches), or with `--test`, it
    // runs each benchmark once as a test.
    let test_mode = !has("--bench") || has("--test");
    let mut criterion = config().configure_from_args();
    if has("--list") {
        readback(&mut criterion, None);
        return;
    }
    let client = match Client::open_default() {
        Ok(client) => client,
        Err(error) => {
            println!("readback bench skipped: no usable wgpu adapter ({error})");
            eprintln!("readback bench skipped: no usable wgpu adapter ({error})");
            return;
        }
    };
    let setup = prepare(client, test_mode);
    eprintln!(
        "readback bench on {}: large read {} ({}), {} small handles of {}; results verified",
        setup.adapter,
        human(setup.large_bytes()),
        setup.size_note,
        setup.small.len(),
        human(SMALL_SIZE)
    );
    readback(&mut criterion, Some(&setup));
    criterion.final_summary();
    print_report(&setup, test_mode);
}
