//! The main job at small sizes, against the CPU reference.

use crate::device::{fresh, shared};
use crate::job::{self, Dims};
use wgpu_memory::report::{EventKind, MAIN_MEMORY};

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

/// The main job's `--layers` chain checks against the CPU; with history on, the snapshot
/// after it shows the live weights of the second half under their layer labels, and the
/// history holds the cleanup that gave the first half's pages back.
#[test]
fn the_layer_chain_matches_cpu_and_its_snapshot_shows_the_layers() {
    let Some(client) = fresh() else { return };
    client.record_history(100_000);
    let chain = crate::chain::run(&client, 6).unwrap();
    assert_eq!(chain.mismatch, None);
    let snapshot = client.memory_snapshot();
    snapshot.check().unwrap();
    snapshot.check_report().unwrap();
    let labels: std::collections::BTreeSet<String> = snapshot
        .memory(MAIN_MEMORY)
        .unwrap()
        .pools
        .iter()
        .flat_map(|pool| &pool.pages)
        .flat_map(|page| &page.slices)
        .filter_map(|slice| slice.label.clone())
        .collect();
    for layer in 3..6 {
        assert!(
            labels.contains(&format!("layer {layer}/weights")),
            "{labels:?}"
        );
    }
    assert!(!labels.contains("layer 0/weights"), "{labels:?}");
    assert!(
        snapshot
            .history
            .iter()
            .any(|event| event.kind == EventKind::Cleanup)
    );
    drop(chain);
}

/// The main job's 12-layer chain after its 128 x 128 product, as `cargo run --example
/// matmul -- --layers 12 128 128 128` runs it: the most bytes held at once over every
/// memory (main pages, upload and readback staging) stay within twice the most bytes in
/// use. What keeps it there: the upload staging a write finds in flight counts the
/// write's own bytes before its page is made, and a page that raises the main memory's
/// high-water mark first takes back the small-slice page the product left empty.
#[test]
fn the_main_job_holds_at_most_twice_its_peak_in_use() {
    let Some(client) = fresh() else { return };
    client.record_history(100_000);
    let dims = Dims {
        m: 128,
        k: 128,
        n: 128,
    };
    let (a, b) = job::inputs(dims);
    job::gpu_matmul(&client, dims, &a, &b).unwrap();
    let timed = job::upload(&client, dims, &a, &b).unwrap();
    client
        .launch(
            &job::kernel(dims),
            job::workgroups(dims),
            &[&timed.0, &timed.1, &timed.2],
        )
        .unwrap();
    job::read_f32(&client, &timed.2).unwrap();
    drop(timed);
    let chain = crate::chain::run(&client, 12).unwrap();
    assert_eq!(chain.mismatch, None);
    let (in_use, reserved) = crate::peaks::peaks(&client.memory_snapshot().history);
    assert!(in_use > 2 << 20, "the chain's weights: {in_use} B");
    assert!(
        reserved <= 2 * in_use,
        "{reserved} B held at most for {in_use} B in use at most ({:.2}x)",
        reserved as f64 / in_use as f64
    );
    drop(chain);
}
