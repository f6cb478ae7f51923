//! The main job: multiplies real matrices on the GPU through wgpu-memory's pools, checks
//! every element against a CPU reference, and prints GFLOP/s and the memory report.
//!
//! ```sh
//! cargo run --release --example matmul -- [M K N]     # default 1024 1024 1024
//! cargo run --release --example matmul -- --snapshot snapshot.json
//! cargo run --example matmul -- --snapshot snapshot.json --layers 8 256 256 256
//! ```
//!
//! `--layers N` then runs a chained workload through the pools (see [`chain`]): the
//! forward pass of an MLP-like stack of N products `x_{i+1} = x_i · W_i` with hidden sizes
//! cycling through 256, 512, 128 and 384, each layer's weights and activations reserved under
//! the labels `"layer {i}/weights"` and `"layer {i}/activations"`, activations freed once
//! used, a cleanup halfway, and the output checked against the CPU. A snapshot is then taken
//! after it, so its history and pictures show the layers coming and going.

mod chain;
mod job;
mod peaks;

use job::Dims;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::MemorySummary;
use wgpu_memory::{Client, ClientError};

const USAGE: &str = "\
usage: matmul [--snapshot FILE] [--layers N] [M K N]

Multiplies an M x K matrix by a K x N matrix (f32) on the GPU through wgpu-memory's pools,
compares every element with a CPU reference (relative tolerance 1e-4), and prints the
adapter, GFLOP/s (after one warm-up run) and the memory report.

  M K N    matrix sizes, positive integers (default: 1024 1024 1024)
  --snapshot FILE  record the memory history and write the memory snapshot (JSON) to
                   FILE at the end; draw it with `cargo run --example memory_viz -- FILE`
  --layers N       after the check, also run N chained products x(i+1) = x(i) * W(i)
                   (an MLP-like forward pass: a batch of 64 rows, hidden sizes cycling
                   through 256 512 128 384), each layer's weights and activations reserved
                   under the labels 'layer i/weights' and 'layer i/activations',
                   activations freed once used, the first half's weights dropped and a
                   cleanup halfway; the output is checked against the CPU (default 0: none)
  --help   this text

Exits with status 1 on a mismatch of either check (naming the first bad index and both
values), 2 on bad arguments or a GPU error, and 3 when wgpu finds no adapter
(scripts/matmul.sh then installs the software Vulkan driver and runs it again).";

fn parse_dims(args: &[String]) -> Result<Dims, String> {
    let sizes: Vec<u32> = args
        .iter()
        .map(|arg| {
            arg.parse::<u32>()
                .ok()
                .filter(|&size| size > 0)
                .ok_or_else(|| format!("'{arg}' is not a positive integer size"))
        })
        .collect::<Result<_, _>>()?;
    match sizes.as_slice() {
        [] => Ok(Dims {
            m: 1024,
            k: 1024,
            n: 1024,
        }),
        &[m, k, n] => Ok(Dims { m, k, n }),
        other => Err(format!(
            "expected 0 or 3 sizes (M K N), got {}",
            other.len()
        )),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (options, args) = match take_options(args) {
        Ok(split) => split,
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let dims = match parse_dims(&args) {
        Ok(dims) => dims,
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let client = match Client::open_default() {
        Ok(client) => client,
        Err(error @ ClientError::NoAdapter(_)) => {
            eprintln!("error: {error}");
            return ExitCode::from(3);
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if options.snapshot.is_some() {
        client.record_history(HISTORY_EVENTS);
    }
    match run(&client, dims, options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// History events kept while a snapshot is asked for.
const HISTORY_EVENTS: usize = 100_000;

/// The options besides the sizes.
#[derive(Debug, Default)]
struct Options {
    /// `--snapshot FILE`.
    snapshot: Option<PathBuf>,
    /// `--layers N` (0 when not given).
    layers: usize,
}

/// Splits `--snapshot FILE` and `--layers N` off the arguments.
fn take_options(args: Vec<String>) -> Result<(Options, Vec<String>), String> {
    let mut options = Options::default();
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--snapshot" => {
                let file = args.next().ok_or("--snapshot needs a FILE")?;
                options.snapshot = Some(PathBuf::from(file));
            }
            "--layers" => {
                let count = args.next().ok_or("--layers needs a number N")?;
                options.layers = count
                    .parse()
                    .map_err(|_| format!("--layers: '{count}' is not a number"))?;
            }
            _ => rest.push(arg),
        }
    }
    Ok((options, rest))
}

fn run(client: &Client, dims: Dims, options: Options) -> Result<bool, Box<dyn std::error::Error>> {
    if let Some(info) = client.adapter_info() {
        println!(
            "adapter: {} ({:?}, {:?})",
            info.name, info.device_type, info.backend
        );
    }
    println!(
        "matmul: {} x {} times {} x {}",
        dims.m, dims.k, dims.k, dims.n
    );
    let (a, b) = job::inputs(dims);

    // Warm-up: compiles the pipeline and fills the pools.
    let started = Instant::now();
    let gpu = {
        let _scope = client.label("warm-up");
        job::gpu_matmul(client, dims, &a, &b)?
    };
    let warm_up = started.elapsed();

    let (lhs, rhs, out) = {
        let _scope = client.label("timed");
        job::upload(client, dims, &a, &b)?
    };
    let kernel = job::kernel(dims);
    // As many timed runs as fit in about two seconds (at least 1, at most 20): a GPU
    // does 20 in milliseconds, a software adapter needs seconds for one.
    let runs = (2.0 / warm_up.as_secs_f64().max(1e-3)).clamp(1.0, 20.0) as u32;
    client.sync()?;
    let started = Instant::now();
    for _ in 0..runs {
        client.launch(&kernel, job::workgroups(dims), &[&lhs, &rhs, &out])?;
    }
    client.sync()?;
    let seconds = started.elapsed().as_secs_f64() / runs as f64;
    let flops = 2.0 * dims.m as f64 * dims.k as f64 * dims.n as f64;
    println!(
        "GPU: {:.2} ms per product, {:.1} GFLOP/s (mean of {runs} runs after a warm-up of {:.1} ms)",
        seconds * 1e3,
        flops / seconds / 1e9,
        warm_up.as_secs_f64() * 1e3
    );
    let timed = job::read_f32(client, &out)?;

    let cpu = job::cpu_matmul(dims, &a, &b);
    for (name, result) in [("warm-up", &gpu), ("timed", &timed)] {
        if let Some((index, gpu_value, cpu_value)) = job::first_mismatch(result, &cpu) {
            let (row, col) = (index / dims.n as usize, index % dims.n as usize);
            eprintln!(
                "MISMATCH ({name} run) at index {index} (row {row}, col {col}): gpu {gpu_value} vs cpu {cpu_value}"
            );
            return Ok(false);
        }
    }
    println!(
        "check: all {} elements match the CPU reference (relative tolerance {})",
        cpu.len(),
        job::RTOL
    );
    // The chain, when asked for, after the timed buffers are gone; what it leaves live is
    // dropped after the snapshot, so the snapshot shows it.
    let mut chain_live = Vec::new();
    if options.layers > 0 {
        drop((lhs, rhs, out));
        let started = Instant::now();
        let chain = chain::run(client, options.layers)?;
        if let Some((index, gpu_value, cpu_value)) = chain.mismatch {
            let columns = (chain.elements / chain::BATCH as usize).max(1);
            let (row, col) = (index / columns, index % columns);
            eprintln!(
                "MISMATCH (chain of {} layers) at index {index} (row {row}, col {col}): gpu {gpu_value} vs cpu {cpu_value}",
                options.layers
            );
            return Ok(false);
        }
        println!(
            "chain: {} layers checked, all {} output elements match the CPU reference ({:.0} ms)",
            options.layers,
            chain.elements,
            started.elapsed().as_secs_f64() * 1e3
        );
        chain_live = chain.live;
    } else {
        chain_live.extend([lhs, rhs, out]);
    }
    print!("{}", client.memory_summary());
    if let Some(path) = options.snapshot {
        let snapshot = client.memory_snapshot();
        let (in_use, reserved) = peaks::peaks(&snapshot.history);
        println!(
            "peaks: {} in use, {} reserved over all memories ({:.2}x)",
            format_bytes(in_use),
            format_bytes(reserved),
            reserved as f64 / in_use.max(1) as f64
        );
        std::fs::write(&path, snapshot.to_json()?)
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        println!("snapshot: {}", path.display());
    }
    client.cleanup();
    let usage = client.memory_report();
    let (in_use, reserved) = (in_use_bytes(&usage), all_reserved(&usage));
    println!(
        "after cleanup: {} in use, {} reserved over all memories",
        format_bytes(in_use),
        format_bytes(reserved)
    );
    print!("{}", MemorySummary::new(&usage));
    drop(chain_live);
    Ok(true)
}

/// Bytes in use in the main memory.
fn in_use_bytes(report: &wgpu_memory::memory_management::MemoryReport) -> u64 {
    report.streams[0].pools.usage().bytes_in_use
}

/// Bytes reserved over every memory: main, readback and upload staging.
fn all_reserved(report: &wgpu_memory::memory_management::MemoryReport) -> u64 {
    let stream = &report.streams[0];
    stream.pools.usage().bytes_reserved
        + stream
            .auxiliary
            .iter()
            .map(|memory| memory.pools.usage().bytes_reserved)
            .sum::<u64>()
}
