//! The web bench: wgpu-memory against bare wgpu on the same WebGPU device, in one run.
//!
//! Each case runs once to warm up (pipelines, pools, the browser's own caches), then
//! [`REPS`] times per side, the sides taking turns first; the table gives the median
//! wall time per side (`performance.now()`, through `web_time`) and the ratio bare / ours
//! (above 1: ours is faster). Every read's bytes are checked on both sides.
//!
//! - small reads: [`SMALL_READS`] buffers of [`SMALL_READ`] bytes read back at once.
//!   Ours: one `read_many` (one staging buffer, one submit, one `mapAsync`). Bare: a
//!   staging buffer and a `mapAsync` per buffer, all copies in one submit, every map
//!   awaited together, each staging buffer unmapped and destroyed after.
//! - reads one by one: [`SERIAL_READS`] of those buffers, each read awaited before the
//!   next (ours: `read`; bare: a staging buffer, a submit and a map per read).
//! - churn: [`CHURN_TENSORS`] tensors of mixed sizes ([`CHURN_SIZES`]) created with
//!   their bytes and dropped, [`CHURN_LIVE`] live at a time, then a wait for the device.
//!   Ours: `create` and drop (pooled slices). Bare: `create_buffer`, `write_buffer` and
//!   `destroy` per tensor.
//! - round trip: [`ROUND_TRIP`] bytes uploaded and read back. Ours: `create` then
//!   `read`. Bare: `create_buffer` + `write_buffer`, a staging buffer, a copy, one map.

use crate::gpu::{Gpu, map_all, work_done};
use std::collections::VecDeque;
use web_time::Instant;
use wgpu_memory::{Client, Handle};

/// Timed repetitions per case and side (after one warm-up of each).
pub const REPS: usize = 9;
/// Buffers read at once in the small-reads case.
pub const SMALL_READS: usize = 1000;
/// Bytes of each small read.
pub const SMALL_READ: u64 = 4096;
/// Reads awaited one by one.
pub const SERIAL_READS: usize = 100;
/// Tensors created and dropped per repetition of the churn.
pub const CHURN_TENSORS: usize = 300;
/// Tensors of the churn alive at a time.
pub const CHURN_LIVE: usize = 8;
/// The churn's tensor sizes in bytes, in turn.
pub const CHURN_SIZES: [u64; 8] = [
    4 << 10,
    64 << 10,
    1 << 10,
    256 << 10,
    16 << 10,
    1 << 20,
    8 << 10,
    128 << 10,
];
/// Bytes of the round trip.
pub const ROUND_TRIP: u64 = 64 << 20;

/// Usages of a bare tensor buffer (what the client's main memory uses too).
const TENSOR_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);
/// Usages of a bare staging buffer.
const STAGING_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);

/// One case's medians.
pub struct Row {
    pub case: String,
    pub ours_ms: f64,
    pub bare_ms: f64,
}

/// What the page shows of the bench.
pub struct BenchOutcome {
    /// The adapter in words.
    pub adapter: String,
    /// The cases, in order.
    pub rows: Vec<Row>,
    /// Wall time of the whole bench, set-up included, in ms.
    pub total_ms: f64,
}

impl BenchOutcome {
    /// The table in markdown: ms per case for both sides and the ratio bare / ours.
    pub fn markdown(&self) -> String {
        let mut table = String::from(
            "| case | wgpu-memory (ms) | bare wgpu (ms) | bare / ours |\n|---|---:|---:|---:|\n",
        );
        for row in &self.rows {
            table.push_str(&format!(
                "| {} | {:.2} | {:.2} | {:.2}x |\n",
                row.case,
                row.ours_ms,
                row.bare_ms,
                row.bare_ms / row.ours_ms.max(1e-6)
            ));
        }
        table
    }
}

/// The median of `times` (ms).
fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    let middle = times.len() / 2;
    if times.len() % 2 == 1 {
        times[middle]
    } else {
        (times[middle - 1] + times[middle]) / 2.0
    }
}

/// Bytes whose every u32 word is `value`.
fn words(value: u32, bytes: u64) -> Vec<u8> {
    (0..bytes / 4).flat_map(|_| value.to_le_bytes()).collect()
}

/// Checks that `bytes` are `expected`'s, in words naming `what` when not.
fn check(what: &str, bytes: &[u8], expected: &[u8]) -> Result<(), String> {
    if bytes.len() != expected.len() {
        return Err(format!(
            "{what}: read {} bytes, wrote {}",
            bytes.len(),
            expected.len()
        ));
    }
    match bytes.iter().zip(expected).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(at) => Err(format!(
            "{what}: byte {at} reads {}, was written {}",
            bytes[at], expected[at]
        )),
    }
}

/// Times one call of `work` in ms.
async fn timed<F: Future<Output = Result<(), String>>>(work: F) -> Result<f64, String> {
    let start = Instant::now();
    work.await?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Runs one case: a warm-up of each side, then [`REPS`] timed runs of each, the sides
/// taking turns first.
async fn case<O, OF, B, BF>(case: &str, mut ours: O, mut bare: B) -> Result<Row, String>
where
    O: FnMut() -> OF,
    OF: Future<Output = Result<(), String>>,
    B: FnMut() -> BF,
    BF: Future<Output = Result<(), String>>,
{
    let with_case = |error: String| format!("{case}: {error}");
    crate::progress(&format!("bench: {case}: warm-up"));
    ours().await.map_err(with_case)?;
    bare().await.map_err(with_case)?;
    let (mut ours_ms, mut bare_ms) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        if rep % 2 == 0 {
            ours_ms.push(timed(ours()).await.map_err(with_case)?);
            bare_ms.push(timed(bare()).await.map_err(with_case)?);
        } else {
            bare_ms.push(timed(bare()).await.map_err(with_case)?);
            ours_ms.push(timed(ours()).await.map_err(with_case)?);
        }
        crate::progress(&format!(
            "bench: {case}: run {} of {REPS}: ours {:.2} ms, bare {:.2} ms",
            rep + 1,
            ours_ms[rep],
            bare_ms[rep]
        ));
    }
    Ok(Row {
        case: case.to_string(),
        ours_ms: median(ours_ms),
        bare_ms: median(bare_ms),
    })
}

/// The bare side's tensors: one buffer each, written through the queue.
fn bare_buffers(gpu: &Gpu, contents: &[Vec<u8>]) -> Vec<wgpu::Buffer> {
    contents
        .iter()
        .map(|bytes| {
            let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("bare tensor"),
                size: bytes.len() as u64,
                usage: TENSOR_USAGE,
                mapped_at_creation: false,
            });
            gpu.queue.write_buffer(&buffer, 0, bytes);
            buffer
        })
        .collect()
}

/// Bare wgpu's readback of `sources`: a staging buffer each, the copies in one submit,
/// every map awaited together; checks each against `expected`, then unmaps and
/// destroys the staging buffers.
async fn bare_read(
    gpu: &Gpu,
    sources: &[wgpu::Buffer],
    expected: &[impl AsRef<[u8]>],
) -> Result<(), String> {
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let staging: Vec<wgpu::Buffer> = sources
        .iter()
        .map(|source| {
            let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("bare staging"),
                size: source.size(),
                usage: STAGING_USAGE,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(source, 0, &staging, 0, source.size());
            staging
        })
        .collect();
    gpu.queue.submit([encoder.finish()]);
    map_all(&staging).await?;
    for (i, (buffer, expected)) in staging.iter().zip(expected).enumerate() {
        {
            let view = buffer
                .get_mapped_range(..)
                .map_err(|error| format!("bare read {i}: {error}"))?;
            check(&format!("bare read {i}"), &view, expected.as_ref())?;
        }
        buffer.unmap();
        buffer.destroy();
    }
    Ok(())
}

/// Ours: reads `handles` with one `read_many` and checks each against `expected`.
async fn ours_read_many(
    client: &Client,
    handles: &[Handle],
    expected: &[impl AsRef<[u8]>],
) -> Result<(), String> {
    let refs: Vec<&Handle> = handles.iter().collect();
    let read = client
        .read_many(&refs)
        .await
        .map_err(|error| format!("read_many: {error}"))?;
    for (i, (bytes, expected)) in read.iter().zip(expected).enumerate() {
        check(&format!("read {i}"), bytes, expected.as_ref())?;
    }
    Ok(())
}

/// Ours: each of `handles` read and awaited before the next.
async fn ours_read_each(
    client: &Client,
    handles: &[Handle],
    expected: &[impl AsRef<[u8]>],
) -> Result<(), String> {
    for (i, (handle, expected)) in handles.iter().zip(expected).enumerate() {
        let bytes = client
            .read(handle)
            .await
            .map_err(|error| format!("read {i}: {error}"))?;
        check(&format!("read {i}"), &bytes, expected.as_ref())?;
    }
    Ok(())
}

/// Bare: each of `sources` read and awaited before the next.
async fn bare_read_each(
    gpu: &Gpu,
    sources: &[wgpu::Buffer],
    expected: &[impl AsRef<[u8]>],
) -> Result<(), String> {
    for (source, expected) in sources.iter().zip(expected) {
        bare_read(
            gpu,
            std::slice::from_ref(source),
            std::slice::from_ref(expected),
        )
        .await?;
    }
    Ok(())
}

/// Ours: the churn through the pools.
async fn ours_churn(client: &Client, data: &[u8]) -> Result<(), String> {
    let mut live = VecDeque::with_capacity(CHURN_LIVE + 1);
    for i in 0..CHURN_TENSORS {
        let size = CHURN_SIZES[i % CHURN_SIZES.len()] as usize;
        let handle = client
            .create(&data[..size])
            .map_err(|error| format!("create {i} ({size} bytes): {error}"))?;
        live.push_back(handle);
        if live.len() > CHURN_LIVE {
            live.pop_front();
        }
    }
    drop(live);
    client
        .sync_async()
        .await
        .map_err(|error| format!("sync_async: {error}"))
}

/// Bare: the churn with a buffer per tensor, destroyed when dropped.
async fn bare_churn(gpu: &Gpu, data: &[u8]) -> Result<(), String> {
    let mut live = VecDeque::with_capacity(CHURN_LIVE + 1);
    for i in 0..CHURN_TENSORS {
        let size = CHURN_SIZES[i % CHURN_SIZES.len()];
        let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bare tensor"),
            size,
            usage: TENSOR_USAGE,
            mapped_at_creation: false,
        });
        gpu.queue.write_buffer(&buffer, 0, &data[..size as usize]);
        live.push_back(buffer);
        if live.len() > CHURN_LIVE
            && let Some(old) = live.pop_front()
        {
            old.destroy();
        }
    }
    for buffer in live {
        buffer.destroy();
    }
    work_done(&gpu.queue).await;
    Ok(())
}

/// Ours: the round trip through the pools.
async fn ours_round_trip(client: &Client, data: &[u8]) -> Result<(), String> {
    let handle = client
        .create(data)
        .map_err(|error| format!("create: {error}"))?;
    let bytes = client
        .read(&handle)
        .await
        .map_err(|error| format!("read: {error}"))?;
    check("round trip", &bytes, data)
}

/// Bare: the round trip with a buffer, a staging buffer and one map.
async fn bare_round_trip(gpu: &Gpu, data: &[u8]) -> Result<(), String> {
    let source = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bare round trip"),
        size: data.len() as u64,
        usage: TENSOR_USAGE,
        mapped_at_creation: false,
    });
    gpu.queue.write_buffer(&source, 0, data);
    let read = bare_read(gpu, std::slice::from_ref(&source), &[data]).await;
    source.destroy();
    read
}

/// Runs every case on `gpu`, ours through a client over the same device.
///
/// # Errors
/// A message naming the case and the step that failed (a wrong byte included).
pub async fn run(gpu: Gpu) -> Result<BenchOutcome, String> {
    let started = Instant::now();
    let client = Client::new(gpu.device.clone(), gpu.queue.clone());
    let mut rows = Vec::new();
    crate::progress("bench: creating the small tensors");

    let contents: Vec<Vec<u8>> = (0..SMALL_READS as u32)
        .map(|i| words(i + 1, SMALL_READ))
        .collect();
    let handles = contents
        .iter()
        .map(|bytes| client.create(bytes))
        .collect::<Result<Vec<Handle>, _>>()
        .map_err(|error| format!("creating the small tensors: {error}"))?;
    let buffers = bare_buffers(&gpu, &contents);
    rows.push(
        case(
            &format!("{SMALL_READS} reads of {} KiB at once", SMALL_READ >> 10),
            || ours_read_many(&client, &handles, &contents),
            || bare_read(&gpu, &buffers, &contents),
        )
        .await?,
    );
    rows.push(
        case(
            &format!(
                "{SERIAL_READS} reads of {} KiB, one after another",
                SMALL_READ >> 10
            ),
            || ours_read_each(&client, &handles[..SERIAL_READS], &contents),
            || bare_read_each(&gpu, &buffers[..SERIAL_READS], &contents),
        )
        .await?,
    );
    drop(handles);
    buffers.iter().for_each(wgpu::Buffer::destroy);
    drop(buffers);

    let largest = CHURN_SIZES.iter().copied().max().unwrap_or(0);
    let churn_data: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    rows.push(
        case(
            &format!("churn: {CHURN_TENSORS} tensors of 1 KiB to 1 MiB, created and dropped"),
            || ours_churn(&client, &churn_data),
            || bare_churn(&gpu, &churn_data),
        )
        .await?,
    );

    let trip: Vec<u8> = (0..ROUND_TRIP).map(|i| (i % 253) as u8).collect();
    rows.push(
        case(
            &format!(
                "round trip of {} MiB (upload + read back)",
                ROUND_TRIP >> 20
            ),
            || ours_round_trip(&client, &trip),
            || bare_round_trip(&gpu, &trip),
        )
        .await?,
    );
    Ok(BenchOutcome {
        adapter: gpu.describe(),
        rows,
        total_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}
