//! The example page's job: C = A * B (f32) through a client's pools with the tiled
//! kernel of `shaders/matmul.wgsl`, every element checked against a CPU reference, and
//! the memory shown as text and pictures.

use crate::gpu::Gpu;
use web_time::Instant;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::{MemorySnapshot, TopLabels};
use wgpu_memory::{Client, Handle, Kernel};

/// The WGSL of the tiled kernel (without the size constants), the native example's own.
const MATMUL_WGSL: &str = include_str!("../../shaders/matmul.wgsl");
/// Rows and columns of C computed by one workgroup of the kernel.
const BLOCK: u32 = 64;
/// The relative tolerance of the check: |gpu - cpu| <= RTOL * max(|cpu|, 1).
const RTOL: f64 = 1e-4;
/// History events kept for the timeline (bounded: the ring drops the oldest past it).
const HISTORY_EVENTS: usize = 10_000;
/// Labels the pictures name one by one; the rest are drawn as "other".
const TOP_LABELS: usize = 12;
/// The largest M, K or N the page accepts: the CPU reference is O(M * K * N).
pub const MAX_SIZE: u32 = 4096;

/// Matrix sizes: A is `m x k`, B is `k x n`, C is `m x n`.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub m: u32,
    pub k: u32,
    pub n: u32,
}

/// What the page shows of one run.
pub struct MatmulOutcome {
    /// The adapter in words.
    pub adapter: String,
    /// "all N elements match ..." (a mismatch is an error instead).
    pub check: String,
    /// The times, in words.
    pub timing: String,
    /// `client.memory_summary()` while A, B and C are live.
    pub summary: String,
    /// The memory timeline (SVG), after the handles were dropped and a cleanup.
    pub timeline_svg: String,
    /// The page map (SVG) while A, B and C are live.
    pub pages_svg: String,
}

/// Deterministic inputs with values in [-0.5, 0.5]: A and B, row-major.
fn inputs(dims: Dims) -> (Vec<f32>, Vec<f32>) {
    let value = |i: usize, salt: usize| ((i * 7919 + salt) % 1021) as f32 / 1021.0 - 0.5;
    let a = (0..dims.m as usize * dims.k as usize)
        .map(|i| value(i, 17))
        .collect();
    let b = (0..dims.k as usize * dims.n as usize)
        .map(|i| value(i, 503))
        .collect();
    (a, b)
}

/// C = A * B on the CPU, accumulated in f64.
fn cpu_matmul(dims: Dims, a: &[f32], b: &[f32]) -> Vec<f32> {
    let (m, k, n) = (dims.m as usize, dims.k as usize, dims.n as usize);
    let mut c = vec![0f32; m * n];
    let mut acc = vec![0f64; n];
    for row in 0..m {
        acc.iter_mut().for_each(|value| *value = 0.0);
        for i in 0..k {
            let lhs = a[row * k + i] as f64;
            for (out, &rhs) in acc.iter_mut().zip(&b[i * n..(i + 1) * n]) {
                *out += lhs * rhs as f64;
            }
        }
        for (out, &value) in c[row * n..(row + 1) * n].iter_mut().zip(&acc) {
            *out = value as f32;
        }
    }
    c
}

/// The kernel for these sizes (the sizes are constants of the shader).
fn kernel(dims: Dims) -> Kernel {
    let source = format!(
        "const M: u32 = {}u;\nconst K: u32 = {}u;\nconst N: u32 = {}u;\n{MATMUL_WGSL}",
        dims.m, dims.k, dims.n
    );
    Kernel::new(
        format!("matmul {}x{}x{}", dims.m, dims.k, dims.n),
        source,
        "main",
    )
}

/// The workgroups that cover C.
fn workgroups(dims: Dims) -> [u32; 3] {
    [dims.n.div_ceil(BLOCK), dims.m.div_ceil(BLOCK), 1]
}

/// The first element outside the tolerance, in words.
fn mismatch(gpu: &[f32], cpu: &[f32], dims: Dims) -> Option<String> {
    if gpu.len() != cpu.len() {
        return Some(format!(
            "the GPU gave {} elements, the CPU reference {}",
            gpu.len(),
            cpu.len()
        ));
    }
    let (index, g, c) = gpu.iter().zip(cpu).enumerate().find_map(|(i, (&g, &c))| {
        let bound = RTOL * (c.abs() as f64).max(1.0);
        (((g - c).abs() as f64) > bound).then_some((i, g, c))
    })?;
    let (row, col) = (index / dims.n as usize, index % dims.n as usize);
    Some(format!(
        "MISMATCH at index {index} (row {row}, col {col}): gpu {g} vs cpu {c}"
    ))
}

/// Reads `handle` back as f32.
async fn read_f32(client: &Client, handle: &Handle) -> Result<Vec<f32>, String> {
    let bytes = client
        .read(handle)
        .await
        .map_err(|error| format!("reading C back: {error}"))?;
    Ok(bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect())
}

/// Milliseconds since `start`.
fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// One product through the pools: uploads A and B, launches the kernel, reads C back.
/// Returns C and the handles (still live).
async fn product(
    client: &Client,
    dims: Dims,
    a: &[f32],
    b: &[f32],
    kernel: &Kernel,
) -> Result<(Vec<f32>, [Handle; 3]), String> {
    let (lhs, rhs) = {
        let _scope = client.label("inputs");
        let lhs = client
            .create(bytemuck::cast_slice(a))
            .map_err(|error| format!("uploading A: {error}"))?;
        let rhs = client
            .create(bytemuck::cast_slice(b))
            .map_err(|error| format!("uploading B: {error}"))?;
        (lhs, rhs)
    };
    let out = {
        let _scope = client.label("output");
        client
            .empty(dims.m as u64 * dims.n as u64 * 4)
            .map_err(|error| format!("reserving C: {error}"))?
    };
    client
        .launch(kernel, workgroups(dims), &[&lhs, &rhs, &out])
        .map_err(|error| format!("launching the kernel: {error}"))?;
    let c = read_f32(client, &out).await?;
    Ok((c, [lhs, rhs, out]))
}

/// Runs the job on `gpu`: a first product (it compiles the pipeline), a second one
/// timed, both checked against the CPU; the summary and pictures of the memory.
///
/// # Errors
/// A message naming the step that failed, or the first mismatching element.
pub async fn run(gpu: Gpu, dims: Dims) -> Result<MatmulOutcome, String> {
    for (name, size) in [("M", dims.m), ("K", dims.k), ("N", dims.n)] {
        if size == 0 || size > MAX_SIZE {
            return Err(format!(
                "{name} = {size}: sizes go from 1 to {MAX_SIZE} (the CPU reference checks \
                 every element)"
            ));
        }
    }
    let adapter = gpu.describe();
    let client = Client::new(gpu.device, gpu.queue);
    client.record_history(HISTORY_EVENTS);
    let (a, b) = inputs(dims);
    let kernel = kernel(dims);

    let started = Instant::now();
    let (first, handles) = {
        let _scope = client.label("first run");
        product(&client, dims, &a, &b, &kernel).await?
    };
    let first_ms = ms_since(started);
    drop(handles);

    let started = Instant::now();
    let (second, handles) = {
        let _scope = client.label("second run");
        product(&client, dims, &a, &b, &kernel).await?
    };
    let second_ms = ms_since(started);
    let summary = client.memory_summary();
    let pages = client.memory_snapshot();
    drop(handles);

    let started = Instant::now();
    let cpu = cpu_matmul(dims, &a, &b);
    let cpu_ms = ms_since(started);
    for (name, gpu_c) in [("first run", &first), ("second run", &second)] {
        if let Some(message) = mismatch(gpu_c, &cpu, dims) {
            return Err(format!("{name}: {message}"));
        }
    }
    let check = format!(
        "check: all {} elements match the CPU reference, in both runs (relative tolerance {RTOL})",
        cpu.len()
    );
    let flops = 2.0 * dims.m as f64 * dims.k as f64 * dims.n as f64;
    let timing = format!(
        "{} x {} times {} x {}: first run {first_ms:.1} ms (compiles the pipeline), second \
         run {second_ms:.1} ms, each upload + launch + read back ({:.2} GFLOP/s end to \
         end); CPU reference {cpu_ms:.1} ms",
        dims.m,
        dims.k,
        dims.k,
        dims.n,
        flops / (second_ms.max(1e-3) * 1e6)
    );

    let released = client.cleanup();
    client
        .sync_async()
        .await
        .map_err(|error| format!("waiting for the device: {error}"))?;
    let timeline = client.memory_snapshot();
    let timing = format!(
        "{timing}; the cleanup after it gave back {} in {} pages",
        format_bytes(released.bytes_given_back()),
        released.pages_given_back()
    );
    Ok(MatmulOutcome {
        adapter,
        check,
        timing,
        summary,
        timeline_svg: draw_timeline(&timeline),
        pages_svg: draw_pages(&pages),
    })
}

/// The labels the pictures of `snapshot` name.
fn labels(snapshot: &MemorySnapshot) -> TopLabels {
    let depth = TopLabels::fitting_depth(snapshot, TOP_LABELS);
    TopLabels::from_snapshot(snapshot, TOP_LABELS, depth)
}

/// The timeline of `snapshot`, as `examples/memory_viz` draws it.
fn draw_timeline(snapshot: &MemorySnapshot) -> String {
    crate::timeline_svg::render(snapshot, &labels(snapshot), None)
}

/// The page map of `snapshot`, as `examples/memory_viz` draws it.
fn draw_pages(snapshot: &MemorySnapshot) -> String {
    crate::pages_svg::render(snapshot, &labels(snapshot), None)
}
