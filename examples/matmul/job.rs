//! The matmul job: inputs, the GPU product through a client's pools, the CPU reference
//! and the element-by-element check. Shared by the example and the tests.

use wgpu_memory::{Client, ClientError, Handle, Kernel};

/// The WGSL of the tiled kernel (without the size constants).
pub const MATMUL_WGSL: &str = include_str!("../../shaders/matmul.wgsl");
/// Rows and columns of C computed by one workgroup.
pub const BLOCK: u32 = 64;
/// The relative tolerance of the check: |gpu - cpu| <= RTOL * max(|cpu|, 1).
pub const RTOL: f64 = 1e-4;

/// Matrix sizes: A is `m x k`, B is `k x n`, C is `m x n`.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub m: u32,
    pub k: u32,
    pub n: u32,
}

/// Deterministic inputs with values in [-0.5, 0.5]: A and B, row-major.
pub fn inputs(dims: Dims) -> (Vec<f32>, Vec<f32>) {
    let value = |i: usize, salt: usize| ((i * 7919 + salt) % 1021) as f32 / 1021.0 - 0.5;
    let a = (0..(dims.m * dims.k) as usize)
        .map(|i| value(i, 17))
        .collect();
    let b = (0..(dims.k * dims.n) as usize)
        .map(|i| value(i, 503))
        .collect();
    (a, b)
}

/// C = A * B on the CPU, accumulated in f64.
pub fn cpu_matmul(dims: Dims, a: &[f32], b: &[f32]) -> Vec<f32> {
    let (m, k, n) = (dims.m as usize, dims.k as usize, dims.n as usize);
    let mut c = vec![0f32; m * n];
    for row in 0..m {
        let mut acc = vec![0f64; n];
        for i in 0..k {
            let lhs = a[row * k + i] as f64;
            for (col, out) in acc.iter_mut().enumerate() {
                *out += lhs * b[i * n + col] as f64;
            }
        }
        for (col, value) in acc.into_iter().enumerate() {
            c[row * n + col] = value as f32;
        }
    }
    c
}

/// The kernel for these sizes (sizes are compile-time constants of the shader).
pub fn kernel(dims: Dims) -> Kernel {
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
pub fn workgroups(dims: Dims) -> [u32; 3] {
    [dims.n.div_ceil(BLOCK), dims.m.div_ceil(BLOCK), 1]
}

/// Uploads A and B into the client's pools and returns (A, B, C) handles.
pub fn upload(
    client: &Client,
    dims: Dims,
    a: &[f32],
    b: &[f32],
) -> Result<(Handle, Handle, Handle), ClientError> {
    let lhs = client.create(bytemuck::cast_slice(a))?;
    let rhs = client.create(bytemuck::cast_slice(b))?;
    let out = client.empty(dims.m as u64 * dims.n as u64 * 4)?;
    Ok((lhs, rhs, out))
}

/// Reads C back as f32.
pub fn read_f32(client: &Client, handle: &Handle) -> Result<Vec<f32>, ClientError> {
    let bytes = client.read_blocking(handle)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect())
}

/// The first element outside the tolerance: (index, gpu value, cpu value).
pub fn first_mismatch(gpu: &[f32], cpu: &[f32]) -> Option<(usize, f32, f32)> {
    if gpu.len() != cpu.len() {
        return Some((gpu.len().min(cpu.len()), f32::NAN, f32::NAN));
    }
    gpu.iter().zip(cpu).enumerate().find_map(|(i, (&g, &c))| {
        let bound = RTOL * (c.abs() as f64).max(1.0);
        let close = ((g - c).abs() as f64) <= bound;
        (!close).then_some((i, g, c))
    })
}

/// Runs the whole job once: upload, launch, read back; returns C from the GPU.
pub fn gpu_matmul(
    client: &Client,
    dims: Dims,
    a: &[f32],
    b: &[f32],
) -> Result<Vec<f32>, ClientError> {
    let (lhs, rhs, out) = upload(client, dims, a, b)?;
    client.launch(&kernel(dims), workgroups(dims), &[&lhs, &rhs, &out])?;
    read_f32(client, &out)
}
