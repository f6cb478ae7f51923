//! The application's own wgpu errors reach the application (issue 24, item 1).
//!
//! The client holds the device's uncaptured-error handler. Before, it only kept the
//! text, so a mistake in the application's own pipeline (a slice bound as
//! `var<uniform>`) read back zeros and showed only in `uncaptured_errors()`. Now an
//! error no scope caught goes to the handlers the application registered with
//! `Client::on_uncaptured_error`, or, with none, panics with wgpu's message on the
//! thread that made it, as wgpu's default handler does. The client's own operations
//! still catch their own errors.

use crate::device::{fresh, pattern};
use crate::watchdog::within;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;
use wgpu_memory::{Client, ClientError, Kernel};

/// The application's kernel that reads its parameter as a uniform buffer.
const UNIFORM_PARAMETER: &str = "
@group(0) @binding(0) var<uniform> scale: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = scale.x; }
";

/// The application binds a client slice (a storage page, not a uniform buffer) as
/// `var<uniform>` in a bind group of its own: wgpu refuses the bind group.
fn bind_a_slice_as_uniform(client: &Client) {
    let device = client.device();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("the application's uniform kernel"),
        source: wgpu::ShaderSource::Wgsl(UNIFORM_PARAMETER.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("the application's uniform kernel"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let scale = client.create(&[2; 16]).unwrap();
    let output = client.empty(16).unwrap();
    let (scale, output) = (
        client.resource(&scale).unwrap(),
        client.resource(&output).unwrap(),
    );
    drop(device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("the application's bind group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(scale.as_binding()),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::Buffer(output.as_binding()),
            },
        ],
    }));
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn an_application_error_with_no_handler_panics_with_wgpus_message() {
    let Some(client) = fresh() else { return };
    let panicked = catch_unwind(AssertUnwindSafe(|| bind_a_slice_as_uniform(&client)));
    let payload = panicked.expect_err("the application's error vanished into the client");
    let text = panic_text(payload.as_ref());
    assert!(text.starts_with("wgpu error:"), "{text}");
    assert!(text.contains("the application's bind group"), "{text}");
    // The client kept the text too, and no lock of its own is left held: every
    // operation still works (a watchdog turns a held lock into a failure).
    assert_eq!(client.uncaptured_errors().len(), 1);
    let worker = client.clone();
    within(
        "the client after a panic in its handler",
        Duration::from_secs(60),
        move || {
            let handle = worker.create(&pattern(256, 1)).unwrap();
            let kernel = Kernel::new("add one", crate::kernels::ADD_ONE, "main");
            worker
                .launch(&kernel, crate::kernels::groups_for(256), &[&handle])
                .unwrap();
            worker.sync().unwrap();
            assert!(worker.read_blocking(&handle).is_ok());
        },
    );
}

#[test]
fn an_application_error_goes_to_its_handler_and_nothing_panics() {
    let Some(client) = fresh() else { return };
    let (sender, receiver) = mpsc::channel::<String>();
    let sender = parking_lot::Mutex::new(sender);
    client
        .on_uncaptured_error(move |_, error| {
            let _ = sender.lock().send(error.to_string());
        })
        .unwrap();
    bind_a_slice_as_uniform(&client);
    let heard: Vec<String> = receiver.try_iter().collect();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].contains("the application's bind group"),
        "{heard:?}"
    );
}

#[test]
fn the_clients_own_errors_stay_its_own_with_no_handler() {
    let Some(client) = fresh() else { return };
    let handle = client.create(&pattern(64, 2)).unwrap();
    // A shader that does not compile, and a launch binding a slice as `var<uniform>`:
    // both refused by wgpu inside the client's error scopes, returned as errors, never a
    // panic.
    let broken = Kernel::new("broken", "fn main( {", "main");
    let error = client.launch(&broken, [1, 1, 1], &[&handle]).unwrap_err();
    assert!(matches!(error, ClientError::Wgpu { .. }), "{error}");
    let uniform = Kernel::new("uniform", UNIFORM_PARAMETER, "main");
    let output = client.create(&pattern(64, 3)).unwrap();
    let error = client
        .launch(&uniform, [1, 1, 1], &[&handle, &output])
        .unwrap_err();
    assert!(matches!(error, ClientError::Wgpu { .. }), "{error}");
    client.sync().unwrap();
    assert!(client.uncaptured_errors().is_empty());
}

/// The application's error found inside `client.queue().submit(..)`, which holds the
/// client's submit turn while wgpu runs: the panic unwinds out of it, and the client's
/// other threads go on (nothing of the client's stays held).
#[test]
fn a_panic_inside_the_clients_queue_submit_leaves_nothing_held() {
    let Some(client) = fresh() else { return };
    let device = client.device();
    let buffer = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 256,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let (source, target) = (buffer("the application's source"), buffer("its target"));
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&source, 0, &target, 0, 256);
    let commands = encoder.finish();
    // Destroyed after recording: wgpu refuses the submission.
    source.destroy();
    let handle = client.create(&pattern(256, 4)).unwrap();
    let panicked = catch_unwind(AssertUnwindSafe(|| client.queue().submit([commands])));
    let payload = panicked.expect_err("the application's submit error vanished");
    assert!(panic_text(payload.as_ref()).starts_with("wgpu error:"));
    let worker = client.clone();
    within(
        "the client after a panic in its submit",
        Duration::from_secs(60),
        move || {
            worker.write(&handle, 0, &pattern(256, 5)).unwrap();
            worker.sync().unwrap();
            assert!(worker.read_blocking(&handle).unwrap() == pattern(256, 5));
        },
    );
}
