//! Bare wgpu on its own device: what an application does with no memory library, the
//! straightforward way (a buffer per allocation, `create_buffer_init`, one map per read
//! batch).

use crate::common::{
    DevicePeak, ModelMemory, check_bytes, check_chain, check_fill, first_word, pattern, touch,
};
use crate::kernels::{FILL, FILL_ENTRY, PING, PING_BYTES, PING_ENTRY, fill_workgroups};
use crate::measure::Timed;
use crate::plan::{Op, Plan, TEMPORARIES};
use crate::stages::Stages;
use std::rc::Rc;
use std::time::{Duration, Instant};
use wgpu::util::DeviceExt;

const SIDE: &str = "bare wgpu";

/// Bare wgpu's device, queue and the two pipelines.
pub struct Bare {
    device: wgpu::Device,
    queue: wgpu::Queue,
    ping: wgpu::ComputePipeline,
    fill: wgpu::ComputePipeline,
}

impl Bare {
    /// A device of its own on `adapter`, with the adapter's limits.
    pub fn open(adapter: &wgpu::Adapter) -> Self {
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("bare"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .expect("bare: request_device");
        let pipeline = |source: &str, entry: &str| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(entry),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let ping = pipeline(PING, PING_ENTRY);
        let fill = pipeline(FILL, FILL_ENTRY);
        Self {
            device,
            queue,
            ping,
            fill,
        }
    }

    fn wait(&self) {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("bare: poll");
    }

    /// Maps all of `buffer` for reading and waits for it.
    fn map(&self, buffer: &wgpu::Buffer) {
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, |result| result.expect("bare: map"));
        self.wait();
    }

    fn storage(&self, contents: &[u8]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            })
    }

    fn staging(&self, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn bind_group(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, buffer)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// Copies `size` bytes of `buffer` out through a new staging buffer and maps it.
    fn read(&self, buffer: &wgpu::Buffer, size: u64) -> wgpu::Buffer {
        let staging = self.staging(size);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.queue.submit([encoder.finish()]);
        self.map(&staging);
        staging
    }

    /// (a): `count` dispatches ping-ponging between two 1 KiB buffers in one compute pass,
    /// the copy of the result into a staging buffer, one submit, one map; `stages` gets
    /// `record`, `submit`, `wait` (the map and the read of its first word).
    pub fn dispatches(&self, count: u32, stages: Rc<Stages>) -> impl Timed + '_ {
        let zeros = [0u8; PING_BYTES];
        let (a, b) = (self.storage(&zeros), self.storage(&zeros));
        let forward = self.bind_group(&self.ping, &[&a, &b]);
        let backward = self.bind_group(&self.ping, &[&b, &a]);
        let staging = self.staging(PING_BYTES as u64);
        let mut done = 0;
        move || {
            let start = Instant::now();
            let mut encoder = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&self.ping);
                for i in 0..count {
                    pass.set_bind_group(0, if i % 2 == 0 { &forward } else { &backward }, &[]);
                    pass.dispatch_workgroups(1, 1, 1);
                }
            }
            encoder.copy_buffer_to_buffer(&a, 0, &staging, 0, PING_BYTES as u64);
            let commands = encoder.finish();
            let recorded = start.elapsed();
            self.queue.submit([commands]);
            let submitted = start.elapsed();
            self.map(&staging);
            let word = first_word(&mapped(&staging));
            staging.unmap();
            let elapsed = start.elapsed();
            stages.record(&[recorded, submitted - recorded, elapsed - submitted]);
            done += count;
            check_chain(SIDE, word, done);
            elapsed
        }
    }

    /// (b): `steps` model steps per run: a new buffer and bind group per temporary, every
    /// dispatch in one compute pass, one submit and a wait per step.
    pub fn model(&self, plan: &Plan, steps: usize) -> Model<'_> {
        let probe = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 4096,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let group = self.bind_group(&self.fill, &[&probe]);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.fill);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(fill_workgroups(4096), 1, 1);
        }
        self.queue.submit([encoder.finish()]);
        let staging = self.read(&probe, 4096);
        check_fill(SIDE, &mapped(&staging));
        Model {
            side: self,
            plan: plan.clone(),
            steps,
            runs: 0,
        }
    }

    /// One model step; returns the most bytes live at once. With `device`, wgpu's
    /// allocator report is sampled into it after each buffer is made.
    fn step(&self, plan: &Plan, mut device: Option<&mut Option<DevicePeak>>) -> u64 {
        let mut live: Vec<Option<wgpu::Buffer>> = (0..TEMPORARIES).map(|_| None).collect();
        let (mut bytes_live, mut peak) = (0, 0);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.fill);
            for op in &plan.ops {
                match *op {
                    Op::Create { slot, size } => {
                        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                            label: None,
                            size,
                            usage: wgpu::BufferUsages::STORAGE,
                            mapped_at_creation: false,
                        });
                        let group = self.bind_group(&self.fill, &[&buffer]);
                        pass.set_bind_group(0, &group, &[]);
                        pass.dispatch_workgroups(fill_workgroups(size), 1, 1);
                        live[slot] = Some(buffer);
                        bytes_live += size;
                        peak = peak.max(bytes_live);
                        if let Some(device) = device.as_deref_mut() {
                            DevicePeak::sample(device, &self.device);
                        }
                    }
                    Op::Drop { slot } => {
                        let buffer = live[slot].take().expect("plan drops a live slot");
                        bytes_live -= buffer.size();
                    }
                }
            }
        }
        self.queue.submit([encoder.finish()]);
        self.wait();
        peak
    }

    /// (c): `count` `queue.write_buffer`s of `src` into one buffer made beforehand, each
    /// submitted and waited for.
    pub fn uploads<'a>(&'a self, src: &'a [u8], count: usize) -> impl Timed + 'a {
        let target = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: src.len() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        move || {
            let start = Instant::now();
            for _ in 0..count {
                self.queue.write_buffer(&target, 0, src);
                self.queue.submit([]);
                self.wait();
            }
            start.elapsed()
        }
    }

    /// (d): `create_buffer_init` of `src`, a copy into a new MAP_READ buffer, one submit,
    /// map, the bytes touched, unmap.
    pub fn round_trip<'a>(&'a self, src: &'a [u8]) -> impl Timed + 'a {
        let size = src.len() as u64;
        let staging = self.read(&self.storage(src), size);
        check_bytes(SIDE, "round trip", &mapped(&staging), src);
        move || {
            let start = Instant::now();
            let buffer = self.storage(src);
            let staging = self.read(&buffer, size);
            touch(&mapped(&staging));
            staging.unmap();
            drop((staging, buffer));
            start.elapsed()
        }
    }

    /// (e): `count` buffers of `size` bytes copied into one staging buffer (made
    /// beforehand) with `count` copies, one submit, one map, each part touched; `stages`
    /// gets `record`, `submit`, `wait` (the map) and `touch`.
    pub fn small_reads(&self, count: usize, size: usize, stages: Rc<Stages>) -> impl Timed + '_ {
        let sources: Vec<Vec<u8>> = (0..count).map(|i| pattern(size, i as u32)).collect();
        let buffers: Vec<wgpu::Buffer> = sources.iter().map(|bytes| self.storage(bytes)).collect();
        let staging = self.staging((count * size) as u64);
        self.read_into(&buffers, &staging, size as u64);
        for (part, expected) in mapped(&staging).chunks(size).zip(&sources) {
            check_bytes(SIDE, "batched read", part, expected);
        }
        staging.unmap();
        move || {
            let start = Instant::now();
            let commands = self.record_reads(&buffers, &staging, size as u64);
            let recorded = start.elapsed();
            self.queue.submit([commands]);
            let submitted = start.elapsed();
            self.map(&staging);
            let waited = start.elapsed();
            for part in mapped(&staging).chunks(size) {
                touch(part);
            }
            staging.unmap();
            let elapsed = start.elapsed();
            stages.record(&[
                recorded,
                submitted - recorded,
                waited - submitted,
                elapsed - waited,
            ]);
            elapsed
        }
    }

    /// Copies each of `buffers` (`size` bytes each) into its place in `staging`, submits,
    /// and maps `staging`.
    fn read_into(&self, buffers: &[wgpu::Buffer], staging: &wgpu::Buffer, size: u64) {
        let commands = self.record_reads(buffers, staging, size);
        self.queue.submit([commands]);
        self.map(staging);
    }

    /// The commands that copy each of `buffers` (`size` bytes each) into its place in
    /// `staging`.
    fn record_reads(
        &self,
        buffers: &[wgpu::Buffer],
        staging: &wgpu::Buffer,
        size: u64,
    ) -> wgpu::CommandBuffer {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for (i, buffer) in buffers.iter().enumerate() {
            encoder.copy_buffer_to_buffer(buffer, 0, staging, i as u64 * size, size);
        }
        encoder.finish()
    }
}

/// The mapped bytes of all of `buffer` (mapped for reading beforehand).
fn mapped(buffer: &wgpu::Buffer) -> wgpu::BufferView {
    buffer
        .slice(..)
        .get_mapped_range()
        .expect("bare: get_mapped_range")
}

/// Workload (b) on bare wgpu.
pub struct Model<'a> {
    side: &'a Bare,
    plan: Plan,
    steps: usize,
    /// Timed runs so far, the warm-up included.
    runs: u64,
}

impl Model<'_> {
    /// Buffers made during the timed runs (one per temporary), and the peaks of one more
    /// step (bare wgpu has no pool: what is reserved is what is live; wgpu's allocator
    /// report sampled after each buffer is made).
    pub fn memory(&self) -> ModelMemory {
        let mut device = None;
        let peak = self.side.step(&self.plan, Some(&mut device));
        ModelMemory {
            pages_after_warmup: Some(0),
            created: Some(self.runs.saturating_sub(1) * (self.steps * TEMPORARIES) as u64),
            peak_in_use: peak,
            peak_reserved: peak,
            device,
        }
    }
}

impl Timed for Model<'_> {
    fn run(&mut self) -> Duration {
        let start = Instant::now();
        for _ in 0..self.steps {
            self.side.step(&self.plan, None);
        }
        self.runs += 1;
        start.elapsed()
    }
}
