//! Pages follow the device's limits. A web app's device has WebGPU's default limits
//! unless it asks for more (128 MiB storage bindings, 256 MiB buffers): there no main
//! page is larger than one storage binding, the largest reservation is one binding, and a
//! byte more is refused by name, whatever the layout (the web builds use exclusive pages).

use crate::device::fresh;
use wgpu_memory::memory_management::{
    MemoryConfiguration, MemoryPoolKind, PoolLayout, ReserveError,
};
use wgpu_memory::{Client, ClientError, Kernel};

const BINDING: u64 = 128 << 20;

/// A client over a device opened with wgpu's default limits (WebGPU's), laid out by
/// `config`.
fn webgpu_defaults(config: MemoryConfiguration) -> Client {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter =
        pollster::block_on(instance.request_adapter(&Default::default())).expect("an adapter");
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: wgpu::Limits::default(),
        ..Default::default()
    }))
    .expect("a device with the default limits");
    let limits = device.limits();
    assert_eq!(
        (
            limits.max_storage_buffer_binding_size,
            limits.max_buffer_size
        ),
        (BINDING, 256 << 20)
    );
    Client::with_layout(device, queue, None, PoolLayout::Preset(config))
}

const ADD_ONE_LAST: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(1)
fn main() { x[arrayLength(&x) - 1u] = x[arrayLength(&x) - 1u] + 1u; }
";

#[test]
fn the_largest_reservation_is_one_storage_binding_under_webgpu_default_limits() {
    if fresh().is_none() {
        return;
    }
    for config in [
        MemoryConfiguration::default(),
        MemoryConfiguration::ExclusivePages,
    ] {
        let client = webgpu_defaults(config.clone());
        // A byte (an alignment unit) over one binding: refused by name, nothing made.
        let error = client.empty(BINDING + 256).unwrap_err();
        assert!(
            matches!(
                error,
                ClientError::Reserve(ReserveError::BufferTooBig { requested, limit })
                    if (requested, limit) == (BINDING + 256, BINDING)
            ),
            "{config:?}: {error:?}"
        );
        assert!(
            error.to_string().contains("128.00 MiB (134217728 bytes)"),
            "{error}"
        );
        // One whole binding: one page of exactly that, bound whole by a kernel.
        let largest = client.empty(BINDING).unwrap();
        let kernel = Kernel::new("add one to the last word", ADD_ONE_LAST, "main");
        client
            .write(&largest, BINDING - 4, &41u32.to_le_bytes())
            .unwrap();
        client.launch(&kernel, [1, 1, 1], &[&largest]).unwrap();
        client.sync().unwrap();
        let report = client.memory_report();
        let main = &report.streams[0].pools;
        let pages: Vec<_> = main.dynamic.iter().filter(|pool| pool.pages > 0).collect();
        assert_eq!(pages.len(), 1, "{config:?}: {pages:?}");
        assert_eq!(pages[0].usage.bytes_reserved, BINDING, "{config:?}");
        // Staging pages may take a whole buffer (256 MiB), never more.
        for memory in &report.streams[0].auxiliary {
            for pool in &memory.pools.dynamic {
                if let MemoryPoolKind::Exclusive { max_alloc_size } = pool.kind {
                    assert!(max_alloc_size <= 256 << 20, "{}: {pool:?}", memory.name);
                }
            }
        }
        let bytes = client.read_blocking(&largest).unwrap();
        assert_eq!(bytes[bytes.len() - 4..], 42u32.to_le_bytes(), "{config:?}");
    }
}
