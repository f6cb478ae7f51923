//! Reads, syncs and launches in a real browser (WebGPU): every future here must yield to
//! the browser's event loop, since the map callbacks, the work-done callbacks and the
//! popped error scopes arrive only while it runs. A read that blocked or looped would
//! hang the page (the runner's timeout then fails the run).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wgpu_memory::{Client, ClientError, Handle, Kernel};

mod common;

wasm_bindgen_test_configure!(run_in_browser);

/// A client over a device of the browser's WebGPU adapter, as an application opens its
/// own device (the README's "Your device, memory hints and config").
async fn client() -> Client {
    let (device, queue) = common::browser_device().await;
    Client::with_config_file(device, queue).expect("a client")
}

use common::pattern;

/// Polls every future until all are done (each keeps its place in the output).
async fn join_all<T>(mut futures: Vec<Pin<Box<dyn Future<Output = T>>>>) -> Vec<T> {
    let mut out: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        let mut pending = false;
        for (future, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(context) {
                    Poll::Ready(value) => *slot = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|slot| slot.expect("done")).collect()
}

/// Created, written and read back, at sizes from nothing to several MiB (uploads stay
/// under 8 MiB, which take the threaded path).
#[wasm_bindgen_test]
async fn round_trips_of_several_sizes() {
    let client = client().await;
    for (seed, len) in [0usize, 3, 4, 1000, (256 << 10) + 3, 4 << 20]
        .into_iter()
        .enumerate()
    {
        let bytes = pattern(len, seed as u8);
        let handle = client.create(&bytes).unwrap();
        assert_eq!(
            client.read(&handle).await.unwrap(),
            bytes,
            "create of {len}"
        );
        let again = pattern(len, seed as u8 + 100);
        client.write(&handle, 0, &again).unwrap();
        assert_eq!(client.read(&handle).await.unwrap(), again, "write of {len}");
    }
}

/// Live slices of the readback staging memory.
fn staging_slices(client: &Client) -> u64 {
    client.memory_report().streams[0]
        .auxiliary
        .iter()
        .find(|memory| memory.name == "staging")
        .map_or(0, |memory| memory.pools.usage().number_allocs)
}

/// Many handles in one read: each answer is its own handle's bytes, in order, all
/// through one staging slice (one map for the whole batch).
#[wasm_bindgen_test]
async fn read_many_of_many_handles() {
    let client = client().await;
    let expected: Vec<Vec<u8>> = (0..100).map(|i| pattern(4 + i * 12, i as u8)).collect();
    let handles: Vec<Handle> = expected.iter().map(|b| client.create(b).unwrap()).collect();
    let refs: Vec<&Handle> = handles.iter().collect();
    let read = client.read_many(&refs).await.unwrap();
    assert_eq!(staging_slices(&client), 1, "one staging slice, one map");
    assert_eq!(read.len(), expected.len());
    for (got, want) in read.iter().zip(&expected) {
        assert_eq!(got, want);
    }
}

/// Several reads started before any is awaited, then awaited together.
#[wasm_bindgen_test]
async fn several_reads_in_flight_joined() {
    let client = client().await;
    let expected: Vec<Vec<u8>> = (0..8).map(|i| pattern(1024 * (i + 1), i as u8)).collect();
    let handles: Vec<Handle> = expected.iter().map(|b| client.create(b).unwrap()).collect();
    type Read = Pin<Box<dyn Future<Output = Result<wgpu_memory::ReadBytes, ClientError>>>>;
    let reads: Vec<Read> = handles
        .iter()
        .map(|handle| Box::pin(client.read(handle)) as Read)
        .collect();
    for (got, want) in join_all(reads).await.into_iter().zip(&expected) {
        assert_eq!(got.unwrap(), want);
    }
}

const DOUBLE: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = data[id.x] * 2u + 1u;
    }
}
";

/// A launch's output read back: every word doubled plus one.
#[wasm_bindgen_test]
async fn a_launch_output_is_read_back() {
    let client = client().await;
    let words: Vec<u32> = (0..1000).collect();
    let handle = client.create(bytemuck::cast_slice(&words)).unwrap();
    let kernel = Kernel::new("double", DOUBLE, "main");
    client.launch(&kernel, [16, 1, 1], &[&handle]).unwrap();
    let read = client.read(&handle).await.unwrap();
    let got: Vec<u32> = read
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes(word.try_into().unwrap()))
        .collect();
    let want: Vec<u32> = words.iter().map(|w| w * 2 + 1).collect();
    assert_eq!(got, want);
}

/// A kernel that does not compile is refused by the launch itself, with the error native
/// gives, before anything is recorded; the client goes on working.
#[wasm_bindgen_test]
async fn a_kernel_that_does_not_compile_is_refused_at_once() {
    let client = client().await;
    let handle = client.create(&[1, 2, 3, 4]).unwrap();
    // Parses, but does not validate: a u32 binding given an f32.
    let bad = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(1)
fn main() { data[0] = 1.5; }
";
    let error = client
        .launch(&Kernel::new("bad", bad, "main"), [1, 1, 1], &[&handle])
        .unwrap_err();
    assert!(
        matches!(&error, ClientError::Wgpu { operation, .. } if operation == "compiling bad"),
        "{error}"
    );
    let error = client
        .launch(
            &Kernel::new("torn", "fn main( {", "main"),
            [1, 1, 1],
            &[&handle],
        )
        .unwrap_err();
    assert!(
        matches!(&error, ClientError::Wgpu { operation, .. } if operation == "compiling torn"),
        "{error}"
    );
    assert_eq!(client.read(&handle).await.unwrap(), [1, 2, 3, 4]);
}

/// `sync_async` submits the recorded work and resolves once the browser reports it
/// done; a read after it sees the launch's output.
#[wasm_bindgen_test]
async fn sync_async_resolves_after_the_recorded_work() {
    let client = client().await;
    let words: Vec<u32> = vec![5; 256];
    let handle = client.create(bytemuck::cast_slice(&words)).unwrap();
    client
        .launch(
            &Kernel::new("double", DOUBLE, "main"),
            [4, 1, 1],
            &[&handle],
        )
        .unwrap();
    client.sync_async().await.unwrap();
    // Nothing recorded: still a submission to follow, and it resolves.
    client.sync_async().await.unwrap();
    let read = client.read(&handle).await.unwrap();
    assert!(
        bytemuck::cast_slice::<u8, u32>(&read)
            .iter()
            .all(|&w| w == 11)
    );
}

/// Under a budget with no room left, a read whose staging only fits once a page given
/// back is credited (the browser reports the work that used it done) waits for that
/// and succeeds, instead of failing at once.
#[wasm_bindgen_test]
async fn a_read_over_the_budget_waits_for_pages_given_back() {
    let client = client().await;
    let kept = client.empty(1 << 20).unwrap();
    let given_back = client.empty(1 << 20).unwrap();
    // Used by submitted work: given back, its page stays charged until that work is done.
    client
        .launch(
            &Kernel::new("double", DOUBLE, "main"),
            [4096, 1, 1],
            &[&given_back],
        )
        .unwrap();
    client.flush().unwrap();
    client.set_budget(Some(client.budget().held)).unwrap();
    drop(given_back);
    let read = client.read(&kept).await.unwrap();
    assert_eq!(read.len(), 1 << 20);
    assert!(read.iter().all(|&byte| byte == 0));
}

/// The same read with every byte really held ends with the budget's typed
/// `OutOfMemory`, not a hang.
#[wasm_bindgen_test]
async fn a_read_over_the_budget_with_everything_held_is_out_of_memory() {
    let client = client().await;
    let kept = client.empty(1 << 20).unwrap();
    let other = client.empty(1 << 20).unwrap();
    client.set_budget(Some(client.budget().held)).unwrap();
    let error = client.read(&kept).await.unwrap_err();
    assert!(
        matches!(&error, ClientError::OutOfMemory { detail, .. } if detail.budget.is_some()),
        "{error}"
    );
    drop(other);
}

/// A bind group the browser refuses (a storage slice bound as `var<uniform>`) is known
/// only after the launch returned: the next await point reports it as the error native
/// returns from the launch, and the client goes on working.
#[wasm_bindgen_test]
async fn an_error_the_browser_reports_late_reaches_the_next_await_point() {
    let client = client().await;
    let uniform = "
@group(0) @binding(0) var<uniform> scale: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = scale.x; }
";
    let scale = client.create(&[1; 16]).unwrap();
    let output = client.create(&[2; 16]).unwrap();
    // Native refuses this launch at once; the browser's verdict comes later.
    let launched = client.launch(
        &Kernel::new("uniform", uniform, "main"),
        [1, 1, 1],
        &[&scale, &output],
    );
    let error = match launched {
        Err(error) => error,
        Ok(()) => client.sync_async().await.unwrap_err(),
    };
    assert!(
        matches!(&error, ClientError::Wgpu { operation, .. } if operation == "launch of uniform"),
        "{error}"
    );
    // Reported once; the client goes on.
    client.sync_async().await.unwrap();
    let fresh = client.create(&[3; 8]).unwrap();
    assert_eq!(client.read(&fresh).await.unwrap(), [3; 8]);
}
