//! This crate's side: `wgpu_memory::Client` on its own device.

use crate::common::{
    DevicePeak, ModelMemory, PagesSeen, all_memories_usage, check_bytes, check_chain, check_fill,
    first_word, pages, pattern, touch,
};
use crate::kernels::{FILL, FILL_ENTRY, PING, PING_BYTES, PING_ENTRY, fill_workgroups};
use crate::measure::Timed;
use crate::plan::{Op, Plan, TEMPORARIES};
use crate::stages::Stages;
use std::time::{Duration, Instant};
use wgpu_memory::client::load_submit_policy;
use wgpu_memory::{Client, ClientError, Handle, Kernel, SubmitPolicy};

const SIDE: &str = "wgpu-memory";

/// Our client and the two kernels.
pub struct Ours {
    client: Client,
    ping: Kernel,
    fill: Kernel,
}

impl Ours {
    /// A client on a device of its own on `adapter`, with the adapter's limits and
    /// `Client::memory_hints()` (what `Client::open_default` asks for), the default
    /// layout, and the submit policy of `wgpu-memory.toml` (or the file
    /// `WGPU_MEMORY_CONFIG` names) when there is one.
    pub fn open(adapter: &wgpu::Adapter) -> Self {
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("wgpu-memory"),
            required_limits: adapter.limits(),
            memory_hints: Client::memory_hints(),
            ..Default::default()
        }))
        .expect("wgpu-memory: request_device");
        let client = Client::new(device, queue);
        client.set_submit_policy(load_submit_policy().expect("wgpu-memory: [submit] config"));
        Self {
            client,
            ping: Kernel::new("ping", PING, PING_ENTRY).writes(&[1]),
            fill: Kernel::new("fill", FILL, FILL_ENTRY).writes(&[0]),
        }
    }

    /// The client's submit policy.
    pub fn submit_policy(&self) -> SubmitPolicy {
        self.client.submit_policy()
    }

    /// Errors that reached the device's uncaptured-error handler (should be none).
    pub fn uncaptured_errors(&self) -> Vec<String> {
        self.client.uncaptured_errors()
    }

    /// (a): `count` launches ping-ponging between two 1 KiB handles, then one read;
    /// `stages` gets `record` (the launches), `wait` (the read: its submit, the device,
    /// the map).
    pub fn dispatches(&self, count: u32, stages: std::rc::Rc<Stages>) -> impl Timed + '_ {
        let zeros = [0u8; PING_BYTES];
        Dispatches {
            side: self,
            a: self.client.create(&zeros).expect("wgpu-memory: create"),
            b: self.client.create(&zeros).expect("wgpu-memory: create"),
            count,
            done: 0,
            stages,
        }
    }

    /// (b): `steps` model steps per run.
    pub fn model(&self, plan: &Plan, steps: usize) -> Model<'_> {
        let probe = self.client.empty(4096).expect("wgpu-memory: empty");
        self.fill_one(&probe).expect("wgpu-memory: fill");
        check_fill(SIDE, &self.client.read_blocking(&probe).expect("read"));
        Model {
            side: self,
            plan: plan.clone(),
            steps,
            pages: PagesSeen::default(),
        }
    }

    fn fill_one(&self, handle: &Handle) -> Result<(), ClientError> {
        let workgroups = fill_workgroups(handle.size());
        self.client
            .launch(&self.fill, [workgroups, 1, 1], &[handle])
    }

    /// One model step; `after_create` sees the client after each temporary is made.
    fn step(&self, plan: &Plan, mut after_create: impl FnMut(&Client)) -> Result<(), ClientError> {
        let mut live: Vec<Option<Handle>> = (0..TEMPORARIES).map(|_| None).collect();
        for op in &plan.ops {
            match *op {
                Op::Create { slot, size } => {
                    let handle = self.client.empty(size)?;
                    self.fill_one(&handle)?;
                    live[slot] = Some(handle);
                    after_create(&self.client);
                }
                Op::Drop { slot } => live[slot] = None,
            }
        }
        self.client.sync()
    }

    /// (c): `count` uploads of `src` through `call`, each waited for (`sync`).
    pub fn uploads<'a>(&'a self, src: &'a [u8], count: usize, call: Upload) -> impl Timed + 'a {
        if call == Upload::CreateWith {
            let handle = self
                .client
                .create_with(src.len() as u64, |mut bytes| bytes.copy_from_slice(src))
                .expect("wgpu-memory: create_with");
            let read = self.client.read_blocking(&handle).expect("read");
            check_bytes(SIDE, "create_with", &read, src);
        }
        move || {
            let start = Instant::now();
            for _ in 0..count {
                let handle = match call {
                    Upload::CreateWith => self
                        .client
                        .create_with(src.len() as u64, |mut bytes| bytes.copy_from_slice(src)),
                    Upload::Create => self.client.create(src),
                }
                .expect("wgpu-memory: upload");
                self.client.sync().expect("wgpu-memory: sync");
                drop(handle);
            }
            start.elapsed()
        }
    }

    /// (d): `create` then `read` of `src`, the bytes touched.
    pub fn round_trip<'a>(&'a self, src: &'a [u8]) -> impl Timed + 'a {
        let handle = self.client.create(src).expect("wgpu-memory: create");
        let read = self.client.read_blocking(&handle).expect("read");
        check_bytes(SIDE, "round trip", &read, src);
        drop((read, handle));
        move || {
            let start = Instant::now();
            let handle = self.client.create(src).expect("wgpu-memory: create");
            let read = self
                .client
                .read_blocking(&handle)
                .expect("wgpu-memory: read");
            touch(&read);
            drop((read, handle));
            start.elapsed()
        }
    }

    /// (e): one `read_many` of `count` handles of `size` bytes, each touched; `stages`
    /// gets `record` (until `read_many` returns its future), `wait` (until the future
    /// gives the views) and `touch`.
    pub fn small_reads(
        &self,
        count: usize,
        size: usize,
        stages: std::rc::Rc<Stages>,
    ) -> impl Timed + '_ {
        let sources: Vec<Vec<u8>> = (0..count).map(|i| pattern(size, i as u32)).collect();
        let handles: Vec<Handle> = sources
            .iter()
            .map(|bytes| self.client.create(bytes).expect("wgpu-memory: create"))
            .collect();
        let refs: Vec<&Handle> = handles.iter().collect();
        let parts = self.client.read_many_blocking(&refs).expect("read_many");
        for (part, expected) in parts.iter().zip(&sources) {
            check_bytes(SIDE, "read_many", part, expected);
        }
        drop(parts);
        move || {
            let refs: Vec<&Handle> = handles.iter().collect();
            let start = Instant::now();
            let future = self.client.read_many(&refs);
            let recorded = start.elapsed();
            let parts = pollster::block_on(future).expect("wgpu-memory: read_many");
            let waited = start.elapsed();
            for part in &parts {
                touch(part);
            }
            drop(parts);
            let elapsed = start.elapsed();
            stages.record(&[recorded, waited - recorded, elapsed - waited]);
            elapsed
        }
    }
}

/// Which call workload (c) uploads with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upload {
    /// `create(&src)`.
    Create,
    /// `create_with(size, |bytes| bytes.copy_from_slice(&src))`.
    CreateWith,
}

struct Dispatches<'a> {
    side: &'a Ours,
    a: Handle,
    b: Handle,
    count: u32,
    done: u32,
    stages: std::rc::Rc<Stages>,
}

impl Timed for Dispatches<'_> {
    fn run(&mut self) -> Duration {
        let client = &self.side.client;
        let start = Instant::now();
        for i in 0..self.count {
            let (src, dst) = if i % 2 == 0 {
                (&self.a, &self.b)
            } else {
                (&self.b, &self.a)
            };
            client
                .launch(&self.side.ping, [1, 1, 1], &[src, dst])
                .expect("wgpu-memory: launch");
        }
        let recorded = start.elapsed();
        let word = first_word(&client.read_blocking(&self.a).expect("wgpu-memory: read"));
        let elapsed = start.elapsed();
        self.stages.record(&[recorded, elapsed - recorded]);
        self.done += self.count;
        check_chain(SIDE, word, self.done);
        elapsed
    }
}

/// Workload (b) on our client.
pub struct Model<'a> {
    side: &'a Ours,
    plan: Plan,
    steps: usize,
    pages: PagesSeen,
}

impl Model<'_> {
    /// Page counts from the timed runs, and one more step with a memory report and
    /// wgpu's allocator report (`Client::device_memory`) after each temporary for the
    /// peaks.
    pub fn memory(&self) -> ModelMemory {
        let (mut in_use, mut reserved, mut device) = (0, 0, None);
        self.side
            .step(&self.plan, |client| {
                let usage = all_memories_usage(&client.memory_report());
                in_use = in_use.max(usage.bytes_in_use);
                reserved = reserved.max(usage.bytes_reserved);
                if let Some(memory) = client.device_memory() {
                    let before = device.map_or(0, |peak: DevicePeak| peak.reserved);
                    DevicePeak::observe(&mut device, memory.reserved, memory.allocated);
                    if memory.reserved > before && std::env::var_os("E2E_BLOCKS").is_some() {
                        print_blocks(client.device());
                    }
                }
            })
            .expect("wgpu-memory: model step");
        let (pages_after_warmup, created) = self.pages.figures();
        ModelMemory {
            pages_after_warmup,
            created,
            peak_in_use: in_use,
            peak_reserved: reserved,
            device,
        }
    }
}

impl Timed for Model<'_> {
    fn run(&mut self) -> Duration {
        let start = Instant::now();
        for _ in 0..self.steps {
            self.side
                .step(&self.plan, |_| {})
                .expect("wgpu-memory: model step");
        }
        let elapsed = start.elapsed();
        self.pages.observe(pages(&self.side.client.memory_report()));
        elapsed
    }
}

/// `E2E_BLOCKS=1`: wgpu's device memory blocks and what each holds, printed at every new
/// peak of the model step's device memory (where the blocks' unused bytes are).
fn print_blocks(device: &wgpu::Device) {
    let Some(report) = device.generate_allocator_report() else {
        return;
    };
    println!(
        "blocks: {} B in {} blocks, {} B allocated",
        report.total_reserved_bytes,
        report.blocks.len(),
        report.total_allocated_bytes
    );
    for block in &report.blocks {
        let held: Vec<String> = report.allocations[block.allocations.clone()]
            .iter()
            .map(|allocation| format!("{}:{}", allocation.name, allocation.size))
            .collect();
        println!("  block {} B: {}", block.size, held.join(", "));
    }
}
