//! What the device really holds for a client, beside our own books (issue 23): the
//! workloads of the issue, each point measured three ways — our pages (main memory in
//! use and reserved, and every memory held against the budget), wgpu's own allocator
//! report (bytes allocated and bytes of device memory blocks), and, where `nvidia-smi`
//! exists, what the driver says the process and the whole GPU hold.
//!
//! ```sh
//! cargo run --release --example device_memory                 # budget: 8 GiB, 1 GiB on a CPU adapter
//! cargo run --release --example device_memory -- --budget 2GiB
//! ```
//!
//! Workloads (sizes scale with the budget `B`; the issue's H200 case is `B` = 8 GiB):
//! - **sparse**: fill to `B` with tensors of 3, 17, 1 and 40 MiB in turn, drop every 17
//!   and 40 MiB one, add one tensor of `B`/8, three `compact()`, one `cleanup()`;
//! - **mixed**: 400 tensors of 4 KiB to 3 MiB (log-uniform), 70 % dropped at random,
//!   `compact()` and `cleanup()`;
//! - **churn**: tensors of 4-24 MiB uploaded and dropped at random under a budget of
//!   `B`/4, wgpu's report sampled after every step (its worst is printed);
//! - **dropped**: every handle dropped, one `cleanup()`.
//!
//! Points after a cleanup are read after a `sync()` (and the last one has a `sync()` before
//! its cleanup too, so that upload staging in flight is idle and goes back): a page given back stays charged (and
//! held by wgpu) until the device is done with the work that used it.
//!
//! Each line says whether the issue's target holds there: after compaction and cleanup
//! our reserved ≤ 1.25x in use + one page and wgpu's blocks ≤ 1.25x in use + 16 MiB;
//! under a budget wgpu's blocks ≤ budget + 16 MiB; with everything dropped ≤ 16 MiB.

use std::process::Command;
use wgpu_memory::{Client, ClientError, Handle};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// wgpu's own buffers and one shared block: the slack the issue allows (16 MiB).
const SLACK: u64 = 16 * MIB;

fn main() {
    let budget = match parse_budget() {
        Ok(budget) => budget,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let client = match Client::open_default() {
        Ok(client) => client,
        Err(error) => {
            eprintln!("no GPU adapter: {error}");
            std::process::exit(3);
        }
    };
    let cpu = client
        .adapter_info()
        .is_some_and(|info| info.device_type == wgpu::DeviceType::Cpu);
    let budget = budget.unwrap_or(if cpu { GIB } else { 8 * GIB });
    if let Some(info) = client.adapter_info() {
        println!("adapter: {} ({:?})", info.name, info.backend);
    }
    println!("budget B = {}", mib(budget));
    let mut table = Table::default();
    table.point(&client, "client made", Target::None);
    sparse(&client, budget, &mut table);
    mixed(&client, &mut table);
    churn(&client, budget / 4, &mut table);
    // Staging still in flight at a cleanup is not idle, so it is not given back: the
    // sync first lets it finish, the one after lets the device let go of the pages.
    client.sync().expect("dropped: sync");
    client.cleanup();
    client.sync().expect("dropped: sync");
    table.point(
        &client,
        "dropped: all, sync + cleanup + sync",
        Target::Dropped,
    );
    table.print();
}

/// `--budget SIZE` (a size string as the config reads it: "8 GiB", "512MiB").
fn parse_budget() -> Result<Option<u64>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(None),
        [flag, size] if flag == "--budget" => {
            wgpu_memory::memory_management::MemorySize::parse(size)
                .map(Some)
                .map_err(|error| format!("--budget {size}: {error}"))
        }
        _ => Err("usage: device_memory [--budget SIZE]".to_string()),
    }
}

/// The issue's H200 case, scaled to `budget`.
fn sparse(client: &Client, budget: u64, table: &mut Table) {
    client.set_budget(Some(budget)).expect("a budget");
    let sizes = [3 * MIB, 17 * MIB, MIB, 40 * MIB];
    let mut live: Vec<(u64, Handle)> = Vec::new();
    for at in 0.. {
        let size = sizes[at % sizes.len()];
        match client.empty(size) {
            Ok(handle) => live.push((size, handle)),
            Err(ClientError::OutOfMemory { .. }) => break,
            Err(error) => panic!("sparse fill: {error}"),
        }
    }
    table.point(client, "sparse: at the refusal", Target::Budget(budget));
    live.retain(|(size, _)| *size != 17 * MIB && *size != 40 * MIB);
    let large = client.empty(budget / 8);
    if let Err(error) = &large {
        println!("sparse: the B/8 tensor was refused: {error}");
    }
    let mut moved = 0;
    for _ in 0..3 {
        moved += client.compact().map_or(0, |done| done.bytes_moved);
    }
    println!("sparse: three compactions moved {}", mib(moved));
    client.cleanup();
    // Pages given back stay charged until the device is done with the work that used
    // them (issue 22 item 9): the point is read once it is.
    client.sync().expect("sparse: sync");
    table.point(client, "sparse: compact + cleanup + sync", Target::Packed);
    drop((live, large));
    client.set_budget(None).expect("no budget");
    client.cleanup();
}

/// 400 tensors of 4 KiB-3 MiB, 70 % dropped at random.
fn mixed(client: &Client, table: &mut Table) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut live: Vec<Handle> = (0..400)
        .map(|_| {
            // Log-uniform between 4 KiB and 3 MiB, in 4-byte words.
            let unit = (next(&mut state) % 10_000) as f64 / 10_000.0;
            let size = (4.0 * KIB as f64 * (768.0f64).powf(unit)) as u64 & !3;
            client.empty(size).expect("mixed: a tensor")
        })
        .collect();
    live.retain(|_| next(&mut state) % 10 >= 7);
    let _ = client.compact();
    client.cleanup();
    // Pages given back stay charged until the device is done with the work that used
    // them (issue 22 item 9): the point is read once it is.
    client.sync().expect("mixed: sync");
    table.point(client, "mixed: compact + cleanup + sync", Target::Packed);
}

/// Uploads and drops under `budget`; the worst of wgpu's report over every step.
fn churn(client: &Client, budget: u64, table: &mut Table) {
    client.set_budget(Some(budget)).expect("a budget");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut live: Vec<Handle> = Vec::new();
    let mut worst = Sample::take(client);
    for _ in 0..200 {
        let size = (4 * MIB + next(&mut state) % (20 * MIB)) & !3;
        if next(&mut state) % 3 < 2 {
            match client.create(&vec![7u8; size as usize]) {
                Ok(handle) => live.push(handle),
                Err(ClientError::OutOfMemory { .. }) => {}
                Err(error) => panic!("churn: {error}"),
            }
        } else if !live.is_empty() {
            live.swap_remove((next(&mut state) as usize) % live.len());
        }
        let now = Sample::take(client);
        if now.wgpu_blocks > worst.wgpu_blocks {
            worst = now;
        }
    }
    table.add("churn: worst step (B/4)", worst, Target::Budget(budget));
    drop(live);
    client.set_budget(None).expect("no budget");
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One point of a run, in bytes (`None`: not known on this machine).
#[derive(Clone, Copy)]
struct Sample {
    in_use: u64,
    reserved: u64,
    held: u64,
    page: u64,
    wgpu_allocated: Option<u64>,
    wgpu_blocks: u64,
    smi_process: Option<u64>,
    smi_gpu: Option<u64>,
}

impl Sample {
    fn take(client: &Client) -> Self {
        let report = client.memory_report();
        let usage = report.streams[0].pools.usage();
        let page = largest_page(client);
        let device = client.device_memory();
        let (smi_process, smi_gpu) = nvidia_smi();
        Self {
            in_use: usage.bytes_in_use,
            reserved: usage.bytes_reserved,
            held: client.budget().held,
            page,
            wgpu_allocated: device.as_ref().map(|device| device.allocated),
            wgpu_blocks: device.map_or(0, |device| device.reserved),
            smi_process,
            smi_gpu,
        }
    }
}

/// The largest main page (the "one page" of the target), in bytes.
fn largest_page(client: &Client) -> u64 {
    let snapshot = client.memory_snapshot();
    snapshot.memories[0]
        .pools
        .iter()
        .flat_map(|pool| pool.pages.iter().map(|page| page.size))
        .max()
        .unwrap_or(0)
}

/// What nvidia-smi says this process and the whole GPU hold, in bytes.
fn nvidia_smi() -> (Option<u64>, Option<u64>) {
    let query = |args: &[&str]| -> Option<String> {
        let out = Command::new("nvidia-smi").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let pid = std::process::id().to_string();
    let process = query(&[
        "--query-compute-apps=pid,used_memory",
        "--format=csv,noheader,nounits",
    ])
    .and_then(|text| {
        text.lines().find_map(|line| {
            let (who, used) = line.split_once(',')?;
            (who.trim() == pid).then(|| used.trim().parse::<u64>().ok())?
        })
    });
    let gpu = query(&["--query-gpu=memory.used", "--format=csv,noheader,nounits"])
        .and_then(|text| text.lines().next()?.trim().parse::<u64>().ok());
    (process.map(|m| m * MIB), gpu.map(|m| m * MIB))
}

/// Which target of the issue a point is checked against.
#[derive(Clone, Copy)]
enum Target {
    None,
    /// After compaction and cleanup.
    Packed,
    /// Under this budget.
    Budget(u64),
    /// Everything dropped and cleaned up.
    Dropped,
}

impl Target {
    fn verdict(self, sample: &Sample) -> String {
        let packed = |limit: u64, of: u64| if of <= limit { "met" } else { "MISSED" };
        match self {
            Target::None => String::new(),
            Target::Packed => format!(
                "ours {} (≤ {}), wgpu {} (≤ {})",
                packed(sample.in_use * 5 / 4 + sample.page, sample.reserved),
                mib(sample.in_use * 5 / 4 + sample.page),
                packed(sample.in_use * 5 / 4 + SLACK, sample.wgpu_blocks),
                mib(sample.in_use * 5 / 4 + SLACK),
            ),
            Target::Budget(budget) => format!(
                "wgpu {} (≤ {})",
                packed(budget + SLACK, sample.wgpu_blocks),
                mib(budget + SLACK)
            ),
            Target::Dropped => format!("wgpu {} (≤ 16 MiB)", packed(SLACK, sample.wgpu_blocks)),
        }
    }
}

#[derive(Default)]
struct Table {
    rows: Vec<(String, Sample, Target)>,
}

impl Table {
    fn point(&mut self, client: &Client, name: &str, target: Target) {
        self.add(name, Sample::take(client), target);
    }

    fn add(&mut self, name: &str, sample: Sample, target: Target) {
        self.rows.push((name.to_string(), sample, target));
    }

    fn print(&self) {
        println!(
            "| point | main in use | main reserved | held (all memories) | wgpu allocated | wgpu blocks | nvidia-smi process | nvidia-smi GPU | target |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (name, sample, target) in &self.rows {
            let maybe = |bytes: Option<u64>| bytes.map_or("-".to_string(), mib);
            println!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
                mib(sample.in_use),
                mib(sample.reserved),
                mib(sample.held),
                maybe(sample.wgpu_allocated),
                mib(sample.wgpu_blocks),
                maybe(sample.smi_process),
                maybe(sample.smi_gpu),
                target.verdict(sample)
            );
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}
