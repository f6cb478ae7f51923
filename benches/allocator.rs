//! Allocator benchmark: the same allocation traces replayed against this crate's
//! `MemoryManagement` and cubecl-server's, both over host (`BytesStorage`) pages, in one
//! run, cold and warm, with the handle floor beside them.
//!
//! - Timing (criterion): nanoseconds per operation (one reservation or one handle drop),
//!   cold (a fresh memory replaying the trace once, page allocations included) and warm
//!   (a memory that replayed the trace twice, untimed, replaying it again).
//! - Accounting (untimed, on a fresh memory wrapped in a page-counting storage): peak
//!   bytes in use and reserved, efficiency, device allocations.
//!
//! `BENCH_QUICK=1` shortens criterion's measurement; `BENCH_TRACES=a,b` keeps only the
//! named traces; `cargo test --benches` runs every trace once at a reduced size and
//! fails if this crate errors on one. See `benches/README.md`.

#[path = "allocator/accounting.rs"]
mod accounting;
#[path = "allocator/replay.rs"]
mod replay;
#[path = "allocator/report.rs"]
mod report;
#[path = "allocator/sides.rs"]
mod sides;
#[path = "support/median.rs"]
mod support_median;
#[path = "allocator/traces.rs"]
mod traces;

use std::sync::OnceLock;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};

use accounting::{account_both, install_panic_hook};
use replay::{Mode, timed_cold, timed_warm};
use report::{Prepared, print_report};
use sides::{FLOOR, HandleFloor, OURS, PEER};
use traces::{FULL, TEST, Trace, random_seeded, traces};

/// How many other seeds the random trace is drawn from for the efficiency spread.
const SPREAD_SEEDS: u64 = 12;

static PREPARED: OnceLock<Prepared> = OnceLock::new();

/// One group per trace, with a function per side and mode: `wgpu-memory/cold`, ...
fn allocator(c: &mut Criterion) {
    let prepared = PREPARED.get().expect("prepared in main");
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        let mut group = c.benchmark_group(trace.name);
        group.throughput(Throughput::Elements(trace.ops.len() as u64));
        for mode in [Mode::Cold, Mode::Warm] {
            // A side that failed the accounting pass would fail here too; it is reported
            // in the tables instead of aborting every other benchmark.
            if ours.failure.is_none() {
                bench(&mut group, OURS, mode, trace, sides::ours);
            }
            bench(&mut group, FLOOR, mode, trace, HandleFloor::new);
            if peer.failure.is_none() {
                bench(&mut group, PEER, mode, trace, sides::peer);
            }
        }
        group.finish();
    }
}

fn bench<M: sides::Memory>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    side: &'static str,
    mode: Mode,
    trace: &Trace,
    make: fn() -> M,
) {
    let id = BenchmarkId::new(side, mode.name());
    group.bench_function(id, |b| {
        b.iter_custom(|iters| match mode {
            Mode::Cold => timed_cold(make, trace, side, iters),
            Mode::Warm => timed_warm(make, trace, side, iters),
        })
    });
}

fn quick() -> bool {
    std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn config() -> Criterion {
    let criterion = Criterion::default();
    if quick() {
        criterion
            .measurement_time(Duration::from_secs(1))
            .warm_up_time(Duration::from_millis(300))
            .sample_size(10)
    } else {
        criterion
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = allocator
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

/// `BENCH_PROFILE=trace:side:mode:passes` (side `wgpu-memory`, `cubecl-server` or
/// `handle-floor`; mode `cold` or `warm`): replays one trace that many times without
/// criterion or accounting and exits, for a profiler or `perf stat` (run it with two pass
/// counts and take the difference to remove the setup).
fn profile(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [name, side, mode, passes] = parts[..] else {
        panic!("BENCH_PROFILE={spec}: expected trace:side:mode:passes");
    };
    let passes: u64 = passes.parse().expect("passes: a number");
    let mode = if mode == "cold" {
        Mode::Cold
    } else {
        Mode::Warm
    };
    let trace = traces(FULL)
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no trace named {name}"));
    let elapsed = match (side, mode) {
        (OURS, Mode::Cold) => timed_cold(sides::ours, &trace, OURS, passes),
        (OURS, Mode::Warm) => timed_warm(sides::ours, &trace, OURS, passes),
        (PEER, Mode::Cold) => timed_cold(sides::peer, &trace, PEER, passes),
        (PEER, Mode::Warm) => timed_warm(sides::peer, &trace, PEER, passes),
        (_, Mode::Cold) => timed_cold(HandleFloor::new, &trace, FLOOR, passes),
        (_, Mode::Warm) => timed_warm(HandleFloor::new, &trace, FLOOR, passes),
    };
    println!(
        "{name} {side} {}: {:.1} ns/op over {passes} passes",
        mode.name(),
        elapsed.as_nanos() as f64 / (passes as f64 * trace.ops.len() as f64)
    );
}

fn main() {
    if let Ok(spec) = std::env::var("BENCH_PROFILE") {
        profile(&spec);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // Criterion's rule: without `--bench` (cargo test --benches), or with `--test`, it
    // runs each benchmark once as a test.
    let test_mode = !has("--bench") || has("--test");
    if has("--list") {
        let traces = traces(TEST);
        let accounting = traces.iter().map(|_| Default::default()).collect();
        PREPARED.get_or_init(|| Prepared {
            traces,
            accounting,
            random_spread: Vec::new(),
        });
        benches();
        return;
    }
    install_panic_hook();

    let scale = if test_mode { TEST } else { FULL };
    let traces = selected(traces(scale));
    let accounting = traces.iter().map(account_both).collect();
    // The random trace is one draw of many: its efficiency over other seeds says how
    // much of a side's figure is the layout and how much is the draw.
    let seeds = match (test_mode, traces.iter().any(|t| t.name == "random")) {
        (_, false) => 0,
        (true, true) => 2,
        (false, true) => SPREAD_SEEDS,
    };
    let random_spread = (1..=seeds)
        .map(|k| account_both(&random_seeded(scale, 0x5EED_1000 + k)))
        .collect();
    let prepared = PREPARED.get_or_init(|| Prepared {
        traces,
        accounting,
        random_spread,
    });

    // BENCH_ACCOUNTING_ONLY=1: the memory figures alone, without the timed runs.
    if !std::env::var("BENCH_ACCOUNTING_ONLY").is_ok_and(|v| v == "1") {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }

    print_report(prepared, test_mode, quick());

    let ours_failed = prepared
        .accounting
        .iter()
        .any(|(ours, _)| ours.failure.is_some() || ours.ids_reused > 0);
    if test_mode && ours_failed {
        eprintln!("wgpu-memory failed at least one trace or reused an id (see above)");
        std::process::exit(1);
    }
}
