//! Allocator benchmark: the same allocation traces replayed against this crate's
//! `MemoryManagement` and cubecl-server's, both over host (`BytesStorage`) pages.
//!
//! - Timing (criterion): steady-state nanoseconds per operation, one operation being one
//!   reservation or one handle drop. Building the memory and one warm-up pass of the trace
//!   are not timed.
//! - Accounting (one untimed pass per trace and side, on a fresh memory wrapped in
//!   [`CountingStorage`]): peak bytes in use, peak bytes reserved, efficiency, device
//!   allocations (total, second half of the trace, and a second replay of the trace).
//!
//! `BENCH_QUICK=1` shortens criterion's measurement. `cargo test --benches` runs every
//! trace once at a reduced size and fails if either side errors or panics.
//! See `benches/README.md`.

#[path = "support/median.rs"]
mod support_median;
use support_median::median;

use std::cell::Cell;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration, MemoryUsage};
use cubecl_runtime::server::IoError;
use cubecl_runtime::storage::{ComputeStorage, StorageHandle, StorageId};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Device properties given to both sides.
const MAX_PAGE_SIZE: u64 = 2 * GIB;
const ALIGNMENT: u64 = 256;

const OURS: &str = "wgpu-memory";
const PEER: &str = "cubecl-server";
const FLOOR: &str = "handle-floor";

// ---------------------------------------------------------------------------------------
// Traces
// ---------------------------------------------------------------------------------------

/// One operation of a trace. Slots name live handles: a `Reserve` fills an empty slot, a
/// `Drop` empties a full one (dropping the handle releases the memory on both sides).
#[derive(Debug, Clone, Copy)]
enum Op {
    Reserve { slot: u32, size: u64 },
    Drop { slot: u32 },
}

/// A closed trace: every handle it reserves it also drops, so it can be replayed any
/// number of times on the same memory.
struct Trace {
    name: &'static str,
    description: String,
    ops: Vec<Op>,
    slots: usize,
}

impl Trace {
    fn reserves(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op, Op::Reserve { .. }))
            .count()
    }

    /// Peak of the sum of the requested sizes of live handles.
    fn peak_live_bytes(&self) -> u64 {
        let mut sizes = vec![0u64; self.slots];
        let (mut live, mut peak) = (0u64, 0u64);
        for op in &self.ops {
            match *op {
                Op::Reserve { slot, size } => {
                    sizes[slot as usize] = size;
                    live += size;
                    peak = peak.max(live);
                }
                Op::Drop { slot } => live -= sizes[slot as usize],
            }
        }
        peak
    }
}

/// xorshift64*: small, fixed-seed, good enough for traces.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// Uniform in `lo..=hi`.
    fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        lo + (self.next() % (hi - lo + 1))
    }

    /// Log-uniform in `lo..=hi`: as many sizes per octave at each end.
    fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        ((l + (h - l) * unit).exp() as u64).clamp(lo, hi)
    }
}

/// Sizes of trace lengths: full for benchmarking, reduced for `cargo test --benches`.
#[derive(Clone, Copy)]
struct Scale {
    random_reserves: usize,
    training_steps: usize,
    inference_repeats: usize,
    drifting_steps: usize,
    tiny_reserves: usize,
}

const FULL: Scale = Scale {
    random_reserves: 20_000,
    training_steps: 200,
    inference_repeats: 200,
    drifting_steps: 4_000,
    tiny_reserves: 50_000,
};

const TEST: Scale = Scale {
    random_reserves: 1_000,
    training_steps: 10,
    inference_repeats: 10,
    drifting_steps: 400,
    tiny_reserves: 3_000,
};

/// Random replacement: fill to `live` handles, then every reservation first drops a random
/// live handle; at the end everything left is dropped.
fn replacement(
    name: &'static str,
    seed: u64,
    live: usize,
    reserves: usize,
    min: u64,
    max: u64,
) -> Trace {
    let mut rng = Rng::new(seed);
    let mut free: Vec<u32> = (0..live as u32).rev().collect();
    let mut held: Vec<u32> = Vec::with_capacity(live);
    let mut ops = Vec::with_capacity(reserves * 2);
    for _ in 0..reserves {
        if held.len() == live {
            let victim = held.swap_remove(rng.below(held.len() as u64) as usize);
            ops.push(Op::Drop { slot: victim });
            free.push(victim);
        }
        let slot = free.pop().expect("a free slot");
        ops.push(Op::Reserve {
            slot,
            size: rng.uniform(min, max),
        });
        held.push(slot);
    }
    for slot in held {
        ops.push(Op::Drop { slot });
    }
    Trace {
        name,
        description: format!(
            "{reserves} reservations of {}..={} B (uniform), {live} live, random replacement",
            min, max
        ),
        ops,
        slots: live,
    }
}

fn random(scale: Scale) -> Trace {
    random_seeded(scale, 0x5EED_0001)
}

/// The random trace's shape drawn from another seed.
fn random_seeded(scale: Scale, seed: u64) -> Trace {
    replacement("random", seed, 64, scale.random_reserves, 64, MIB)
}

fn tiny(scale: Scale) -> Trace {
    replacement("tiny", 0x5EED_0005, 1024, scale.tiny_reserves, 1, 256)
}

/// Weights kept for the whole trace; per step a forward pass (activations in layer order)
/// and a backward pass (activations dropped in reverse, each layer's gradients reserved
/// just before its activation goes); gradients dropped at the end of the step.
fn training(scale: Scale) -> Trace {
    const WEIGHTS: usize = 20;
    const LAYERS: usize = 12;
    let mut rng = Rng::new(0x5EED_0002);
    let weights: Vec<u64> = (0..WEIGHTS)
        .map(|_| rng.log_uniform(64 * KIB, 4 * MIB))
        .collect();
    let activations: Vec<u64> = (0..LAYERS)
        .map(|_| rng.log_uniform(256 * KIB, 8 * MIB))
        .collect();
    let layer_of = |weight: usize| weight * LAYERS / WEIGHTS;
    let weight_slot = |w: usize| w as u32;
    let act_slot = |l: usize| (WEIGHTS + l) as u32;
    let grad_slot = |w: usize| (WEIGHTS + LAYERS + w) as u32;

    let mut ops = Vec::new();
    for (w, &size) in weights.iter().enumerate() {
        ops.push(Op::Reserve {
            slot: weight_slot(w),
            size,
        });
    }
    for _ in 0..scale.training_steps {
        for (l, &size) in activations.iter().enumerate() {
            ops.push(Op::Reserve {
                slot: act_slot(l),
                size,
            });
        }
        for l in (0..LAYERS).rev() {
            for (w, &size) in weights.iter().enumerate() {
                if layer_of(w) == l {
                    ops.push(Op::Reserve {
                        slot: grad_slot(w),
                        size,
                    });
                }
            }
            ops.push(Op::Drop { slot: act_slot(l) });
        }
        for w in 0..WEIGHTS {
            ops.push(Op::Drop { slot: grad_slot(w) });
        }
    }
    for w in 0..WEIGHTS {
        ops.push(Op::Drop {
            slot: weight_slot(w),
        });
    }
    Trace {
        name: "training",
        description: format!(
            "{WEIGHTS} weights of 64 KiB..4 MiB kept; {} steps of {LAYERS} activations \
             (256 KiB..8 MiB, fixed per layer) + {WEIGHTS} gradients",
            scale.training_steps
        ),
        ops,
        slots: WEIGHTS * 2 + LAYERS,
    }
}

/// One fixed sequence of 50 sizes reserved, then all dropped in the same order, repeated.
fn inference(scale: Scale) -> Trace {
    const TENSORS: usize = 50;
    let mut rng = Rng::new(0x5EED_0003);
    let sizes: Vec<u64> = (0..TENSORS)
        .map(|_| rng.log_uniform(KIB, 16 * MIB))
        .collect();
    let mut ops = Vec::new();
    for _ in 0..scale.inference_repeats {
        reserve_then_drop(&mut ops, &sizes);
    }
    Trace {
        name: "inference",
        description: format!(
            "{TENSORS} fixed sizes of 1 KiB..16 MiB (log-uniform) reserved then dropped, \
             {} times",
            scale.inference_repeats
        ),
        ops,
        slots: TENSORS,
    }
}

/// Appends one step that reserves `sizes[i]` into slot `i`, then drops every slot in
/// the same order.
fn reserve_then_drop(ops: &mut Vec<Op>, sizes: &[u64]) {
    for (slot, &size) in sizes.iter().enumerate() {
        ops.push(Op::Reserve {
            slot: slot as u32,
            size,
        });
    }
    for slot in 0..sizes.len() {
        ops.push(Op::Drop { slot: slot as u32 });
    }
}

/// Field scenario C01: the working size drifts by 1 MiB every 100 steps over 20 sizes.
fn drifting(scale: Scale) -> Trace {
    const BUFFERS: usize = 8;
    let mut ops = Vec::new();
    for step in 0..scale.drifting_steps as u64 {
        let size = MIB * (1 + (step / 100) % 20);
        reserve_then_drop(&mut ops, &[size; BUFFERS]);
    }
    Trace {
        name: "drifting",
        description: format!(
            "{} steps: {BUFFERS} buffers of 1 MiB * (1 + (step / 100) % 20), all dropped",
            scale.drifting_steps
        ),
        ops,
        slots: BUFFERS,
    }
}

fn traces(scale: Scale) -> Vec<Trace> {
    vec![
        random(scale),
        training(scale),
        inference(scale),
        drifting(scale),
        tiny(scale),
    ]
}

// ---------------------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------------------

/// What a trace needs from a memory.
trait Memory {
    type Error: Display;
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error>;
    fn usage(&self) -> MemoryUsage;
}

fn properties() -> cubecl_ir::MemoryDeviceProperties {
    cubecl_ir::MemoryDeviceProperties::new(MAX_PAGE_SIZE, ALIGNMENT)
}

struct Ours<S: ComputeStorage>(wgpu_memory::memory_management::MemoryManagement<S>);

impl<S: ComputeStorage> Ours<S> {
    fn new(storage: S) -> Self {
        Self(
            wgpu_memory::memory_management::MemoryManagement::from_configuration(
                storage,
                &properties(),
                MemoryConfiguration::default(),
                wgpu_memory::memory_management::MemoryManagementOptions::new("bench"),
            ),
        )
    }
}

impl<S: ComputeStorage> Memory for Ours<S> {
    type Error = wgpu_memory::memory_management::ReserveError;

    #[inline]
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        self.0.reserve(size)
    }

    fn usage(&self) -> MemoryUsage {
        self.0.memory_usage()
    }
}

struct Peer<S: ComputeStorage> {
    memory: cubecl_server::memory_management::MemoryManagement<S>,
    failures: cubecl_server::memory_management::ErrorGraph,
}

impl<S: ComputeStorage> Peer<S> {
    fn new(storage: S) -> Self {
        Self {
            memory: cubecl_server::memory_management::MemoryManagement::from_configuration(
                storage,
                &properties(),
                MemoryConfiguration::default(),
                Arc::new(cubecl_server::logging::ServerLogger::default()),
                cubecl_server::memory_management::MemoryManagementOptions::new("bench"),
            ),
            failures: Default::default(),
        }
    }
}

impl<S: ComputeStorage> Memory for Peer<S> {
    type Error = IoError;

    #[inline]
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        self.memory.reserve(
            size,
            cubecl_server::memory_management::PageUpdate::Allow,
            &mut self.failures,
        )
    }

    fn usage(&self) -> MemoryUsage {
        self.memory.memory_report().usage()
    }
}

/// The least any allocator returning cubecl's handle type does per operation: mint a
/// `ManagedMemoryHandle` (a fresh id and two `Arc`s, as the spec's value type requires:
/// ids are never reused), keep a clone to learn when every owner let go, and notice that
/// it did. No bytes are placed. Both real sides pay this, so `peer ns/op / floor ns/op`
/// is the largest speedup any allocator could show on a trace.
struct HandleFloor {
    kept: Vec<ManagedMemoryHandle>,
    /// The list length that triggers the next pass.
    next_pass: usize,
}

impl HandleFloor {
    fn new() -> Self {
        Self {
            kept: Vec::new(),
            next_pass: 64,
        }
    }
}

impl Memory for HandleFloor {
    type Error = std::convert::Infallible;

    #[inline]
    fn reserve(&mut self, _size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        // Forget the dropped handles in one pass once the list doubles: one `is_free` per
        // reservation, amortised.
        if self.kept.len() >= self.next_pass {
            self.kept.retain(|handle| !handle.is_free());
            self.next_pass = (2 * self.kept.len()).max(64);
        }
        let handle = ManagedMemoryHandle::new();
        self.kept.push(handle.clone());
        Ok(handle)
    }

    fn usage(&self) -> MemoryUsage {
        MemoryUsage::default()
    }
}

/// Counts the pages a storage makes, and the most bytes it held at once. Used on both
/// sides in the accounting pass (never in the timed runs).
struct CountingStorage<S> {
    inner: S,
    allocs: u64,
    peak_bytes: u64,
}

impl<S> CountingStorage<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            allocs: 0,
            peak_bytes: 0,
        }
    }
}

impl<S: ComputeStorage> ComputeStorage for CountingStorage<S> {
    type Resource = S::Resource;

    fn alignment(&self) -> usize {
        self.inner.alignment()
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<Self::Resource, IoError> {
        self.inner.get(handle)
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        let handle = self.inner.alloc(size)?;
        self.allocs += 1;
        self.peak_bytes = self.peak_bytes.max(self.inner.bytes_allocated());
        Ok(handle)
    }

    fn dealloc(&mut self, id: StorageId) {
        self.inner.dealloc(id)
    }

    fn flush(&mut self) {
        self.inner.flush()
    }

    fn bytes_allocated(&self) -> u64 {
        self.inner.bytes_allocated()
    }
}

/// Reaches the counting storage inside either side.
trait Counted: Memory {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage>;
    /// Our `BytesStorage`'s own page count, to cross-check the wrapper.
    fn own_count(&mut self) -> Option<u64> {
        None
    }
}

impl Counted for Ours<CountingStorage<wgpu_memory::storage::BytesStorage>> {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage> {
        self.0.storage()
    }

    fn own_count(&mut self) -> Option<u64> {
        Some(self.0.storage().inner.allocations_made())
    }
}

impl Counted for Peer<CountingStorage<cubecl_server::storage::BytesStorage>> {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage> {
        self.memory.storage()
    }
}

// ---------------------------------------------------------------------------------------
// Replaying a trace
// ---------------------------------------------------------------------------------------

/// Where a replay failed.
#[derive(Debug, Clone)]
struct Failure {
    op: usize,
    size: u64,
    message: String,
}

fn empty_slots(trace: &Trace) -> Vec<Option<ManagedMemoryHandle>> {
    (0..trace.slots).map(|_| None).collect()
}

/// Replays `trace` once. `after_op(memory, index, slots)` runs after every operation.
#[inline(always)]
fn replay<M: Memory>(
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

/// The timed routine: a fresh memory and one warm-up pass (untimed), then `iters` passes.
fn timed<M: Memory>(make: impl Fn() -> M, trace: &Trace, side: &str, iters: u64) -> Duration {
    let mut memory = make();
    let mut slots = empty_slots(trace);
    let fail = |pass: u64, failure: Failure| -> ! {
        panic!(
            "{side} failed on trace `{}` (timed run, pass {pass}, op {} reserving {} B): {}",
            trace.name, failure.op, failure.size, failure.message
        )
    };
    // Two warm-up passes: a memory may still rearrange its pages on the second (see the
    // "allocs 2nd pass" column); the third is the state that repeats.
    for warm_up in 0..2 {
        if let Err(failure) = replay(&mut memory, trace, &mut slots, |_, _, _| {}) {
            fail(warm_up, failure);
        }
    }
    let start = Instant::now();
    for pass in 1..=iters {
        if let Err(failure) = replay(&mut memory, trace, &mut slots, |_, _, _| {}) {
            fail(pass, failure);
        }
    }
    let elapsed = start.elapsed();
    drop(slots);
    drop(memory);
    TIMINGS.lock().unwrap().push(Timing {
        trace: trace.name,
        side: side.to_string(),
        ns_per_op: elapsed.as_nanos() as f64 / (iters as f64 * trace.ops.len() as f64),
    });
    elapsed
}

/// One call criterion made to a timed routine.
struct Timing {
    trace: &'static str,
    side: String,
    ns_per_op: f64,
}

/// Every call criterion made, warm-up calls included (each call warms its own memory
/// up first, so every call measures the steady state).
static TIMINGS: Mutex<Vec<Timing>> = Mutex::new(Vec::new());

/// Median ns/op of the calls made for `(trace, side)`, and how many calls there were.
fn median_ns_per_op(trace: &str, side: &str) -> Option<(f64, usize)> {
    let timings = TIMINGS.lock().unwrap();
    let values: Vec<f64> = timings
        .iter()
        .filter(|t| t.trace == trace && t.side == side)
        .map(|t| t.ns_per_op)
        .collect();
    let n = values.len();
    median(values).map(|median| (median, n))
}

// ---------------------------------------------------------------------------------------
// The accounting pass
// ---------------------------------------------------------------------------------------

/// What one side did with one trace, outside criterion timing.
#[derive(Debug, Clone, Default)]
struct Accounting {
    /// Operations completed (all of them unless `failure`).
    ops_done: usize,
    peak_in_use: u64,
    peak_reserved: u64,
    /// Most bytes the storage held at once (sampled at each page allocation).
    peak_storage: u64,
    allocs_total: u64,
    /// Pages made during the second half of the trace's operations.
    allocs_second_half: u64,
    /// Pages made while the trace was replayed a second time on the same memory.
    allocs_replay: Option<u64>,
    /// Pages made during a third replay: the state criterion times (after two warm-up
    /// passes). A memory that settled makes none.
    allocs_third: Option<u64>,
    /// Handle ids minted per reservation during the third replay (read off cubecl's
    /// process-wide id counter). 1.0: one fresh id per allocation; more: ids are also
    /// minted for other things (cubecl-server's split remainders); less: some
    /// reservations handed out an id an earlier allocation already had.
    ids_per_reserve_third: Option<f64>,
    /// Reservations, over the three passes, that handed out an id an earlier allocation
    /// already had (a weak binding of the earlier one then upgrades to the later).
    ids_reused: usize,
    /// Ops after which the reported `bytes_in_use` was not the sum of the live requested
    /// sizes, and the largest difference seen.
    in_use_mismatches: usize,
    in_use_max_diff: i128,
    /// Our `BytesStorage::allocations_made()` when it disagrees with the wrapper's count.
    own_count_mismatch: Option<(u64, u64)>,
    failure: Option<String>,
}

impl Accounting {
    fn efficiency(&self) -> f64 {
        if self.peak_reserved == 0 {
            f64::NAN
        } else {
            self.peak_in_use as f64 / self.peak_reserved as f64
        }
    }

    /// Peak in use over the most bytes the storage held in any of the three passes: what
    /// a memory that rearranges its pages on replays costs in the end.
    fn efficiency_all_passes(&self) -> f64 {
        if self.peak_storage == 0 {
            f64::NAN
        } else {
            self.peak_in_use as f64 / self.peak_storage as f64
        }
    }
}

/// The message and location of the last panic, set by the hook in `main`.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(non-string panic payload)".to_string());
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "unknown location".to_string());
        *LAST_PANIC.lock().unwrap() = Some(format!("panicked at {location}: {message}"));
        previous(info);
    }));
}

/// The id the next `ManagedMemoryHandle` will get: cubecl mints ids from one
/// process-wide counter, so the difference of two readings (less the probe itself) is the
/// number of handles minted in between, on this thread's single-threaded bench.
fn next_handle_id() -> usize {
    ManagedMemoryHandle::new().binding().id().value
}

fn account<M: Counted>(make: impl Fn() -> M, trace: &Trace) -> Accounting {
    let current_op = Cell::new(0usize);
    let pass = Cell::new(1u32);
    let mut result = Accounting::default();
    // Every id handed out so far; a reservation whose id is already here reused one.
    let seen = std::cell::RefCell::new(std::collections::HashSet::new());
    let reused = Cell::new(0usize);
    let note_id = |index: usize, slots: &[Option<ManagedMemoryHandle>]| {
        if let Op::Reserve { slot, .. } = trace.ops[index]
            && let Some(handle) = &slots[slot as usize]
            && !seen.borrow_mut().insert(handle.clone().binding().id())
        {
            reused.set(reused.get() + 1);
        }
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut memory = make();
        let mut slots = empty_slots(trace);
        let mut sizes = vec![0u64; trace.slots];
        let mut live = 0u64;
        let half = trace.ops.len() / 2;
        let mut allocs_at_half = 0;
        let first = replay(&mut memory, trace, &mut slots, |memory, index, slots| {
            current_op.set(index + 1);
            note_id(index, slots);
            match trace.ops[index] {
                Op::Reserve { slot, size } => {
                    sizes[slot as usize] = size;
                    live += size;
                }
                Op::Drop { slot } => live -= sizes[slot as usize],
            }
            let usage = memory.usage();
            result.ops_done = index + 1;
            result.peak_in_use = result.peak_in_use.max(usage.bytes_in_use);
            result.peak_reserved = result.peak_reserved.max(usage.bytes_reserved);
            if usage.bytes_in_use != live {
                result.in_use_mismatches += 1;
                let diff = usage.bytes_in_use as i128 - live as i128;
                if diff.abs() > result.in_use_max_diff.abs() {
                    result.in_use_max_diff = diff;
                }
            }
            if index + 1 == half {
                allocs_at_half = memory.counter().allocs;
            }
        });
        let allocs = memory.counter().allocs;
        result.allocs_total = allocs;
        result.allocs_second_half = allocs - allocs_at_half;
        if let Some(own) = memory.own_count()
            && own != allocs
        {
            result.own_count_mismatch = Some((own, allocs));
        }
        if let Err(failure) = first {
            result.peak_storage = memory.counter().peak_bytes;
            result.failure = Some(format!(
                "reserve failed at op {} of {} (reserving {} B): {}",
                failure.op,
                trace.ops.len(),
                failure.size,
                failure.message
            ));
            return;
        }
        pass.set(2);
        current_op.set(0);
        let second = replay(&mut memory, trace, &mut slots, |_, index, slots| {
            current_op.set(index + 1);
            note_id(index, slots);
        });
        let after_second = memory.counter().allocs;
        if let Err(failure) = second {
            result.peak_storage = memory.counter().peak_bytes;
            result.failure = Some(format!(
                "reserve failed on the second replay at op {} (reserving {} B): {}",
                failure.op, failure.size, failure.message
            ));
            return;
        }
        result.allocs_replay = Some(after_second - allocs);
        pass.set(3);
        current_op.set(0);
        let ids_before = next_handle_id();
        let third = replay(&mut memory, trace, &mut slots, |_, index, slots| {
            current_op.set(index + 1);
            note_id(index, slots);
        });
        let ids_minted = next_handle_id() - ids_before - 1;
        result.peak_storage = memory.counter().peak_bytes;
        match third {
            Ok(()) => {
                result.allocs_third = Some(memory.counter().allocs - after_second);
                result.ids_per_reserve_third =
                    Some(ids_minted as f64 / trace.reserves().max(1) as f64);
            }
            Err(failure) => {
                result.failure = Some(format!(
                    "reserve failed on the third replay at op {} (reserving {} B): {}",
                    failure.op, failure.size, failure.message
                ))
            }
        }
    }));
    result.ids_reused = reused.get();
    if outcome.is_err() {
        let op = current_op.get();
        let what = trace
            .ops
            .get(op)
            .map(|op| format!("{op:?}"))
            .unwrap_or_else(|| "after the last op (dropping the memory)".to_string());
        let panic = LAST_PANIC
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| "panicked".to_string());
        result.failure = Some(format!(
            "{panic} (pass {}, op {op} of {}: {what})",
            pass.get(),
            trace.ops.len()
        ));
    }
    result
}

// ---------------------------------------------------------------------------------------
// Criterion
// ---------------------------------------------------------------------------------------

struct Prepared {
    traces: Vec<Trace>,
    /// Per trace: (ours, peer).
    accounting: Vec<(Accounting, Accounting)>,
    /// The random trace drawn from other seeds: (ours, peer) per seed.
    random_spread: Vec<(Accounting, Accounting)>,
}

/// How many other seeds the random trace is drawn from for the efficiency spread.
const SPREAD_SEEDS: u64 = 12;

/// Both sides' accounting on `trace`, each on a fresh memory.
fn account_both(trace: &Trace) -> (Accounting, Accounting) {
    let ours = account(
        || {
            Ours::new(CountingStorage::new(
                wgpu_memory::storage::BytesStorage::default(),
            ))
        },
        trace,
    );
    let peer = account(
        || {
            Peer::new(CountingStorage::new(
                cubecl_server::storage::BytesStorage::default(),
            ))
        },
        trace,
    );
    (ours, peer)
}

static PREPARED: OnceLock<Prepared> = OnceLock::new();

fn allocator(c: &mut Criterion) {
    let prepared = PREPARED.get().expect("prepared in main");
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        let mut group = c.benchmark_group(trace.name);
        group.throughput(Throughput::Elements(trace.ops.len() as u64));
        // A side that failed the accounting pass would fail here too; it is reported in
        // the tables instead of aborting every other benchmark.
        if ours.failure.is_none() {
            group.bench_function(BenchmarkId::from_parameter(OURS), |b| {
                b.iter_custom(|iters| {
                    timed(
                        || Ours::new(wgpu_memory::storage::BytesStorage::default()),
                        trace,
                        OURS,
                        iters,
                    )
                })
            });
        }
        group.bench_function(BenchmarkId::from_parameter(FLOOR), |b| {
            b.iter_custom(|iters| timed(HandleFloor::new, trace, FLOOR, iters))
        });
        if peer.failure.is_none() {
            group.bench_function(BenchmarkId::from_parameter(PEER), |b| {
                b.iter_custom(|iters| {
                    timed(
                        || Peer::new(cubecl_server::storage::BytesStorage::default()),
                        trace,
                        PEER,
                        iters,
                    )
                })
            });
        }
        group.finish();
    }
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

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // Criterion's rule: without `--bench` (cargo test --benches), or with `--test`, it
    // runs each benchmark once as a test.
    let test_mode = !has("--bench") || has("--test");
    if has("--list") {
        PREPARED.get_or_init(|| Prepared {
            traces: traces(TEST),
            accounting: vec![Default::default(); 5],
            random_spread: Vec::new(),
        });
        benches();
        return;
    }
    install_panic_hook();

    let scale = if test_mode { TEST } else { FULL };
    let traces = traces(scale);
    let accounting = traces.iter().map(account_both).collect();
    // The random trace is one draw of many: its efficiency over other seeds says how
    // much of a side's figure is the layout and how much is the draw.
    let seeds = if test_mode { 2 } else { SPREAD_SEEDS };
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

    print_report(prepared, test_mode);

    let ours_failed = prepared
        .accounting
        .iter()
        .any(|(ours, _)| ours.failure.is_some() || ours.ids_reused > 0);
    if test_mode && ours_failed {
        eprintln!("wgpu-memory failed at least one trace or reused an id (see above)");
        std::process::exit(1);
    }
}

/// Mean and least efficiency (first pass) of each side over the random trace's other
/// seeds.
fn print_spread(spread: &[(Accounting, Accounting)]) {
    if spread.is_empty() {
        return;
    }
    let summary = |side: &dyn Fn(&(Accounting, Accounting)) -> &Accounting| {
        if spread.iter().any(|pair| side(pair).failure.is_some()) {
            return "FAILED on a seed".to_string();
        }
        let effs: Vec<f64> = spread.iter().map(|pair| side(pair).efficiency()).collect();
        let mean = effs.iter().sum::<f64>() / effs.len() as f64;
        let least = effs.iter().copied().fold(f64::INFINITY, f64::min);
        format!("mean {mean:.3}, least {least:.3}")
    };
    println!();
    println!(
        "Random trace drawn from {} other seeds, efficiency (first pass): {OURS} {}; \
         {PEER} {}.",
        spread.len(),
        summary(&|pair| &pair.0),
        summary(&|pair| &pair.1),
    );
}

fn print_report(prepared: &Prepared, test_mode: bool) {
    println!();
    println!("## Allocator benchmark: wgpu-memory vs cubecl-server 0.12.0-pre.1");
    println!();
    if test_mode {
        println!(
            "(test mode: reduced traces, one timed iteration each; the times are not \
             measurements)"
        );
        println!();
    } else if quick() {
        println!("(BENCH_QUICK=1: short criterion measurement)");
        println!();
    }
    println!(
        "Device properties on both sides: max_page_size {}, alignment {ALIGNMENT}; \
         MemoryConfiguration::default(). ns/op is the median over criterion's calls of \
         elapsed / (iterations * ops); an op is one reserve or one drop. The handle floor \
         only mints, keeps and drops the handles (no placement): what any allocator \
         returning this handle type pays.",
        mib(MAX_PAGE_SIZE)
    );
    println!();
    println!(
        "| trace | ours ns/op | peer ns/op | speedup (peer/ours) | handle floor ns/op | \
         best possible speedup (peer/floor) | ours efficiency | peer efficiency | \
         ours steady-state allocs | peer steady-state allocs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let cell = |a: &Accounting, value: String| {
        if a.failure.is_some() {
            "FAILED".to_string()
        } else {
            value
        }
    };
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        let ours_ns = median_ns_per_op(trace.name, OURS);
        let peer_ns = median_ns_per_op(trace.name, PEER);
        let ns = |a: &Accounting, t: Option<(f64, usize)>| match (t, &a.failure) {
            (_, Some(_)) => "FAILED".to_string(),
            (Some((ns, _)), None) => format!("{ns:.1}"),
            (None, None) => "-".to_string(),
        };
        let floor_ns = median_ns_per_op(trace.name, FLOOR);
        let ratio = |over: Option<(f64, usize)>, under: Option<(f64, usize)>| match (over, under) {
            (Some((o, _)), Some((u, _))) => format!("{:.2}x", o / u),
            _ => "-".to_string(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            trace.name,
            ns(ours, ours_ns),
            ns(peer, peer_ns),
            ratio(peer_ns, ours_ns),
            floor_ns.map_or_else(|| "-".to_string(), |(ns, _)| format!("{ns:.1}")),
            ratio(peer_ns, floor_ns),
            cell(ours, format!("{:.3}", ours.efficiency())),
            cell(peer, format!("{:.3}", peer.efficiency())),
            cell(ours, ours.allocs_second_half.to_string()),
            cell(peer, peer.allocs_second_half.to_string()),
        );
    }
    println!();
    println!("### Details (accounting pass, fresh memory, CountingStorage on both sides)");
    println!();
    println!(
        "| trace | side | ops | trace peak live | peak in use | peak reserved | \
         storage peak | efficiency | efficiency, all passes | allocs total | allocs 2nd half | \
         allocs 2nd pass | allocs 3rd pass | ids minted per reserve, 3rd pass | \
         reservations handing out a used id |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        for (side, a) in [(OURS, ours), (PEER, peer)] {
            println!(
                "| {} | {side} | {}{} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {} | {} |",
                trace.name,
                a.ops_done,
                if a.ops_done < trace.ops.len() {
                    format!(" of {}", trace.ops.len())
                } else {
                    String::new()
                },
                mib(trace.peak_live_bytes()),
                mib(a.peak_in_use),
                mib(a.peak_reserved),
                mib(a.peak_storage),
                a.efficiency(),
                a.efficiency_all_passes(),
                a.allocs_total,
                a.allocs_second_half,
                a.allocs_replay
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".to_string()),
                a.allocs_third
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".to_string()),
                a.ids_per_reserve_third
                    .map(|n| format!("{n:.3}"))
                    .unwrap_or_else(|| "-".to_string()),
                a.ids_reused,
            );
        }
    }
    print_spread(&prepared.random_spread);
    println!();
    println!("Traces:");
    for trace in &prepared.traces {
        println!(
            "- `{}`: {} ({} ops, {} reservations)",
            trace.name,
            trace.description,
            trace.ops.len(),
            trace.reserves()
        );
    }
    let mut problems = Vec::new();
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        for (side, a) in [(OURS, ours), (PEER, peer)] {
            if let Some(failure) = &a.failure {
                problems.push(format!("{side} on `{}`: {failure}", trace.name));
            }
            if a.in_use_mismatches > 0 {
                problems.push(format!(
                    "{side} on `{}`: memory_usage().bytes_in_use differed from the sum of live \
                     requested sizes after {} ops (largest difference {} B)",
                    trace.name, a.in_use_mismatches, a.in_use_max_diff
                ));
            }
            if a.ids_reused > 0 {
                problems.push(format!(
                    "{side} on `{}`: {} reservations handed out an id an earlier allocation \
                     already had (a weak binding of that allocation now reaches this one)",
                    trace.name, a.ids_reused
                ));
            }
            if let Some((own, counted)) = a.own_count_mismatch {
                problems.push(format!(
                    "{side} on `{}`: BytesStorage::allocations_made() = {own} but the \
                     counting wrapper saw {counted} allocs",
                    trace.name
                ));
            }
        }
    }
    println!();
    if problems.is_empty() {
        println!("Problems: none.");
    } else {
        println!("Problems:");
        for problem in problems {
            println!("- {problem}");
        }
    }
}
