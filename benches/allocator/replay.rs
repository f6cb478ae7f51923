//! Replaying a trace on a memory, and the two timed routines: cold (a fresh memory, page
//! allocations included) and warm (the steady state of a memory that saw the trace).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use cubecl_runtime::memory_management::ManagedMemoryHandle;

use crate::sides::Memory;
use crate::support_median::median;
use crate::traces::{Op, Trace};

/// Where a replay failed.
#[derive(Debug, Clone)]
pub struct Failure {
    pub op: usize,
    pub size: u64,
    pub message: String,
}

pub fn empty_slots(trace: &Trace) -> Vec<Option<ManagedMemoryHandle>> {
    (0..trace.slots).map(|_| None).collect()
}

/// Replays `trace` once. `after_op(memory, index, slots)` runs after every operation.
#[inline(always)]
pub fn replay<M: Memory>(
    memory: &mut M,
    trace: &Trace,
    slots: &mut [Option<ManagedMemoryHandle>],
    mut after_op: impl FnMut(&mut M, usize, &[Option<ManagedMemoryHandle>]),
) -> Result<(), Failure> {
    for (index, op) in trace.ops.iter().enumerate() {
        match *op {
            Op::Reserve { slot, size } => match memory.reserve(size) {
                Ok(handle) => slots[slot as usize] = Some(handle),
                Err(error) => {
                    return Err(Failure {
                        op: index,
                        size,
                        message: error.to_string(),
                    });
                }
            },
            Op::Drop { slot } => drop(slots[slot as usize].take()),
        }
        after_op(memory, index, slots);
    }
    Ok(())
}

/// Which state of a memory a timing measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A fresh memory replaying the trace once: page allocations included.
    Cold,
    /// A memory that already replayed the trace twice (untimed), replaying it again.
    Warm,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cold => "cold",
            Mode::Warm => "warm",
        }
    }
}

fn fail(side: &str, trace: &Trace, pass: u64, failure: Failure) -> ! {
    panic!(
        "{side} failed on trace `{}` (timed run, pass {pass}, op {} reserving {} B): {}",
        trace.name, failure.op, failure.size, failure.message
    )
}

/// `iters` cold replays, each on a fresh memory; only the replays are timed (building
/// and dropping the memory are not).
pub fn timed_cold<M: Memory>(
    make: impl Fn() -> M,
    trace: &Trace,
    side: &str,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for pass in 1..=iters {
        let mut memory = make();
        let mut slots = empty_slots(trace);
        let start = Instant::now();
        let result = replay(&mut memory, trace, &mut slots, |_, _, _| {});
        total += start.elapsed();
        if let Err(failure) = result {
            fail(side, trace, pass, failure);
        }
        drop(slots);
        memory.release_all();
        drop(memory);
    }
    record(trace, side, Mode::Cold, total, iters);
    total
}

/// A fresh memory and two warm-up passes (untimed: a memory may still rearrange its
/// pages on the second), then `iters` timed passes.
pub fn timed_warm<M: Memory>(
    make: impl Fn() -> M,
    trace: &Trace,
    side: &str,
    iters: u64,
) -> Duration {
    let mut memory = make();
    let mut slots = empty_slots(trace);
    for warm_up in 0..2 {
        if let Err(failure) = replay(&mut memory, trace, &mut slots, |_, _, _| {}) {
            fail(side, trace, warm_up, failure);
        }
    }
    let start = Instant::now();
    for pass in 1..=iters {
        if let Err(failure) = replay(&mut memory, trace, &mut slots, |_, _, _| {}) {
            fail(side, trace, pass, failure);
        }
    }
    let elapsed = start.elapsed();
    drop(slots);
    memory.release_all();
    drop(memory);
    record(trace, side, Mode::Warm, elapsed, iters);
    elapsed
}

/// One call criterion made to a timed routine.
struct Timing {
    trace: &'static str,
    side: &'static str,
    mode: Mode,
    ns_per_op: f64,
}

/// Every call criterion made, its warm-up calls included (each call measures on its own
/// memory, so every call is a valid sample).
static TIMINGS: Mutex<Vec<Timing>> = Mutex::new(Vec::new());

fn record(trace: &Trace, side: &str, mode: Mode, elapsed: Duration, iters: u64) {
    let side = [crate::sides::OURS, crate::sides::PEER, crate::sides::FLOOR]
        .into_iter()
        .find(|name| *name == side)
        .unwrap_or("other");
    TIMINGS.lock().unwrap().push(Timing {
        trace: trace.name,
        side,
        mode,
        ns_per_op: elapsed.as_nanos() as f64 / (iters as f64 * trace.ops.len() as f64),
    });
}

/// Median ns/op of the calls made for `(trace, side, mode)`.
pub fn median_ns_per_op(trace: &str, side: &str, mode: Mode) -> Option<f64> {
    let timings = TIMINGS.lock().unwrap();
    let values: Vec<f64> = timings
        .iter()
        .filter(|t| t.trace == trace && t.side == side && t.mode == mode)
        .map(|t| t.ns_per_op)
        .collect();
    median(values)
}
