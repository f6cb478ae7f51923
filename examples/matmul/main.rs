//! The main job: multiplies real matrices on the GPU through wgpu-memory's pools, checks
//! every element against a CPU reference, and prints GFLOP/s and the memory report.
//!
//! ```sh
//! cargo run --release --example matmul -- [M K N]     # default 1024 1024 1024
//! cargo run --release --example matmul -- --snapshot snapshot.json
//! ```

mod job;

use job::Dims;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use wgpu_memory::report::MemorySummary;
use wgpu_memory::{Client, ClientError};

const USAGE: &str = "\
usage: matmul [--snapshot FILE] [M K N]

Multiplies an M x K matrix by a K x N matrix (f32) on the GPU through wgpu-memory's pools,
compares every element with a CPU reference (relative tolerance 1e-4), and prints the
adapter, GFLOP/s (after one warm-up run) and the memory report.

  M K N    matrix sizes, positive integers (default: 1024 1024 1024)
  --snapshot FILE  record the memory history and write the memory snapshot (JSON) to
                   FILE at the end; draw it with `cargo run --example memory_viz -- FILE`
  --help   this text

Exits with status 1 on a mismatch (naming the first bad index and both values), 2 on bad
arguments or a GPU error, and 3 when wgpu finds no adapter (scripts/matmul.sh then
installs the software Vulkan driver and runs it again).";

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
    let (snapshot, args) = match take_snapshot_arg(args) {
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
    if snapshot.is_some() {
        client.record_history(HISTORY_EVENTS);
    }
    match run(&client, dims, snapshot) {
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

/// Splits `--snapshot FILE` off the arguments.
fn take_snapshot_arg(args: Vec<String>) -> Result<(Option<PathBuf>, Vec<String>), String> {
    let mut snapshot = None;
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--snapshot" {
            let file = args.next().ok_or("--snapshot needs a FILE")?;
            snapshot = Some(PathBuf::from(file));
        } else {
            rest.push(arg);
        }
    }
    Ok((snapshot, rest))
}

fn run(
    client: &Client,
    dims: Dims,
    snapshot: Option<PathBuf>,
) -> Result<bool, Box<dyn std::error::Error>> {
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
    print!("{}", MemorySummary(&client.memory_report()));
    if let Some(path) = snapshot {
        let json = client.memory_snapshot().to_json()?;
        std::fs::write(&path, json)
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        println!("snapshot: {}", path.display());
    }
    drop((lhs, rhs, out));
    Ok(true)
}
