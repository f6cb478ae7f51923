//! Exclusive pages against the web's buffer caches: the allocator bench's traces, and a
//! text-generation trace of ever-new tensor sizes, replayed on
//!
//! - `ours`: this crate's `MemoryManagement` with `MemoryConfiguration::ExclusivePages`,
//!   the layout of an exclusive-memory-only build (wasm32 with WebGPU), where every
//!   reservation is a page (a wgpu buffer) of its own and pooling is reusing whole free
//!   pages;
//! - `bucket`: a model of ONNX Runtime Web's GPU buffer cache (see `exclusive/caches.rs`);
//! - `exact`: a cache that reuses a free buffer only for exactly the same size.
//!
//! Every side's buffers are pages of the same counting host storage. Per trace and side
//! it prints peak bytes reserved (over two identical passes), peak in use, their ratio,
//! buffers made in the first and in the second pass, and the median replay time, cold
//! and warm. See `benches/README.md`.
//!
//! `BENCH_TRACES=a,b` keeps only the named traces; `BENCH_RUNS=n` sets the timed passes
//! per side (default 7; `BENCH_QUICK=1`: 3); `cargo test --bench exclusive` runs reduced
//! traces once each and fails if this crate fails one.

#[path = "exclusive/caches.rs"]
mod caches;
#[path = "exclusive/churn.rs"]
mod churn;
#[path = "exclusive/measure.rs"]
mod measure;
#[path = "exclusive/report.rs"]
mod report;
// Shared with the allocator bench: the page-counting storage (its other sides are not
// used here).
#[allow(dead_code)]
#[path = "allocator/sides.rs"]
mod sides;
#[path = "support/median.rs"]
mod support_median;
// Shared with the allocator bench: the traces.
#[allow(dead_code)]
#[path = "allocator/traces.rs"]
mod traces;
#[path = "exclusive/web.rs"]
mod web;

use caches::{Cache, Policy};
use measure::measure;
use report::{Row, ours_failed, print_report};
use traces::Trace;
use web::Ours;

/// The traces, in the order of the tables.
fn all_traces(test_mode: bool) -> Vec<Trace> {
    let (scale, churn) = if test_mode {
        (traces::TEST, churn::TEST)
    } else {
        (traces::FULL, churn::FULL)
    };
    let mut all = traces::traces(scale);
    all.push(churn::model_churn(churn));
    all
}

/// The traces `BENCH_TRACES` (comma-separated names) keeps; all when unset or empty.
fn selected(all: Vec<Trace>) -> Vec<Trace> {
    let wanted = std::env::var("BENCH_TRACES").unwrap_or_default();
    let names: Vec<&str> = wanted.split(',').filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return all;
    }
    all.into_iter()
        .filter(|trace| names.contains(&trace.name))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // As criterion decides it: without `--bench` (cargo test --benches), or with
    // `--test`, each trace runs once at a reduced size.
    let test_mode = !has("--bench") || has("--test");
    if has("--list") {
        return;
    }
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let runs = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse::<usize>().ok())
        .filter(|&runs| runs > 0)
        .unwrap_or(match (test_mode, quick) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 7,
        });
    if test_mode {
        caches::check_policies();
    }

    let rows: Vec<Row> = selected(all_traces(test_mode))
        .into_iter()
        .map(|trace| {
            let slots = trace.slots;
            eprintln!("exclusive bench: {} ({} ops)", trace.name, trace.ops.len());
            Row {
                ours: measure(|| Ours::new(slots), &trace, runs),
                bucket: measure(|| Cache::new(Policy::Buckets, slots), &trace, runs),
                exact: measure(|| Cache::new(Policy::Exact, slots), &trace, runs),
                trace,
            }
        })
        .collect();
    print_report(&rows, runs, test_mode);

    if test_mode && ours_failed(&rows) {
        eprintln!("wgpu-memory failed at least one trace (see above)");
        std::process::exit(1);
    }
}
