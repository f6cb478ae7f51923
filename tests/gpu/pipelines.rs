//! The pipeline cache (issue 11, Tests 7): the fault "the pipeline cache is keyed by a
//! per-`Kernel` id and never shrinks: 2000 `Kernel::new` of the same source add 148 MiB".
//! Pipelines are keyed by shader source and entry point, so 2000 kernels made from one
//! source share one pipeline, and every one of their launches still runs.

use crate::device::fresh;
use crate::kernels::{ADD_ONE, groups_for};
use wgpu_memory::Kernel;

const KERNELS: u32 = 2000;

#[test]
fn kernels_made_from_one_source_share_one_pipeline() {
    let Some(client) = fresh() else { return };
    let handle = client.create(&0u32.to_le_bytes()).unwrap();
    for _ in 0..KERNELS {
        let kernel = Kernel::new("add one", ADD_ONE, "main");
        client.launch(&kernel, groups_for(4), &[&handle]).unwrap();
    }
    assert_eq!(
        client.read_blocking(&handle).unwrap(),
        KERNELS.to_le_bytes(),
        "every launch adds one"
    );
    assert_eq!(
        client.cached_pipelines(),
        1,
        "one pipeline for {KERNELS} kernels of one source"
    );
    // Another entry point of the same source is another pipeline.
    let two_entries =
        format!("{ADD_ONE}\n@compute @workgroup_size(1) fn add_two() {{ x[0] = x[0] + 2u; }}\n");
    client
        .launch(
            &Kernel::new("add two", two_entries, "add_two"),
            [1, 1, 1],
            &[&handle],
        )
        .unwrap();
    assert_eq!(
        client.read_blocking(&handle).unwrap(),
        (KERNELS + 2).to_le_bytes()
    );
    assert_eq!(client.cached_pipelines(), 2);
}
