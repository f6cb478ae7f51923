//! The soak's tools: its generator, host models of the kernels, the sorting of results
//! into right, legal refusals and wrong, the tally it prints, and a client opened on a
//! device measured before the client was made.

use wgpu_memory::{Client, ClientError, ReadBytes};

/// A small deterministic generator (one per thread).
pub struct Lcg(pub u64);

impl Lcg {
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Adds 1 to every little-endian word of `bytes` (the host model of `ADD_ONE`).
pub fn add_one(bytes: &mut [u8]) {
    for word in bytes.chunks_exact_mut(4) {
        let value = u32::from_le_bytes(word.try_into().unwrap()).wrapping_add(1);
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// What one thread found wrong: (operation, detail).
pub type Wrong = Vec<(String, String)>;

/// Whether `error` is a refusal by the budget: the only error an operation of the soak
/// may return, and one after which every byte is as it was.
pub fn refused(error: &ClientError) -> bool {
    matches!(error, ClientError::OutOfMemory { detail, .. } if detail.budget.is_some())
}

/// What the threads did, summed at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub ops: u64,
    /// Operations that returned `Ok` and were checked against the model.
    pub served: u64,
    /// Operations the budget refused (creates, writes, reads, exports' creates).
    pub refused: u64,
    pub writes: u64,
    pub creates: u64,
    pub compactions: u64,
    pub moved: u64,
    pub budgets_set: u64,
    pub app_submits: u64,
    /// Exports taken by threads that never submit, sync or clean up.
    pub silent_exports: u64,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.served += other.served;
        self.refused += other.refused;
        self.writes += other.writes;
        self.creates += other.creates;
        self.compactions += other.compactions;
        self.moved += other.moved;
        self.budgets_set += other.budgets_set;
        self.app_submits += other.app_submits;
        self.silent_exports += other.silent_exports;
    }
}

impl Tally {
    /// Sorts `result` of `what`: `Ok` gives its value, a budget refusal is counted, any
    /// other error is wrong.
    pub fn sort<T>(
        &mut self,
        wrong: &mut Wrong,
        what: &str,
        result: Result<T, ClientError>,
    ) -> Option<T> {
        match result {
            Ok(value) => {
                self.served += 1;
                Some(value)
            }
            Err(error) if refused(&error) => {
                self.refused += 1;
                None
            }
            Err(error) => {
                let kind = match &error {
                    ClientError::Reserve(_) => "Reserve",
                    ClientError::OutOfMemory { .. } => "OutOfMemory naming no budget",
                    _ => "error",
                };
                wrong.push((what.to_string(), format!("{kind}: {error}")));
                None
            }
        }
    }

    /// Sorts a read: its bytes must be `want`; a budget refusal is legal.
    pub fn check(
        &mut self,
        wrong: &mut Wrong,
        what: &str,
        got: Result<ReadBytes, ClientError>,
        want: &[u8],
    ) {
        if let Some(bytes) = self.sort(wrong, what, got)
            && bytes[..] != want[..]
        {
            let first = bytes.iter().zip(want).position(|(a, b)| a != b);
            let differ = bytes.iter().zip(want).filter(|(a, b)| a != b).count();
            wrong.push((
                what.to_string(),
                format!(
                    "{differ} of {} bytes differ, first at {first:?}",
                    want.len()
                ),
            ));
        }
    }
}

/// wgpu's allocator report: bytes of device memory blocks; `None` on a backend without
/// one.
pub fn device_blocks(device: &wgpu::Device) -> Option<u64> {
    device
        .generate_allocator_report()
        .map(|report| report.total_reserved_bytes)
}

/// A client on a device opened as `Client::open_default` opens its own (the default
/// adapter, its limits, [`Client::memory_hints`]), with what wgpu's allocator held on
/// that device before the client was made. `None` (a skip) without an adapter, except
/// with `CI=true`, where it fails.
pub fn open_measured() -> Option<(Client, Option<u64>)> {
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
    descriptor.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    let instance = wgpu::Instance::new(descriptor);
    let opened = pollster::block_on(async {
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|error| error.to_string())?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("the soak's device"),
                required_limits: adapter.limits(),
                memory_hints: Client::memory_hints(),
                ..Default::default()
            })
            .await
            .map_err(|error| error.to_string())?;
        Ok::<_, String>((device, queue))
    });
    let (device, queue) = match opened {
        Ok(opened) => opened,
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(error) => {
            eprintln!("skipping the soak: {error}");
            return None;
        }
    };
    let before = device_blocks(&device);
    let client = Client::new(device, queue);
    Some((client, before))
}

/// (memory, live slices, bytes reserved) of every memory of `report` holding anything.
pub fn memories_holding(
    report: &wgpu_memory::memory_management::MemoryReport,
) -> Vec<(String, u64, u64)> {
    let mut holding = Vec::new();
    for stream in &report.streams {
        let main = stream.pools.usage();
        let memories = std::iter::once(("main".to_string(), main)).chain(
            stream
                .auxiliary
                .iter()
                .map(|memory| (memory.name.to_string(), memory.pools.usage())),
        );
        for (name, usage) in memories {
            if usage.number_allocs > 0 || usage.bytes_reserved > 0 {
                holding.push((name, usage.number_allocs, usage.bytes_reserved));
            }
        }
    }
    holding
}
