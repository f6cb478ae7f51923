//! The client's whole life in a real browser (WebGPU): a chain of launches checked against
//! the CPU, compaction and cleanup under live handles, the memory report and a snapshot's
//! JSON, and a batch the browser refuses claiming the bytes it left unwritten.

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wgpu_memory::{Client, ClientError, Kernel};

mod common;

wasm_bindgen_test_configure!(run_in_browser);

/// A client over a device of the browser's WebGPU adapter, as the guide opens one.
async fn client() -> Client {
    let (device, queue) = common::browser_device().await;
    Client::new(device, queue)
}

fn words(values: &[u32]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

use common::pattern;

/// `c = a * b + c` elementwise.
const FMA: &str = "
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
    if (i.x < arrayLength(&c)) { c[i.x] = a[i.x] * b[i.x] + c[i.x]; }
}";

/// Three launches, each reading the last one's output, then one read: every element
/// matches the same chain on the CPU.
#[wasm_bindgen_test]
async fn a_chain_of_launches_matches_the_cpu() {
    let client = client().await;
    let n = 4096u32;
    let a: Vec<u32> = (0..n).map(|i| i % 7 + 1).collect();
    let b: Vec<u32> = (0..n).map(|i| i % 5 + 2).collect();
    let mut c: Vec<u32> = (0..n).map(|i| i % 3).collect();
    let (ha, hb, hc) = (
        client.create(&words(&a)).unwrap(),
        client.create(&words(&b)).unwrap(),
        client.create(&words(&c)).unwrap(),
    );
    let kernel = Kernel::new("fma", FMA, "main");
    for step in 0..3 {
        // Alternate which input feeds the chain, so each launch reads the last output.
        let (x, y) = if step % 2 == 0 {
            (&ha, &hc)
        } else {
            (&hb, &hc)
        };
        let scratch = client.empty(u64::from(n) * 4).unwrap();
        client
            .write(&scratch, 0, &client.read(y).await.unwrap())
            .unwrap();
        client
            .launch(&kernel, [n / 64, 1, 1], &[x, &scratch, &hc])
            .unwrap();
        let input = if step % 2 == 0 { &a } else { &b };
        let before = c.clone();
        for i in 0..n as usize {
            c[i] = input[i].wrapping_mul(before[i]).wrapping_add(before[i]);
        }
    }
    let got = client.read(&hc).await.unwrap();
    let got: &[u32] = bytemuck::cast_slice(&got);
    assert_eq!(got, c.as_slice());
}

/// Handles of many sizes, half dropped at random places, then `compact()` and
/// `cleanup()`: every live handle still reads its own bytes, and the cleanup leaves no
/// empty page behind.
#[wasm_bindgen_test]
async fn compaction_and_cleanup_keep_every_live_byte() {
    let client = client().await;
    let sizes = [
        3usize,
        256,
        4096,
        70_000,
        1 << 20,
        5,
        300_000,
        2 << 20,
        64,
        9999,
    ];
    let mut live = Vec::new();
    for round in 0..4u8 {
        for (i, &size) in sizes.iter().enumerate() {
            let seed = round * 16 + i as u8;
            let bytes = pattern(size, seed);
            let handle = client.create(&bytes).unwrap();
            if (i + round as usize).is_multiple_of(2) {
                live.push((handle, bytes));
            }
        }
    }
    client.sync_async().await.unwrap();
    client.compact().expect("compaction with live handles");
    let report = client.cleanup();
    client.sync_async().await.unwrap();
    for (handle, bytes) in &live {
        assert_eq!(&client.read(handle).await.unwrap()[..], &bytes[..]);
    }
    let usage = client.memory_report().usage();
    let live_bytes: u64 = live.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    assert!(usage.bytes_in_use >= live_bytes, "{usage:?}");
    client
        .memory_snapshot()
        .check()
        .unwrap_or_else(|error| panic!("{error} (cleanup report: {report:?})"));
}

/// The memory report counts the live handles, and a snapshot's JSON lists each of them
/// by its id with its size, and round-trips.
#[wasm_bindgen_test]
async fn the_report_and_a_snapshot_show_every_handle() {
    let client = client().await;
    client.record_history(1000);
    let handles: Vec<_> = [100u64, 4096, 3 << 20]
        .into_iter()
        .map(|size| client.empty(size).unwrap())
        .collect();
    let usage = client.memory_report().usage();
    assert!(usage.number_allocs >= 3, "{usage:?}");
    assert!(usage.bytes_in_use >= 100 + 4096 + (3 << 20), "{usage:?}");
    let snapshot = client.memory_snapshot();
    snapshot
        .check_report()
        .expect("slices and pages sum to the report");
    let json = snapshot.to_json().expect("a snapshot serializes");
    let back = wgpu_memory::report::MemorySnapshot::from_json(&json).expect("and reads back");
    for handle in &handles {
        let slice = back
            .slice(handle.id())
            .unwrap_or_else(|| panic!("no slice for handle {}", handle.id()));
        assert_eq!(slice.size, handle.size());
    }
    assert!(client.memory_summary().contains("memory:"));
}

/// A launch whose bind group the browser refuses is known only after it returned; its
/// output was never written, so a read of it fails naming the failure rather than
/// returning bytes the kernel never wrote — or, where the launch is refused at once (as
/// native does), the output keeps its bytes. Either way no wrong byte is read.
#[wasm_bindgen_test]
async fn a_refused_batch_never_reads_as_written() {
    let client = client().await;
    let uniform = "
@group(0) @binding(0) var<uniform> scale: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = scale.x; }
";
    let scale = client.create(&[1; 16]).unwrap();
    let output = client.create(&[2; 16]).unwrap();
    let launched = client.launch(
        &Kernel::new("uniform", uniform, "main"),
        [1, 1, 1],
        &[&scale, &output],
    );
    if launched.is_ok() {
        let _ = client.sync_async().await;
    }
    match client.read(&output).await {
        Ok(bytes) => assert_eq!(bytes, [2; 16], "the refused launch wrote nothing"),
        Err(error) => assert!(
            matches!(error, ClientError::Unwritten(_) | ClientError::Wgpu { .. }),
            "{error}"
        ),
    }
    // The client goes on.
    let fresh = client.create(&[3; 8]).unwrap();
    assert_eq!(client.read(&fresh).await.unwrap(), [3; 8]);
}
