//! Memory in a real browser (WebGPU): uploads, given-back pages, the budget and device
//! loss, where nothing may block and the device's answers (work-done callbacks, the
//! device's `lost` promise) arrive only while the browser's event loop runs.
//!
//! These tests read their results back with their own buffers (a copy into a MAP_READ
//! buffer and its own map), not through the client's reads, and yield to the browser
//! with their own futures: they test the client's memory, not its reads.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wgpu_memory::{Client, ClientError, Handle, Kernel};

mod common;

wasm_bindgen_test_configure!(run_in_browser);

/// A device of the browser's WebGPU adapter (WebGPU's default limits), its queue, and a
/// client over them, as an application brings its own device.
async fn open() -> (Client, wgpu::Device, wgpu::Queue) {
    let (device, queue) = common::browser_device().await;
    let client = Client::new(device.clone(), queue.clone());
    (client, device, queue)
}

/// A one-shot signal a wgpu callback completes: Send + Sync, as wgpu's callbacks must be.
#[derive(Clone, Default)]
struct Signal(Arc<Mutex<(bool, Option<Waker>)>>);

impl Signal {
    fn fire(&self) {
        let mut state = self.0.lock().unwrap();
        state.0 = true;
        if let Some(waker) = state.1.take() {
            waker.wake();
        }
    }
}

impl Future for Signal {
    type Output = ();
    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.lock().unwrap();
        if state.0 {
            return Poll::Ready(());
        }
        state.1 = Some(context.waker().clone());
        Poll::Pending
    }
}

/// Submits what the client recorded and yields to the browser until the GPU is done
/// with everything submitted: the work-done callbacks registered before run first.
async fn settle(client: &Client, queue: &wgpu::Queue) {
    client.flush().expect("the recorded work submits");
    let done = Signal::default();
    let fire = done.clone();
    queue.on_submitted_work_done(move || fire.fire());
    done.await;
}

/// Yields to the browser's event loop for about `ms` milliseconds (a timer task).
async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let set_timeout: js_sys::Function =
            js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("setTimeout"))
                .expect("setTimeout")
                .unchecked_into();
        set_timeout
            .call2(&JsValue::NULL, &resolve, &JsValue::from(ms))
            .expect("a timer");
    });
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .expect("the timer fires");
}

/// The bytes of `handle`, read with a buffer and a map of the test's own.
async fn read_back(client: &Client, device: &wgpu::Device, handle: &Handle) -> Vec<u8> {
    let size = handle.size().next_multiple_of(4);
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("test readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let resource = client.resource(handle).expect("the handle's slice");
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&resource.buffer, resource.offset, &staging, 0, size);
    client.queue().submit([encoder.finish()]);
    drop(resource);
    let mapped = Signal::default();
    let fire = mapped.clone();
    staging.map_async(wgpu::MapMode::Read, .., move |result| {
        result.expect("the test's map");
        fire.fire();
    });
    mapped.await;
    let bytes = staging
        .get_mapped_range(..)
        .expect("the mapped range")
        .to_vec();
    staging.unmap();
    staging.destroy();
    bytes[..handle.size() as usize].to_vec()
}

/// Bytes of the pages the memory named `name` holds (`"main"`, `"upload"`, `"staging"`).
fn reserved(client: &Client, name: &str) -> u64 {
    let report = client.memory_report();
    let stream = &report.streams[0];
    if name == "main" {
        return stream.pools.usage().bytes_reserved;
    }
    let memory = stream.auxiliary.iter().find(|memory| memory.name == name);
    memory
        .expect("a memory of that name")
        .pools
        .usage()
        .bytes_reserved
}

/// 665 creates of 12 KiB in a row, with no yield between them, hold no upload staging:
/// each write is handed to the browser at once (it held 661 staging pages, 165 MiB for
/// 8 MiB of data, when writes went through staging pages that only a map callback gives
/// back).
#[wasm_bindgen_test]
async fn creates_in_a_row_hold_no_upload_staging() {
    let (client, device, queue) = open().await;
    let handles: Vec<Handle> = (0..665u32)
        .map(|i| {
            client
                .create(&[(i % 251) as u8; 12 << 10])
                .expect("a create")
        })
        .collect();
    assert_eq!(reserved(&client, "upload"), 0);
    assert_eq!(client.pending_upload_bytes(), 0);
    assert!(reserved(&client, "main") >= 665 * (12 << 10));
    settle(&client, &queue).await;
    for i in [0usize, 332, 664] {
        assert_eq!(
            read_back(&client, &device, &handles[i]).await,
            vec![(i % 251) as u8; 12 << 10],
            "handle {i}"
        );
    }
}

const COPY: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = x[id.x]; }
}
";

/// A handle dropped while a recorded launch still reads it, and its slice reused at once
/// by a new create: the launch reads the old bytes, the new handle holds the new ones
/// (the write goes to the browser only after the launch is submitted), and an unaligned
/// write after that lands too.
#[wasm_bindgen_test]
async fn a_dropped_handle_reused_at_once_keeps_the_order_of_its_work() {
    let (client, device, queue) = open().await;
    let y = client.empty(12 << 10).unwrap();
    let x = client.create(&[3; 12 << 10]).unwrap();
    let copy = Kernel::new("copy", COPY, "main");
    client.launch(&copy, [48, 1, 1], &[&x, &y]).unwrap();
    drop(x);
    let z = client.create(&[4; 12 << 10]).unwrap();
    client.write(&z, 5, &[9; 6]).unwrap();
    settle(&client, &queue).await;
    assert_eq!(read_back(&client, &device, &y).await, vec![3; 12 << 10]);
    let mut expected = vec![4; 12 << 10];
    expected[5..11].fill(9);
    assert_eq!(read_back(&client, &device, &z).await, expected);
}

/// Whether `buffer` is destroyed: a write into it is then a validation error.
async fn destroyed(device: &wgpu::Device, queue: &wgpu::Queue, buffer: &wgpu::Buffer) -> bool {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    queue.write_buffer(buffer, 0, &[0; 4]);
    scope.pop().await.is_some()
}

/// Pages given back are destroyed once the browser reports the GPU done with them (not
/// left to the garbage collector), and the budget and the memory report show them gone;
/// one whose work the browser has already reported done goes at once.
#[wasm_bindgen_test]
async fn given_back_pages_are_destroyed_once_the_browser_reports_them_done() {
    let (client, device, queue) = open().await;
    let handle = client.create(&vec![1; 1 << 20]).unwrap();
    // The page's buffer, as the application sees it (lent: never freed at once).
    let page = client.resource(&handle).unwrap().buffer.clone();
    client.queue().submit(std::iter::empty());
    drop(handle);
    let report = client.cleanup();
    assert!(report.main.bytes >= 1 << 20, "{report:?}");
    assert_eq!(
        reserved(&client, "main"),
        0,
        "the page left the memory report"
    );
    let budget = client.budget();
    assert!(
        budget.retiring >= 1 << 20,
        "charged until the browser reports: {budget:?}"
    );
    settle(&client, &queue).await;
    let budget = client.budget();
    assert_eq!((budget.held, budget.retiring), (0, 0), "{budget:?}");
    assert!(
        destroyed(&device, &queue, &page).await,
        "the page was only dropped"
    );
    // A page whose work the browser already reported done goes at once when given back:
    // the work-done callback of the submit behind its write finished that batch's fence.
    let other = client.create(&vec![2; 1 << 20]).unwrap();
    settle(&client, &queue).await;
    drop(other);
    client.cleanup();
    let budget = client.budget();
    assert_eq!((budget.held, budget.retiring), (0, 0), "{budget:?}");
}

/// A create refused right after a handle was freed, only because the freed page still
/// awaits the browser, says so (how many bytes, await `sync_async`), and succeeds once
/// the browser reported the GPU done. The second size is a quarter of the first: a free
/// page serves requests down to half its size, so the freed page cannot serve it and
/// must go back for it.
#[wasm_bindgen_test]
async fn a_refusal_right_after_freeing_names_what_awaits_the_browser() {
    let (client, _device, queue) = open().await;
    let first = client.create(&vec![1; 2 << 20]).unwrap();
    let held = client.budget().held;
    client.set_budget(Some(held + (64 << 10))).unwrap();
    drop(first);
    let error = client.create(&vec![2; 512 << 10]).unwrap_err();
    let ClientError::OutOfMemory { detail, .. } = &error else {
        panic!("expected OutOfMemory, got {error:?}");
    };
    let budget = detail.budget.as_ref().expect("the budget's detail");
    assert!(budget.awaiting_device >= 2 << 20, "{budget:?}");
    assert!(budget.only_awaiting_device(), "{budget:?}");
    let text = error.to_string();
    assert!(
        text.contains("client.sync_async()") && text.contains("fits"),
        "{text}"
    );
    settle(&client, &queue).await;
    let second = client.create(&vec![2; 512 << 10]).expect("the retry fits");
    assert!(client.budget().held <= held + (64 << 10));
    drop(second);
}

/// `device.destroy()` reaches the application's device-lost listener (from the browser's
/// event loop: the web has no thread to run it on), and the client's operations then
/// fail as on a lost device.
#[wasm_bindgen_test]
async fn a_destroyed_device_reaches_the_lost_listener() {
    let (client, device, _queue) = open().await;
    let heard = Arc::new(AtomicBool::new(false));
    let reason = Arc::new(Mutex::new(None));
    let (heard_in, reason_in) = (heard.clone(), reason.clone());
    client
        .on_device_lost(move |client, lost, _message| {
            // A listener may call the client: no lock of the client's is held.
            let _ = client.budget();
            *reason_in.lock().unwrap() = Some(lost);
            heard_in.store(true, Ordering::SeqCst);
        })
        .unwrap();
    device.destroy();
    // The `lost` promise settles from the event loop: yield until it did (bounded).
    for _ in 0..300 {
        if heard.load(Ordering::SeqCst) {
            break;
        }
        sleep(10).await;
    }
    assert!(heard.load(Ordering::SeqCst), "the listener never ran");
    assert_eq!(
        *reason.lock().unwrap(),
        Some(wgpu::DeviceLostReason::Destroyed)
    );
    let error = client.create(&[1; 16]).unwrap_err();
    assert!(matches!(error, ClientError::DeviceLost { .. }), "{error:?}");
}
