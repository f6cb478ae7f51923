//! The peer: cubecl-wgpu 0.12.0-pre.1's runtime, as a user gets it from
//! `WgpuRuntime::client`, on its own device. Its kernels are precompiled WGSL (the same
//! text as ours and bare wgpu's), launched through the ordinary `Client::launch`.

use crate::common::{
    DevicePeak, ModelMemory, PagesSeen, all_memories_usage, check_bytes, check_chain, check_fill,
    first_word, pages, pattern, touch,
};
use crate::kernels::{FILL, FILL_ENTRY, PING, PING_BYTES, PING_ENTRY, fill_workgroups};
use crate::measure::Timed;
use crate::plan::{Op, Plan, TEMPORARIES};
use cubecl_environment::future::block_on;
use cubecl_ir::settings::{Dim3, ExecutionMode, KernelSettings};
use cubecl_ir::{AddressType, ElemType, Scope, UIntKind, metadata::Info};
use cubecl_runtime::client::Client as ComputeClient;
use cubecl_runtime::id::KernelId;
use cubecl_runtime::kernel::{CubeKernel, KernelDefinition, KernelMetadata, PrecompiledSource};
use cubecl_runtime::memory_management::{MemoryReport, MemoryScope};
use cubecl_runtime::runtime::Runtime;
use cubecl_runtime::server::{CubeCount, Handle, KernelArguments};
use cubecl_wgpu::{AutoGraphicsApi, RuntimeOptions, WgpuDevice, WgpuRuntime, WgpuSetup};
use std::time::{Duration, Instant};

const SIDE: &str = "cubecl-wgpu";

/// The peer's client, and the wgpu device it runs on (for wgpu's allocator report).
pub struct Peer {
    client: ComputeClient,
    device: wgpu::Device,
}

impl Peer {
    /// Brings up cubecl-wgpu's default device exactly as its runtime would on first use
    /// (its adapter choice, device features, limits and memory hints, default runtime
    /// options), and returns it with the setup, whose adapter the other sides then open
    /// their own devices on. `init_setup` registers the runtime's server under the device
    /// id on the very wgpu device it returns in the setup, so `setup.device` is the device
    /// the peer allocates on.
    pub fn open() -> (Self, WgpuSetup) {
        let device = WgpuDevice::default();
        let setup = cubecl_wgpu::init_setup::<AutoGraphicsApi>(&device, RuntimeOptions::default());
        let client = <WgpuRuntime as Runtime>::client(&device);
        let device = setup.device.clone();
        (Self { client, device }, setup)
    }

    fn report(&self) -> MemoryReport {
        self.client.memory_report(MemoryScope::Device)
    }

    fn sync(&self) {
        block_on(self.client.sync()).expect("cubecl-wgpu: sync");
    }

    fn launch(&self, kernel: Box<dyn CubeKernel>, workgroups: u32, handles: &[&Handle]) {
        let arguments = handles
            .iter()
            .fold(KernelArguments::new(), |arguments, handle| {
                arguments.with_buffer((*handle).clone().binding())
            });
        self.client
            .launch(kernel, CubeCount::Static(workgroups, 1, 1), arguments);
    }

    /// (a): `count` launches ping-ponging between two 1 KiB handles, then one read.
    pub fn dispatches(&self, count: u32) -> impl Timed + '_ {
        let zeros = [0u8; PING_BYTES];
        let a = self.client.create_from_slice(&zeros);
        let b = self.client.create_from_slice(&zeros);
        let mut done = 0;
        move || {
            let start = Instant::now();
            for i in 0..count {
                let (src, dst) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
                self.launch(Box::new(Ping), 1, &[src, dst]);
            }
            let word = first_word(&self.client.read_one(a.clone()).expect("cubecl-wgpu: read"));
            let elapsed = start.elapsed();
            done += count;
            check_chain(SIDE, word, done);
            elapsed
        }
    }

    /// (b): `steps` model steps per run.
    pub fn model(&self, plan: &Plan, steps: usize) -> Model<'_> {
        let probe = self.client.empty(4096);
        self.launch(Box::new(Fill), fill_workgroups(4096), &[&probe]);
        check_fill(SIDE, &self.client.read_one(probe).expect("read"));
        Model {
            side: self,
            plan: plan.clone(),
            steps,
            pages: PagesSeen::default(),
        }
    }

    fn step(&self, plan: &Plan, mut after_create: impl FnMut(&Self)) {
        let mut live: Vec<Option<Handle>> = (0..TEMPORARIES).map(|_| None).collect();
        for op in &plan.ops {
            match *op {
                Op::Create { slot, size } => {
                    let handle = self.client.empty(size as usize);
                    self.launch(Box::new(Fill), fill_workgroups(size), &[&handle]);
                    live[slot] = Some(handle);
                    after_create(self);
                }
                Op::Drop { slot } => live[slot] = None,
            }
        }
        self.sync();
    }

    /// (c): `count` uploads of `src` (`create_from_slice`), each waited for (`sync`).
    pub fn uploads<'a>(&'a self, src: &'a [u8], count: usize) -> impl Timed + 'a {
        move || {
            let start = Instant::now();
            for _ in 0..count {
                let handle = self.client.create_from_slice(src);
                self.sync();
                drop(handle);
            }
            start.elapsed()
        }
    }

    /// (d): `create_from_slice` then `read_one` of `src`, the bytes touched.
    pub fn round_trip<'a>(&'a self, src: &'a [u8]) -> impl Timed + 'a {
        let read = self
            .client
            .read_one(self.client.create_from_slice(src))
            .expect("read");
        check_bytes(SIDE, "round trip", &read, src);
        drop(read);
        move || {
            let start = Instant::now();
            let handle = self.client.create_from_slice(src);
            let read = self.client.read_one(handle).expect("cubecl-wgpu: read");
            touch(&read);
            drop(read);
            start.elapsed()
        }
    }

    /// (e): one `read` of `count` handles of `size` bytes, each touched.
    pub fn small_reads(&self, count: usize, size: usize) -> impl Timed + '_ {
        let sources: Vec<Vec<u8>> = (0..count).map(|i| pattern(size, i as u32)).collect();
        let handles: Vec<Handle> = sources
            .iter()
            .map(|bytes| self.client.create_from_slice(bytes))
            .collect();
        let parts = self.client.read(handles.clone()).expect("read");
        for (part, expected) in parts.iter().zip(&sources) {
            check_bytes(SIDE, "read", part, expected);
        }
        drop(parts);
        move || {
            let batch = handles.clone();
            let start = Instant::now();
            let parts = self.client.read(batch).expect("cubecl-wgpu: read");
            for part in &parts {
                touch(part);
            }
            drop(parts);
            start.elapsed()
        }
    }
}

/// Workload (b) on the peer.
pub struct Model<'a> {
    side: &'a Peer,
    plan: Plan,
    steps: usize,
    pages: PagesSeen,
}

impl Model<'_> {
    /// Page counts from the timed runs, and one more step with a memory report and
    /// wgpu's allocator report of its device after each temporary for the peaks.
    pub fn memory(&self) -> ModelMemory {
        let (mut in_use, mut reserved, mut device) = (0, 0, None);
        self.side.step(&self.plan, |side| {
            let usage = all_memories_usage(&side.report());
            in_use = in_use.max(usage.bytes_in_use);
            reserved = reserved.max(usage.bytes_reserved);
            DevicePeak::sample(&mut device, &side.device);
        });
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
            self.side.step(&self.plan, |_| {});
        }
        let elapsed = start.elapsed();
        self.pages.observe(pages(&self.side.report()));
        elapsed
    }
}

/// The ping-pong kernel as a cubecl kernel: precompiled WGSL, one type per text (the
/// type is the kernel's cache key).
struct Ping;

/// The fill kernel, likewise.
struct Fill;

/// A definition with no body: a precompiled kernel only needs its settings (workgroup
/// size, checked mode, 32-bit addresses), which name it in the runtime's cache.
fn definition(workgroup_size: u32) -> KernelDefinition {
    let settings = KernelSettings::new(
        Dim3::new_1d(workgroup_size),
        ExecutionMode::Checked,
        AddressType::U32,
    );
    KernelDefinition {
        body: Scope::root(settings.clone()),
        settings,
        info: Info::default(),
    }
}

fn wgsl(source: &str, entry: &str) -> Option<PrecompiledSource> {
    Some(PrecompiledSource {
        source: source.to_string(),
        entrypoint_name: entry.to_string(),
        lang: "wgsl",
    })
}

impl KernelMetadata for Ping {
    fn id(&self) -> KernelId {
        KernelId::new::<Self>()
    }

    fn address_type(&self) -> ElemType {
        ElemType::UInt(UIntKind::U32)
    }
}

impl CubeKernel for Ping {
    fn define(&self) -> KernelDefinition {
        definition(64)
    }

    fn source(&self) -> Option<PrecompiledSource> {
        wgsl(PING, PING_ENTRY)
    }
}

impl KernelMetadata for Fill {
    fn id(&self) -> KernelId {
        KernelId::new::<Self>()
    }

    fn address_type(&self) -> ElemType {
        ElemType::UInt(UIntKind::U32)
    }
}

impl CubeKernel for Fill {
    fn define(&self) -> KernelDefinition {
        definition(crate::kernels::FILL_LANES)
    }

    fn source(&self) -> Option<PrecompiledSource> {
        wgsl(FILL, FILL_ENTRY)
    }
}
