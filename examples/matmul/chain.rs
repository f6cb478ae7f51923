//! `--layers N`: a chained workload through the pools, shaped like the forward pass of a
//! small MLP without activation functions: `x_{i+1} = x_i · W_i` for `i` in `0..N`, with the
//! hidden size cycling through [`HIDDEN`] so slices of several sizes are reserved and freed.
//!
//! Each layer reserves under the label scope `"layer {i}"`: its weights under
//! `"layer {i}/weights"` (kept, as a model keeps its weights) and its output under
//! `"layer {i}/activations"`. An activation is dropped as soon as the next layer has used
//! it, so its slice is freed and reused. Halfway through, the weights of the first half are
//! dropped (as if handed off) and `client.cleanup()` gives the pages left empty back.
//! The final activation is read back and compared with the same chain computed on the CPU.

use crate::job::{self, Dims};
use wgpu_memory::{Client, Handle};

/// Rows of every activation (the batch).
pub const BATCH: u32 = 64;
/// The hidden sizes the layers cycle through: layer `i` maps `HIDDEN[i % 4]` columns to
/// `HIDDEN[(i + 1) % 4]`.
pub const HIDDEN: [u32; 4] = [256, 512, 128, 384];

/// The first element of the chain's output that differs from the CPU reference:
/// (index, gpu value, cpu value).
pub type Mismatch = (usize, f32, f32);

/// What the chain leaves behind: the handles still live (the weights of the second half of
/// the layers and the final activation), to be dropped after a snapshot, and the outcome of
/// the check.
pub struct Chain {
    /// Handles kept alive so a snapshot taken now shows them.
    pub live: Vec<Handle>,
    /// Elements of the final activation (`BATCH x width`).
    pub elements: usize,
    /// `None` when every element matches the CPU reference.
    pub mismatch: Option<Mismatch>,
}

/// The hidden size before layer `i` (the input width of layer `i`).
pub fn width(i: usize) -> u32 {
    HIDDEN[i % HIDDEN.len()]
}

/// A deterministic pseudo-random value in [-0.5, 0.5) for element `j` of stream `salt`
/// (a splitmix64 step: no periodic pattern for the products to cancel out).
fn noise(j: usize, salt: u64) -> f32 {
    let mut z = (j as u64)
        .wrapping_add(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

/// Deterministic weights of layer `i` (`k x n`, row-major) with a standard deviation of
/// `1/sqrt(k)`, so the activations keep their magnitude from layer to layer.
fn weights(i: usize, k: u32, n: u32) -> Vec<f32> {
    // Uniform on [-0.5, 0.5) has a standard deviation of 1/sqrt(12).
    let scale = 12f32.sqrt() / (k as f32).sqrt();
    (0..(k * n) as usize)
        .map(|j| noise(j, i as u64 + 1) * scale)
        .collect()
}

/// Deterministic input: `BATCH x width(0)` values in [-4, 4), so most outputs are larger
/// than 1 and the check's tolerance is relative for them.
fn input() -> Vec<f32> {
    (0..(BATCH * width(0)) as usize)
        .map(|j| noise(j, 0) * 8.0)
        .collect()
}

/// Runs `layers` chained products on the GPU through `client`'s pools and checks the final
/// activation against the CPU.
pub fn run(client: &Client, layers: usize) -> Result<Chain, Box<dyn std::error::Error>> {
    let mut cpu = input();
    let mut x = {
        let _scope = client.label("input");
        client.create(bytemuck::cast_slice(&cpu))?
    };
    let mut kept: Vec<Handle> = Vec::with_capacity(layers);
    for i in 0..layers {
        let dims = Dims {
            m: BATCH,
            k: width(i),
            n: width(i + 1),
        };
        let w = weights(i, dims.k, dims.n);
        let out = {
            let _layer = client.label(&format!("layer {i}"));
            let weights = {
                let _scope = client.label("weights");
                client.create(bytemuck::cast_slice(&w))?
            };
            let out = {
                let _scope = client.label("activations");
                client.empty(u64::from(dims.m) * u64::from(dims.n) * 4)?
            };
            client.launch(
                &job::kernel(dims),
                job::workgroups(dims),
                &[&x, &weights, &out],
            )?;
            kept.push(weights);
            out
        };
        // The previous activation is used up: dropping it frees its slice for reuse.
        x = out;
        cpu = job::cpu_matmul(dims, &cpu, &w);
        if i + 1 == layers.div_ceil(2) && layers > 1 {
            // Halfway: the first half's weights go, and the pages they leave empty too.
            kept.clear();
            client.cleanup();
        }
    }
    let gpu = job::read_f32(client, &x)?;
    let mismatch = job::first_mismatch(&gpu, &cpu);
    kept.push(x);
    Ok(Chain {
        live: kept,
        elements: cpu.len(),
        mismatch,
    })
}
