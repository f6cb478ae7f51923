//! What every browser test file opens: a device of the browser's WebGPU adapter, as an
//! application brings its own device (the README's "Your device, memory hints and
//! config"), and bytes that differ from one handle to the next.

use wgpu_memory::Client;

/// A device and queue of the browser's WebGPU adapter (WebGPU's default limits), with the
/// client's memory hints.
pub async fn browser_device() -> (wgpu::Device, wgpu::Queue) {
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
    descriptor.backends = wgpu::Backends::BROWSER_WEBGPU;
    let instance = wgpu::Instance::new(descriptor);
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions::default())
        .await
        .expect("a WebGPU adapter (Chromium needs --enable-unsafe-webgpu)");
    adapter
        .request_device(&wgpu::DeviceDescriptor {
            memory_hints: Client::memory_hints(),
            ..Default::default()
        })
        .await
        .expect("a device")
}

/// `len` bytes that differ from one handle to the next (by `seed`).
#[allow(dead_code)] // not every test file writes patterns
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
