//! A training-like loop reaches a steady state: once warm, it makes no page in any memory,
//! and what it reserves stays near what it reserved early on.

use crate::device::fresh;
use std::collections::HashSet;
use wgpu_memory::{Client, Handle, Kernel};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const STEPS: usize = 400;

/// A tiny deterministic generator (no timing, the same run every time).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `y = x * 1.5 + 1`, elementwise.
fn kernel() -> Kernel {
    Kernel::new(
        "step",
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
         @group(0) @binding(1) var<storage, read_write> y: array<f32>;
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
             if (i.x < arrayLength(&y)) { y[i.x] = x[i.x] * 1.5 + 1.0; }
         }",
        "main",
    )
}

/// `loss[0] = x[0]`.
fn loss_kernel() -> Kernel {
    Kernel::new(
        "loss",
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
         @group(0) @binding(1) var<storage, read_write> loss: array<f32>;
         @compute @workgroup_size(1) fn main() { loss[0] = x[0]; }",
        "main",
    )
}

/// The ids of every page every memory of `client` holds now, by memory name.
fn pages(client: &Client) -> HashSet<(String, u64)> {
    let snapshot = client.memory_snapshot();
    snapshot
        .memories
        .iter()
        .flat_map(|memory| {
            memory.pools.iter().flat_map(move |pool| {
                pool.pages
                    .iter()
                    .map(move |page| (memory.name.clone(), page.id))
            })
        })
        .collect()
}

/// One step: a batch of `size` bytes uploaded, four kernels through temporaries of its
/// size, four bytes of the last copied to a handle of their own and read back, every handle dropped.
fn step(client: &Client, kernels: &[Kernel; 2], size: u64, seed: u64) -> f32 {
    let [kernel, loss_kernel] = kernels;
    let values: Vec<f32> = (0..size / 4).map(|i| ((i + seed) % 7) as f32).collect();
    let mut x: Handle = client.create(bytemuck::cast_slice(&values)).unwrap();
    let groups = (size / 4).div_ceil(64) as u32;
    for _ in 0..4 {
        let y = client.empty(size).unwrap();
        client.launch(kernel, [groups, 1, 1], &[&x, &y]).unwrap();
        x = y;
    }
    let loss = client.empty(4).unwrap();
    client.launch(loss_kernel, [1, 1, 1], &[&x, &loss]).unwrap();
    let bytes = client.read_blocking(&loss).unwrap();
    bytemuck::cast_slice::<u8, f32>(&bytes)[0]
}

/// 400 steps of batches of 256 KiB-2 MiB: no page is made in the last 200 steps, and
/// reserved there stays within 1.1 times step 50's plus 4 MiB.
#[test]
fn a_warm_training_loop_makes_no_page() {
    let Some(client) = fresh() else { return };
    let kernels = [kernel(), loss_kernel()];
    let mut state = 0x5eed_1234_abcd_0001u64;
    let mut seen = pages(&client);
    let (mut at_50, mut late_max) = (0u64, 0u64);
    let mut late_pages = Vec::new();
    for at in 0..STEPS {
        let size = (256 * KIB + next(&mut state) % (2 * MIB - 256 * KIB)) & !3;
        let seed = at as u64;
        let got = step(&client, &kernels, size, seed);
        // x0 = seed % 7; four times x * 1.5 + 1.
        let expected = (0..4).fold((seed % 7) as f32, |x, _| x * 1.5 + 1.0);
        assert_eq!(got, expected, "step {at}");
        let now = pages(&client);
        for page in now.difference(&seen) {
            if at >= STEPS / 2 {
                late_pages.push((at, page.clone()));
            }
        }
        seen.extend(now);
        let held = client.budget().held;
        if at == 50 {
            at_50 = held;
        }
        if at >= STEPS / 2 {
            late_max = late_max.max(held);
        }
    }
    eprintln!(
        "held at step 50: {:.1} MiB, most after step 200: {:.1} MiB, pages made late: {late_pages:?}",
        at_50 as f64 / MIB as f64,
        late_max as f64 / MIB as f64
    );
    assert!(
        late_pages.is_empty(),
        "pages made once warm: {late_pages:?}"
    );
    assert!(
        late_max <= at_50 + at_50 / 10 + 4 * MIB,
        "held {late_max} bytes late, {at_50} at step 50"
    );
}
