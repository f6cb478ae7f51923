//! The main job at small sizes, against the CPU reference.

#[path = "../../examples/matmul/job.rs"]
#[allow(dead_code)]
mod job;

use crate::device::shared;
use job::Dims;

fn check(dims: Dims) {
    let Some(client) = shared() else { return };
    let (a, b) = job::inputs(dims);
    let gpu = job::gpu_matmul(&client, dims, &a, &b).unwrap();
    let cpu = job::cpu_matmul(dims, &a, &b);
    assert_eq!(gpu.len(), (dims.m * dims.n) as usize);
    assert_eq!(job::first_mismatch(&gpu, &cpu), None);
}

#[test]
fn matmul_64_96_80_matches_cpu() {
    check(Dims {
        m: 64,
        k: 96,
        n: 80,
    });
}

/// Sizes that are not multiples of the 64-wide block.
#[test]
fn matmul_off_tile_sizes_match_cpu() {
    check(Dims {
        m: 129,
        k: 67,
        n: 35,
    });
}

/// The check itself finds a wrong element.
#[test]
fn mismatch_is_reported_with_its_index() {
    let cpu = vec![1.0f32, 2.0, 3.0];
    let gpu = vec![1.0f32, 2.5, 3.0];
    assert_eq!(job::first_mismatch(&gpu, &cpu), Some((1, 2.5, 2.0)));
}
