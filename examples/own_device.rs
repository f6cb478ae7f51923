//! An application that brings its own wgpu device: the pools serve its buffers, and it
//! binds a handle in a bind group of its own.
//!
//! ```sh
//! cargo run --release --example own_device
//! ```

use wgpu_memory::{Client, Kernel};

const DOUBLE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = 2.0 * x[i.x]; }
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The application's own device.
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&Default::default()))?;
    // Memory hints that fit the pools (small device memory blocks, so a page given back
    // frees its device memory), as the README asks of an application's own device.
    let descriptor = wgpu::DeviceDescriptor {
        memory_hints: Client::memory_hints(),
        ..Default::default()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&descriptor))?;
    println!("adapter: {}", adapter.get_info().name);
    run(device, queue)?;
    Ok(())
}

/// The pools serving the application's device: a launch through the client, then a
/// pass of the application's own on the same slices, submitted through the client's
/// queue; prints the memory summary. Returns the client, every handle dropped.
pub fn run(device: wgpu::Device, queue: wgpu::Queue) -> Result<Client, Box<dyn std::error::Error>> {
    // The client takes the queue: the application submits through `client.queue()`.
    let client = Client::new(device.clone(), queue);
    let input = client.create(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]))?;
    let output = client.empty(16)?;

    // Launch through the client (handle i is @group(0) @binding(i)) ...
    let kernel = Kernel::new("double", DOUBLE, "main").writes(&[1]);
    client.launch(&kernel, [1, 1, 1], &[&input, &output])?;
    check(&client.read_blocking(&output)?, &[2.0, 4.0, 6.0, 8.0])?;

    // ... or bind the slices in the application's own pipeline: (buffer, offset, size).
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("double"),
        source: wgpu::ShaderSource::Wgsl(DOUBLE.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("double"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let (x, y) = (client.resource(&output)?, client.resource(&input)?);
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("own bind group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(x.as_binding()),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::Buffer(y.as_binding()),
            },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    // Submit through the client's queue, never a raw `wgpu::Queue`: it submits the
    // client's recorded work first (so the pass sees every earlier create and launch),
    // and lets go of the exported slices once the pass that uses them is submitted (the
    // README, "What the client asks of you").
    client.queue().submit([encoder.finish()]);
    // Reads through the client see what the app's own pass wrote (one queue orders them).
    check(&client.read_blocking(&input)?, &[4.0, 8.0, 12.0, 16.0])?;
    print!("{}", client.memory_summary());
    Ok(client)
}

fn check(bytes: &[u8], expected: &[f32]) -> Result<(), String> {
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    if values != expected {
        return Err(format!(
            "the GPU returned {values:?}, expected {expected:?}"
        ));
    }
    println!("ok: {values:?}");
    Ok(())
}
