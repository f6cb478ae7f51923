//! Ways a wgpu application can hold the client wrong (issue 18): its own encoders, its own
//! writes, its own `destroy()`, a refused launch. Each ends in correct bytes or a typed
//! error, and the client works again once the cause is gone.

use crate::device::{fresh, pattern};
use crate::kernels::{ADD_ONE, groups_for};
use wgpu_memory::{Client, ClientError, Kernel, SubmitPolicy};

/// Binding 0 read-only, binding 1 written: `y[i] = x[i] + 1`.
const READ_ONLY_INPUT: &str = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < min(arrayLength(&x), arrayLength(&y))) { y[id.x] = x[id.x] + 1u; }
}
";

fn words(values: impl IntoIterator<Item = u32>) -> Vec<u8> {
    values.into_iter().flat_map(u32::to_le_bytes).collect()
}

/// Item 13: a launch the client refuses before recording anything claims no byte, its
/// input's least of all.
#[test]
fn a_launch_refused_before_recording_claims_nothing() {
    let Some(client) = fresh() else { return };
    let input_bytes = words(0..64);
    let output_bytes = words([5; 64]);
    let input = client.create(&input_bytes).unwrap();
    let output = client.create(&output_bytes).unwrap();
    let kernel = Kernel::new("read-only input", READ_ONLY_INPUT, "main").writes(&[1]);
    let refused = client.launch(&kernel, [1, 1, 1], &[&input, &output]);
    assert!(
        matches!(refused, Err(ClientError::ReadOnlyAliasesWritable { .. })),
        "the two handles share a page: {refused:?}"
    );
    let input_read = client
        .read_blocking(&input)
        .map(|bytes| bytes == input_bytes);
    let output_read = client
        .read_blocking(&output)
        .map(|bytes| bytes == output_bytes);
    assert!(
        matches!((&input_read, &output_read), (Ok(true), Ok(true))),
        "input: {input_read:?}, output: {output_read:?}"
    );
    assert_eq!(client.failures_held(), 0);
    assert!(client.uncaptured_errors().is_empty());
}

/// Item 2, the natural helper shape: the application records a pass on an exported
/// slice, drops the handle and the resource, makes a new handle, then submits. Its pass
/// must run on the old slice's bytes and never on the new handle's.
#[test]
fn an_application_pass_recorded_before_a_reuse_never_lands_on_the_new_handle() {
    let Some(client) = fresh() else { return };
    let kernel = Kernel::new("add one", ADD_ONE, "main");
    let app = AppAddOne::new(&client);
    let len = 4096;
    for round in 0..8u64 {
        let old = client.create(&pattern(len, round)).unwrap();
        let encoder = app.record(&client, &client.resource(&old).unwrap());
        drop(old);
        let new_bytes = pattern(len, 100 + round);
        let new = client.create(&new_bytes).unwrap();
        client.queue().submit([encoder.finish()]);
        assert!(
            client.read_blocking(&new).unwrap() == new_bytes,
            "round {round}: the application's pass landed on the new handle"
        );
        // The client still launches on the new handle as usual.
        client
            .launch(&kernel, groups_for(len as u64), &[&new])
            .unwrap();
        client.sync().unwrap();
    }
    assert!(client.uncaptured_errors().is_empty());
}

/// Item 2, the write order: a `write_buffer` made through a queue kept from
/// `Client::queue()` runs after a launch the client recorded before it.
#[test]
fn a_write_through_a_kept_client_queue_runs_after_an_earlier_launch() {
    let Some(client) = fresh() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let len = 1024;
    let handle = client.create(&words(0..len as u32 / 4)).unwrap();
    let resource = client.resource(&handle).unwrap();
    let queue = client.queue();
    client
        .launch(
            &Kernel::new("add one", ADD_ONE, "main"),
            groups_for(len as u64),
            &[&handle],
        )
        .unwrap();
    let written = words([42; 256]);
    queue.write_buffer(&resource.buffer, resource.offset, &written);
    drop(resource);
    assert!(
        client.read_blocking(&handle).unwrap() == written,
        "the application's write ran before the launch recorded before it"
    );
}

/// Issue 24, item 5: a `write_buffer_with` through a kept `ClientQueue` lands after a
/// launch the client recorded before the view was dropped.
#[test]
fn a_write_buffer_with_through_a_kept_client_queue_runs_after_an_earlier_launch() {
    let Some(client) = fresh() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let len = 1024;
    let handle = client.create(&words(0..len as u32 / 4)).unwrap();
    let resource = client.resource(&handle).unwrap();
    let queue = client.queue();
    client
        .launch(
            &Kernel::new("add one", ADD_ONE, "main"),
            groups_for(len as u64),
            &[&handle],
        )
        .unwrap();
    let written = words([42; 256]);
    let size = wgpu::BufferSize::new(len as u64).unwrap();
    let mut view = queue
        .write_buffer_with(&resource.buffer, resource.offset, size)
        .expect("a write inside the slice");
    view.copy_from_slice(&written);
    drop(view);
    drop(resource);
    assert!(
        client.read_blocking(&handle).unwrap() == written,
        "the application's write ran before the launch recorded before it"
    );
}

/// The application's own `x[i] += 1` pipeline, recorded in encoders of its own.
pub struct AppAddOne {
    pipeline: wgpu::ComputePipeline,
}

impl AppAddOne {
    pub fn new(client: &Client) -> Self {
        let device = client.device();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("the application's add one"),
            source: wgpu::ShaderSource::Wgsl(ADD_ONE.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("the application's add one"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        Self { pipeline }
    }

    /// The pass's bind group over `resource`.
    pub fn bind(&self, client: &Client, resource: &wgpu_memory::HandleResource) -> wgpu::BindGroup {
        client
            .device()
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &self.pipeline.get_bind_group_layout(0),
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(resource.as_binding()),
                }],
            })
    }

    /// An encoder holding one `x[i] += 1` pass over `resource`.
    pub fn record(
        &self,
        client: &Client,
        resource: &wgpu_memory::HandleResource,
    ) -> wgpu::CommandEncoder {
        let bind_group = self.bind(client, resource);
        let mut encoder = client.device().create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            let [x, y, z] = groups_for(resource.size);
            pass.dispatch_workgroups(x, y, z);
        }
        encoder
    }
}

/// Item 4: the application destroys an exported page. The device is healthy: the
/// client must not report it lost; the batch that used the page fails with a typed
/// error naming the handles the page held, and handles in other pages work on.
#[test]
fn a_destroyed_page_is_a_typed_error_and_the_device_stays_usable() {
    let Some(client) = fresh() else { return };
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    let kernel = Kernel::new("add one", ADD_ONE, "main");
    let victim = client.create(&pattern(256, 1)).unwrap();
    let neighbour = client.create(&pattern(256, 2)).unwrap();
    let resource = client.resource(&victim).unwrap();
    assert_eq!(
        client.resource(&neighbour).unwrap().buffer,
        resource.buffer,
        "the test needs both handles in one page"
    );
    // A handle in a page of its own (larger than the first page's room).
    let elsewhere_bytes = pattern(64 << 20, 3);
    let elsewhere = client.create(&elsewhere_bytes).unwrap();
    // Launched once before, its bind group is cached: the next launch is recorded and
    // the batch fails at submit.
    client
        .launch(&kernel, groups_for(256), &[&neighbour])
        .unwrap();
    client.sync().unwrap();
    resource.buffer.destroy();
    drop(resource);

    client
        .launch(&kernel, groups_for(256), &[&neighbour])
        .unwrap();
    match client.flush() {
        Err(ClientError::PageDestroyed { handles, .. }) => {
            let ids = [
                victim.memory().descriptor().id,
                neighbour.memory().descriptor().id,
            ];
            for id in ids {
                assert!(handles.contains(&id), "{handles:?} misses {id:?}");
            }
        }
        other => panic!("expected PageDestroyed, got {other:?}"),
    }
    // The device is not lost: other pages still work.
    assert!(client.read_blocking(&elsewhere).unwrap() == elsewhere_bytes);
    let fresh_bytes = pattern(256, 4);
    let new = client.create(&fresh_bytes).unwrap();
    assert!(client.read_blocking(&new).unwrap() == fresh_bytes);
    let after = [
        ("read", client.read_blocking(&victim).map(drop)),
        // (a launch on `neighbour` is skipped: the failed batch claimed its output)
        (
            "launch",
            client.launch(&kernel, groups_for(256), &[&victim]),
        ),
        ("write", client.write(&victim, 0, &[1; 8])),
    ];
    for (what, result) in after {
        assert!(
            matches!(result, Err(ClientError::PageDestroyed { .. })),
            "{what} on a destroyed page: {result:?}"
        );
    }
    drop((victim, neighbour));
    client.cleanup();
    client.sync().unwrap();
    assert!(client.uncaptured_errors().is_empty());
}

/// Item 4, in a large page: a reservation that lands in a destroyed page takes the
/// page's free room with it into quarantine, so the next one lands elsewhere at once
/// (one miss per alignment unit made a 4-byte create of a 64 MiB page 2^20 reservations
/// and, at that bound, a handle inside the dead page). Errors name only the
/// application's allocations, and everything goes back once its handles are dropped.
#[test]
fn a_create_after_a_destroyed_large_page_lands_elsewhere_at_once() {
    let sliced = "[memory]\npools = [{ type = \"sliced\", page_size = \"64 MiB\", max_slice_size = \"4 MiB\", max_pool_size = \"1 GiB\" }]\n";
    // A sliced pool's 64 MiB page; a 1 MiB page of the default layout's adaptive pool
    // (whose 68 KiB creates would miss a dozen times, one per 68 KiB of free room).
    for (layout, size, next) in [(Some(sliced), 4, 4096), (None, 300 << 10, 68 << 10)] {
        destroyed_page_case(layout, size, next);
    }
}

/// A `size`-byte handle's page destroyed, then a `next`-byte create.
fn destroyed_page_case(layout: Option<&str>, size: usize, next: usize) {
    let Some(client) = fresh() else { return };
    if let Some(layout) = layout {
        let config = wgpu_memory::memory_management::parse_memory_config(layout).unwrap();
        client.install_memory_pools(&config.pools.unwrap()).unwrap();
    }
    let victim = client.create(&vec![1; size]).unwrap();
    let zero = client.empty(0).unwrap();
    let destroyed = client.resource(&victim).unwrap().buffer.clone();
    let zero_inside = client.resource(&zero).unwrap().buffer == destroyed;
    // What the page holds of the application's: the error names these, no more.
    let mut mine = vec![victim.memory().descriptor().id];
    if zero_inside {
        mine.push(zero.memory().descriptor().id);
    }
    destroyed.destroy();
    match client.read_blocking(&victim) {
        Err(ClientError::PageDestroyed { handles, .. }) => assert_eq!(handles, mine),
        other => panic!("expected PageDestroyed, got {other:?}"),
    }
    let fresh_bytes = pattern(next, 5);
    let new = client.create(&fresh_bytes).unwrap();
    assert_ne!(
        client.resource(&new).unwrap().buffer,
        destroyed,
        "a new allocation landed in the destroyed page"
    );
    assert!(client.read_blocking(&new).unwrap() == fresh_bytes);
    // A compaction moves nothing into the quarantined room nor out of the dead page.
    client.compact().unwrap();
    assert_ne!(client.resource(&new).unwrap().buffer, destroyed);
    assert!(client.read_blocking(&new).unwrap() == fresh_bytes);
    if zero_inside {
        // A part of no bytes takes no copy; its page is refused all the same.
        for result in [
            client.read_blocking(&zero).map(drop),
            client.read_many_blocking(&[&new, &zero]).map(drop),
        ] {
            assert!(
                matches!(result, Err(ClientError::PageDestroyed { .. })),
                "{result:?}"
            );
        }
    }
    // The quarantine is a few slices (one per free range), not one per alignment unit.
    let allocations = main_usage(&client).number_allocs;
    assert!(allocations <= 8, "{allocations} allocations held");
    match client.write(&victim, 0, &[1]) {
        Err(ClientError::PageDestroyed { handles, .. }) => assert_eq!(handles, mine),
        other => panic!("expected PageDestroyed, got {other:?}"),
    }
    drop((victim, zero, new));
    client.cleanup();
    client.sync().unwrap();
    client.cleanup();
    let left = main_usage(&client).bytes_reserved;
    assert_eq!(left, 0, "pages still held after every handle was dropped");
}

/// What the main memory's pools hold, summed over the report's streams.
fn main_usage(client: &Client) -> wgpu_memory::memory_management::MemoryUsage {
    client
        .memory_report()
        .streams
        .iter()
        .fold(Default::default(), |usage, stream| {
            usage.combine(stream.pools.usage())
        })
}
