//! The accounting pass: each trace replayed three times on a fresh memory of each side,
//! whose storage counts pages, with the usage sampled after every operation (slow on
//! purpose, which is why it is apart from the timed runs).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use cubecl_runtime::memory_management::ManagedMemoryHandle;

use crate::replay::{empty_slots, replay};
use crate::sides::{Counted, CountingStorage, Ours, Peer};
use crate::traces::{Op, Trace};

/// What one side did with one trace, outside criterion timing.
#[derive(Debug, Clone, Default)]
pub struct Accounting {
    /// Operations completed (all of them unless `failure`).
    pub ops_done: usize,
    pub peak_in_use: u64,
    pub peak_reserved: u64,
    /// Most bytes the storage held at once (sampled at each page allocation).
    pub peak_storage: u64,
    pub allocs_total: u64,
    /// Pages made during the second half of the trace's operations.
    pub allocs_second_half: u64,
    /// Pages made while the trace was replayed a second time on the same memory.
    pub allocs_replay: Option<u64>,
    /// Pages made during a third replay: the state criterion times (after two warm-up
    /// passes). A memory that settled makes none.
    pub allocs_third: Option<u64>,
    /// Handle ids minted per reservation during the third replay (read off cubecl's
    /// process-wide id counter). 1.0: one fresh id per allocation; more: ids are also
    /// minted for other things (cubecl-server's split remainders); less: some
    /// reservations handed out an id an earlier allocation already had.
    pub ids_per_reserve_third: Option<f64>,
    /// Reservations, over the three passes, that handed out an id an earlier allocation
    /// already had (a weak binding of the earlier one then upgrades to the later).
    pub ids_reused: usize,
    /// Ops after which the reported `bytes_in_use` was not the sum of the live requested
    /// sizes, and the largest difference seen.
    pub in_use_mismatches: usize,
    pub in_use_max_diff: i128,
    /// Our `BytesStorage::allocations_made()` when it disagrees with the wrapper's count.
    pub own_count_mismatch: Option<(u64, u64)>,
    /// After the third pass, with its live allocations held, a user's cleanup: bytes in
    /// use, bytes reserved, and the largest page still held (ours only; 0 for the peer).
    pub after_cleanup: Option<(u64, u64, u64)>,
    pub failure: Option<String>,
}

impl Accounting {
    pub fn efficiency(&self) -> f64 {
        if self.peak_reserved == 0 {
            f64::NAN
        } else {
            self.peak_in_use as f64 / self.peak_reserved as f64
        }
    }

    /// Peak in use over the most bytes the storage held in any of the three passes: what
    /// a memory that rearranges its pages on replays costs in the end.
    pub fn efficiency_all_passes(&self) -> f64 {
        if self.peak_storage == 0 {
            f64::NAN
        } else {
            self.peak_in_use as f64 / self.peak_storage as f64
        }
    }
}

/// The message and location of the last panic, set by the hook in `main`.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

pub fn install_panic_hook() {
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

pub fn account<M: Counted>(make: impl Fn() -> M, trace: &Trace) -> Accounting {
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
        drop(slots);
        memory.release_all();
        result.after_cleanup = after_last_reservation(&make, trace);
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

/// A fresh memory replays `trace` up to its last reservation, then a user's cleanup runs
/// with everything still live held: `(in use, reserved, largest page held)` after it.
/// (The traces end by dropping everything, so a cleanup after the last op would find an
/// empty memory.)
fn after_last_reservation<M: Counted>(
    make: &impl Fn() -> M,
    trace: &Trace,
) -> Option<(u64, u64, u64)> {
    let last = trace
        .ops
        .iter()
        .rposition(|op| matches!(op, Op::Reserve { .. }))?;
    let mut memory = make();
    let mut slots = empty_slots(trace);
    for op in &trace.ops[..=last] {
        match *op {
            Op::Reserve { slot, size } => slots[slot as usize] = Some(memory.reserve(size).ok()?),
            Op::Drop { slot } => drop(slots[slot as usize].take()),
        }
    }
    let page = memory.cleanup_live();
    let usage = memory.usage();
    drop(slots);
    memory.release_all();
    Some((usage.bytes_in_use, usage.bytes_reserved, page))
}

/// Both sides' accounting on `trace`, each on a fresh memory.
pub fn account_both(trace: &Trace) -> (Accounting, Accounting) {
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
