//! The browser's WebGPU device, and futures for the callbacks bare wgpu code waits on
//! (`map_async`, `on_submitted_work_done`). On the web those callbacks run from the
//! browser's event loop once the awaiting task yields; nothing here polls or blocks.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wgpu_memory::Client;

/// A WebGPU device and queue with the adapter that gave them.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
}

impl Gpu {
    /// Opens the browser's WebGPU adapter (the high-performance one when there is a
    /// choice) with its own limits and the memory hints a client's device wants.
    ///
    /// # Errors
    /// A message saying the browser has no WebGPU adapter, or refused the device.
    pub async fn open() -> Result<Gpu, String> {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::BROWSER_WEBGPU;
        let instance = wgpu::Instance::new(descriptor);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|error| {
                format!(
                    "no WebGPU adapter ({error}); use a browser with WebGPU on (Chrome or \
                     Edge 113+; headless Chromium needs --enable-unsafe-webgpu)"
                )
            })?;
        let info = adapter.get_info();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgpu-memory web example"),
                required_limits: adapter.limits(),
                memory_hints: Client::memory_hints(),
                ..Default::default()
            })
            .await
            .map_err(|error| format!("the adapter refused a device: {error}"))?;
        Ok(Gpu {
            device,
            queue,
            info,
        })
    }

    /// The adapter in words: its name (or "unnamed"), device type and backend.
    pub fn describe(&self) -> String {
        let name = if self.info.name.is_empty() {
            "an adapter the browser does not name"
        } else {
            &self.info.name
        };
        format!(
            "{name} ({:?}, {:?})",
            self.info.device_type, self.info.backend
        )
    }
}

/// What a [`Countdown`] holds: callbacks still to come, the first error, the waiter.
struct CountdownState {
    left: usize,
    error: Option<String>,
    waker: Option<Waker>,
}

/// A future that resolves once `n` callbacks have each called [`Countdown::done`]:
/// the first error any of them reported, or `Ok`.
#[derive(Clone)]
pub struct Countdown {
    state: Arc<Mutex<CountdownState>>,
}

impl Countdown {
    /// A countdown waiting for `n` callbacks (ready at once for 0).
    pub fn new(n: usize) -> Countdown {
        Countdown {
            state: Arc::new(Mutex::new(CountdownState {
                left: n,
                error: None,
                waker: None,
            })),
        }
    }

    /// One callback came, with its outcome.
    pub fn done(&self, outcome: Result<(), String>) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.left = state.left.saturating_sub(1);
            if let Err(error) = outcome {
                state.error.get_or_insert(error);
            }
            if state.left == 0 {
                state.waker.take()
            } else {
                None
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Future for Countdown {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.left == 0 {
            return Poll::Ready(state.error.take().map_or(Ok(()), Err));
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Maps each of `buffers` whole for reading (one `map_async` each) and resolves once
/// every map has answered.
///
/// # Errors
/// The first map error, in words.
pub async fn map_all(buffers: &[wgpu::Buffer]) -> Result<(), String> {
    let countdown = Countdown::new(buffers.len());
    for buffer in buffers {
        let done = countdown.clone();
        buffer.map_async(wgpu::MapMode::Read, .., move |result| {
            done.done(result.map_err(|error| format!("map_async: {error}")))
        });
    }
    countdown.await
}

/// Resolves once the queue has finished everything submitted so far (an empty submit
/// first, so that work written with `queue.write_buffer` alone is included).
pub async fn work_done(queue: &wgpu::Queue) {
    queue.submit([]);
    let countdown = Countdown::new(1);
    let done = countdown.clone();
    queue.on_submitted_work_done(move || done.done(Ok(())));
    // The callback never reports an error.
    let _ = countdown.await;
}
