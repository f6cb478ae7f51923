//! The untimed accounting pass and the timed replays of one trace on one side.

use std::time::Instant;

use crate::support_median::median;
use crate::traces::Trace;
use crate::web::{WebSide, replay};

/// What one side did on one trace, over identical passes on the same memory.
#[derive(Debug, Clone, Default)]
pub struct Accounting {
    /// The most bytes of buffers held at once over the first two passes.
    pub peak: u64,
    /// Buffers created during the first, the second and the third pass.
    pub created: [u64; 3],
    /// Where the side failed, if it did (the pass, the op and the error).
    pub failure: Option<String>,
    /// Median ns per op: a fresh memory's pass, and a pass after two warm-up passes.
    pub cold_ns: Option<f64>,
    pub warm_ns: Option<f64>,
}

/// Three passes of `trace` on a fresh side, counting buffers made in each and bytes
/// held over the first two.
pub fn account<W: WebSide>(make: impl Fn() -> W, trace: &Trace) -> Accounting {
    let mut side = make();
    let mut accounting = Accounting::default();
    for pass in 0..3 {
        let before = side.counter().allocs;
        if let Err(error) = replay(&mut side, trace) {
            accounting.failure = Some(format!("pass {}, {error}", pass + 1));
            break;
        }
        let counter = side.counter();
        accounting.created[pass] = counter.allocs - before;
        if pass == 1 {
            accounting.peak = counter.peak_bytes;
        }
    }
    side.release_all();
    accounting
}

/// Median ns/op of `runs` cold passes, each on a fresh side (building and dropping it
/// untimed).
pub fn time_cold<W: WebSide>(make: impl Fn() -> W, trace: &Trace, runs: usize) -> Option<f64> {
    let ops = trace.ops.len() as f64;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut side = make();
        let start = Instant::now();
        let result = replay(&mut side, trace);
        let elapsed = start.elapsed();
        result.ok()?;
        samples.push(elapsed.as_nanos() as f64 / ops);
        side.release_all();
    }
    median(samples)
}

/// Median ns/op of `runs` passes on one side that already replayed the trace twice.
pub fn time_warm<W: WebSide>(make: impl Fn() -> W, trace: &Trace, runs: usize) -> Option<f64> {
    let ops = trace.ops.len() as f64;
    let mut side = make();
    for _ in 0..2 {
        replay(&mut side, trace).ok()?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let result = replay(&mut side, trace);
        let elapsed = start.elapsed();
        result.ok()?;
        samples.push(elapsed.as_nanos() as f64 / ops);
    }
    side.release_all();
    median(samples)
}

/// Accounting and timing of one side on one trace; a side that failed is not timed.
pub fn measure<W: WebSide>(make: impl Fn() -> W, trace: &Trace, runs: usize) -> Accounting {
    let mut accounting = account(&make, trace);
    if accounting.failure.is_none() {
        accounting.cold_ns = time_cold(&make, trace, runs);
        accounting.warm_ns = time_warm(&make, trace, runs);
    }
    accounting
}
