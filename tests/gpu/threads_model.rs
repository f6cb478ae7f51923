//! Threads sharing one client against shadow models: three worker threads, each owning
//! its handles and a host model of every one of their bytes, and a fourth thread
//! calling `compact()` every 2 ms and `cleanup()` every fourth time.
//!
//! The workers mix the whole API: `create` and `create_with`, `write` and `write_with`
//! at unaligned offsets and lengths, drops, reads held in flight (a write to the same
//! handle while its read is in flight included), launches, `resource()` exports held
//! across steps, and the application's own work on exports: copies between two of the
//! thread's live handles recorded in its own encoder and passes bound through
//! `resource()`, with the `HandleResource`s dropped before the thread submits through
//! `Client::queue()` (other work, drops of the copy's handles and sleeps in between), and
//! `Client::queue().write_buffer` on exported slices. Every handle's bytes are checked
//! against the model; a wrong byte is counted, not a panic, so one run reports them all.
//! At the end every thread has exited: once everything is dropped and one cleanup ran,
//! nothing is live and no export is held.
//!
//! Runs 20 s (`WGPU_MEMORY_MODEL_SECS` sets the seconds for longer runs) and prints the
//! step counts and the seed of the threads' generators (new each run;
//! `WGPU_MEMORY_MODEL_SEED` sets it, though the threads' interleaving still differs).

mod app;
mod grower;
mod support;

use crate::device::pattern;
use crate::kernels::{ADD_ONE, groups_for};
use crate::misuse::AppAddOne;
use crate::watchdog::within;
use grower::{counting, grower};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Lcg, Tally, add_one, id_of};
use wgpu_memory::memory_management::{ManagedMemoryId, parse_memory_config};
use wgpu_memory::{Client, ClientError, Handle, HandleResource, Kernel, ReadBytes};

const WORKERS: u64 = 3;
/// Handles a worker owns at most.
const MAX_OWNED: usize = 10;
/// Reads a worker keeps in flight at most.
const MAX_READS: usize = 3;
/// Exports a worker holds across steps at most.
const MAX_PINS: usize = 3;
/// Largest handle, in bytes.
const MAX_SIZE: u64 = 3000;

/// What a worker's handles look like over a run.
#[derive(Clone, Copy)]
struct Shape {
    /// Handles a worker owns at most, given the time since the start.
    max_owned: fn(Duration) -> usize,
    /// The least and most bytes a create asks for, given the time since the start.
    sizes: fn(Duration) -> (u64, u64),
    /// How long the compacting thread sleeps between its calls.
    compactor_period: Duration,
    /// The compacting thread's calls of which every this many is a `cleanup()`, the
    /// others `compact()`.
    cleanup_every: u64,
    /// Whether a fifth thread's working set keeps rising beside the workers' ([`grower`]).
    grower: bool,
}

/// Up to [`MAX_OWNED`] handles of 1 B to [`MAX_SIZE`] each, all run long.
const ANY_SIZE: Shape = Shape {
    max_owned: |_| MAX_OWNED,
    sizes: |_| (1, MAX_SIZE),
    compactor_period: Duration::from_millis(2),
    cleanup_every: 4,
    grower: false,
};

/// Phases of 200 ms, the same for every thread: handles of at most 1 KiB, then larger
/// ones; at each change a worker drops the handles of the phase before, so one pool's
/// pages empty while the other's grow. The handles a worker may own rise by two a phase
/// (4 to 64 large ones, four times that of small ones), then the largest size by 64 B a
/// phase (3000 B to 16 KiB), so the memory keeps passing its high-water mark, growing
/// one pool beside the other's empty pages.
const TWO_POOL_PHASES: Shape = Shape {
    max_owned: |since| {
        let phase = phase(since);
        let handles = (4 + 2 * phase as usize).min(64);
        // Four times as many small handles (a quarter the size, on average): both
        // phases' pages reach about the same bytes, each a little past the last.
        if phase.is_multiple_of(2) {
            4 * handles
        } else {
            handles
        }
    },
    sizes: |since| {
        let phase = phase(since);
        if phase.is_multiple_of(2) {
            (1, 1024)
        } else {
            (1025, (MAX_SIZE + 64 * phase).min(16 << 10))
        }
    },
    // A compaction every 50 ms and a cleanup every second: both give the empty main
    // pages back themselves, so with one every 2 ms a reservation seldom finds any.
    compactor_period: Duration::from_millis(50),
    cleanup_every: 20,
    grower: true,
};

/// The 200 ms phase of [`TWO_POOL_PHASES`] a time since the start falls in.
fn phase(since: Duration) -> u64 {
    (since.as_millis() / 200) as u64
}

/// A handle, the bytes it must hold, and the last operations on it (for the report).
struct Owned {
    handle: Handle,
    bytes: Vec<u8>,
    trail: Vec<&'static str>,
}

impl Owned {
    fn note(&mut self, what: &'static str) {
        if self.trail.len() >= 8 {
            self.trail.remove(0);
        }
        self.trail.push(what);
    }
}

type Read = Pin<Box<dyn Future<Output = Result<ReadBytes, ClientError>> + Send>>;

/// An export held across steps, with where it said the slice was.
struct Held {
    handle: Handle,
    resource: HandleResource,
    steps_left: u64,
}

struct Worker {
    client: Client,
    index: u64,
    shape: Shape,
    start: Instant,
    /// The sizes creates drew from at the last step.
    sizes: (u64, u64),
    rng: Lcg,
    kernel: Kernel,
    app: AppAddOne,
    owned: Vec<Owned>,
    reads: Vec<(Read, Vec<u8>)>,
    held: Vec<Held>,
    /// Bytes of handles dropped while the application's work on them waits for its
    /// submit, by id (the handle itself is gone).
    dropped: Vec<(ManagedMemoryId, Vec<u8>)>,
    tally: Tally,
    wrong: Vec<String>,
}

impl Worker {
    fn pick(&mut self) -> usize {
        self.rng.below(self.owned.len() as u64) as usize
    }

    fn error(&mut self, what: &str, error: ClientError) {
        self.tally.errors += 1;
        if self.wrong.len() < 20 {
            self.wrong
                .push(format!("thread {}: {what}: {error}", self.index));
        }
    }

    /// Compares what a handle read with the model.
    fn compare(&mut self, what: &str, got: &[u8], expected: &[u8], trail: &[&'static str]) {
        self.tally.handles_checked += 1;
        let wrong = got
            .iter()
            .zip(expected)
            .filter(|(got, expected)| got != expected)
            .count()
            + got.len().abs_diff(expected.len());
        if wrong > 0 {
            self.tally.wrong_handles += 1;
            self.tally.wrong_bytes += wrong as u64;
            if self.wrong.len() < 20 {
                let first = got.iter().zip(expected).position(|(g, e)| g != e);
                self.wrong.push(format!(
                    "thread {}: {what}: {wrong} of {} bytes wrong (first at {first:?}); last operations {trail:?}",
                    self.index,
                    expected.len()
                ));
            }
        }
    }

    fn step(&mut self) {
        self.tally.steps += 1;
        self.tick_held();
        self.follow_sizes();
        if self.owned.len() < 2 {
            self.create();
            return;
        }
        match self.rng.below(32) {
            0..=3 if self.owned.len() < self.max_owned() => self.create(),
            0..=5 => self.drop_one(),
            6..=9 => self.write(),
            10..=11 => self.launch(),
            12 => self.start_read(),
            13 => self.finish_read(),
            14 => self.read_then_write(),
            15 => self.check_all(),
            16 => self.pin(),
            17..=22 => self.app_copy(),
            23..=24 => self.app_pass(),
            25..=26 => self.app_write(),
            27 => {
                self.client.queue().submit([]);
                self.tally.submits += 1;
            }
            28 => {
                if let Err(error) = self.client.sync() {
                    self.error("sync", error);
                }
                self.tally.syncs += 1;
            }
            _ => self.check_one(),
        }
    }

    /// Handles this worker may own now ([`Shape::max_owned`]).
    fn max_owned(&self) -> usize {
        (self.shape.max_owned)(self.start.elapsed())
    }

    fn create(&mut self) {
        let (low, high) = (self.shape.sizes)(self.start.elapsed());
        let len = (low + self.rng.below(high - low + 1)) as usize;
        let bytes = pattern(len, self.rng.below(1 << 20));
        let created = if self.rng.below(2) == 0 {
            self.client.create(&bytes)
        } else {
            self.client
                .create_with(len as u64, |mut view| view.copy_from_slice(&bytes))
        };
        self.tally.creates += 1;
        match created {
            Ok(handle) => self.owned.push(Owned {
                handle,
                bytes,
                trail: vec!["create"],
            }),
            Err(error) => self.error("create", error),
        }
    }

    fn drop_one(&mut self) {
        let at = self.pick();
        self.drop_at(at);
    }

    /// When the shape's sizes move on (a new phase), drops every handle outside them:
    /// the pool they lie in empties at once, as a model's layers hand over.
    fn follow_sizes(&mut self) {
        let (low, high) = (self.shape.sizes)(self.start.elapsed());
        if (low, high) == self.sizes {
            return;
        }
        self.sizes = (low, high);
        let mut at = 0;
        while at < self.owned.len() {
            let len = self.owned[at].bytes.len() as u64;
            if (low..=high).contains(&len) {
                at += 1;
            } else {
                self.drop_at(at);
            }
        }
    }

    fn drop_at(&mut self, at: usize) {
        let owned = self.owned.swap_remove(at);
        self.tally.drops += 1;
        self.dropped.push((id_of(&owned.handle), owned.bytes));
    }

    /// `write` or `write_with` of a range with any offset and length.
    fn write(&mut self) {
        let at = self.pick();
        self.write_at(at, "write");
    }

    fn write_at(&mut self, at: usize, what: &'static str) {
        let len = self.owned[at].bytes.len();
        let offset = self.rng.below(len as u64) as usize;
        let end = offset + self.rng.below((len - offset) as u64 + 1) as usize;
        let data = pattern(end - offset, self.rng.below(1 << 20));
        let handle = &self.owned[at].handle;
        let written = if self.rng.below(2) == 0 {
            self.client.write(handle, offset as u64, &data)
        } else {
            self.client
                .write_with(handle, offset as u64, data.len() as u64, |mut view| {
                    view.copy_from_slice(&data)
                })
        };
        self.tally.writes += 1;
        match written {
            Ok(()) => {
                self.owned[at].bytes[offset..end].copy_from_slice(&data);
                self.owned[at].note(what);
            }
            Err(error) => self.error("write", error),
        }
    }

    fn launch(&mut self) {
        let at = self.pick();
        let target = &self.owned[at];
        let groups = groups_for(target.bytes.len() as u64);
        let launched = self.client.launch(&self.kernel, groups, &[&target.handle]);
        self.tally.launches += 1;
        match launched {
            Ok(()) => {
                let len = self.owned[at].bytes.len() as u64;
                add_one(&mut self.owned[at].bytes, len);
                self.owned[at].note("launch");
            }
            Err(error) => self.error("launch", error),
        }
    }

    fn start_read(&mut self) {
        if self.reads.len() >= MAX_READS {
            return self.finish_read();
        }
        let at = self.pick();
        let read = Box::pin(self.client.read(&self.owned[at].handle));
        self.reads.push((read, self.owned[at].bytes.clone()));
        self.tally.reads += 1;
    }

    fn finish_read(&mut self) {
        if self.reads.is_empty() {
            return;
        }
        let at = self.rng.below(self.reads.len() as u64) as usize;
        let (read, expected) = self.reads.swap_remove(at);
        match pollster::block_on(read) {
            Ok(got) => self.compare("a read held in flight", &got, &expected, &[]),
            Err(error) => self.error("read in flight", error),
        }
    }

    /// A read in flight, then a write to the same handle: the read returns the bytes
    /// from before the write.
    fn read_then_write(&mut self) {
        let at = self.pick();
        let read = Box::pin(self.client.read(&self.owned[at].handle));
        let before = self.owned[at].bytes.clone();
        self.write_at(at, "write after a read");
        self.tally.read_then_writes += 1;
        if self.reads.len() < MAX_READS {
            self.reads.push((read, before));
        } else {
            match pollster::block_on(read) {
                Ok(got) => self.compare("a read then a write", &got, &before, &[]),
                Err(error) => self.error("read then write", error),
            }
        }
    }

    fn check_one(&mut self) {
        let at = self.pick();
        match self.client.read_blocking(&self.owned[at].handle) {
            Ok(got) => {
                let (expected, trail) =
                    (self.owned[at].bytes.clone(), self.owned[at].trail.clone());
                self.compare("read_blocking", &got, &expected, &trail);
            }
            Err(error) => self.error("read_blocking", error),
        }
    }

    fn check_all(&mut self) {
        self.tally.checks += 1;
        let handles: Vec<&Handle> = self.owned.iter().map(|owned| &owned.handle).collect();
        match self.client.read_many_blocking(&handles) {
            Ok(read) => {
                let expected: Vec<(Vec<u8>, Vec<&'static str>)> = self
                    .owned
                    .iter()
                    .map(|owned| (owned.bytes.clone(), owned.trail.clone()))
                    .collect();
                for (got, (expected, trail)) in read.iter().zip(expected) {
                    self.compare("read_many_blocking", got, &expected, &trail);
                }
            }
            Err(error) => self.error("read_many_blocking", error),
        }
    }

    /// Holds an export across steps.
    fn pin(&mut self) {
        if self.held.len() >= MAX_PINS {
            return;
        }
        let at = self.pick();
        let handle = self.owned[at].handle.clone();
        match self.client.resource(&handle) {
            Ok(resource) => {
                self.tally.pins += 1;
                let steps_left = 1 + self.rng.below(20);
                self.held.push(Held {
                    handle,
                    resource,
                    steps_left,
                });
            }
            Err(error) => self.error("resource", error),
        }
    }

    /// Lets go of the exports held long enough, after checking their slices never moved.
    fn tick_held(&mut self) {
        let mut index = 0;
        while index < self.held.len() {
            self.held[index].steps_left = self.held[index].steps_left.saturating_sub(1);
            if self.held[index].steps_left > 0 {
                index += 1;
                continue;
            }
            let held = self.held.swap_remove(index);
            match self.client.resource(&held.handle) {
                Ok(now)
                    if now.buffer == held.resource.buffer && now.offset == held.resource.offset => {
                }
                Ok(_) => {
                    self.tally.wrong_handles += 1;
                    self.wrong
                        .push(format!("thread {}: an exported slice moved", self.index));
                }
                Err(error) => self.error("resource", error),
            }
        }
    }
}

/// One worker until `until`: returns its tally and what it found wrong, after a last
/// check of every handle it owns.
fn worker(
    client: Client,
    index: u64,
    seed: u64,
    shape: Shape,
    until: Instant,
) -> (Tally, Vec<String>) {
    let mut worker = Worker {
        app: AppAddOne::new(&client),
        client,
        index,
        shape,
        start: Instant::now(),
        sizes: (shape.sizes)(Duration::ZERO),
        rng: Lcg(seed ^ (index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        kernel: Kernel::new("add one", ADD_ONE, "main"),
        owned: Vec::new(),
        reads: Vec::new(),
        held: Vec::new(),
        dropped: Vec::new(),
        tally: Tally::default(),
        wrong: Vec::new(),
    };
    while Instant::now() < until {
        worker.step();
    }
    while !worker.reads.is_empty() {
        worker.finish_read();
    }
    worker.check_all();
    (worker.tally, worker.wrong)
}

#[test]
fn threads_sharing_a_client_under_compaction_keep_every_byte() {
    let Some(client) = crate::device::fresh() else {
        return;
    };
    // Pages of 16 KiB hold a few of the threads' handles (1 B to 3000 B) each: the live
    // slices spread over many pages, and the compacting thread has moves to make.
    let toml = "[memory]\npools = [ { type = \"sliced\", page_size = \"16 KiB\", max_slice_size = \"16 KiB\" } ]\n";
    run_model(&client, toml, ANY_SIZE);
}

/// Two pools, and phases that move the threads' handles from one to the other while
/// their number rises: each page made past the memory's high-water mark first takes back
/// the other pool's empty pages, beside every other path. Checked as above; and the
/// workers' reservations did take pages back that way (the memory's `tracing` event).
#[test]
fn threads_moving_between_two_pools_keep_every_byte() {
    let Some(client) = crate::device::fresh() else {
        return;
    };
    let toml = "[memory]\npools = [ { type = \"sliced\", page_size = \"4 KiB\", max_slice_size = \"1 KiB\" }, { type = \"sliced\", page_size = \"16 KiB\", max_slice_size = \"16 KiB\" } ]\n";
    let traded = run_model(&client, toml, TWO_POOL_PHASES);
    eprintln!("threads model: {traded} reservations gave back the other pool's empty pages first");
    assert!(
        traded > 0,
        "no reservation gave back the other pool's empty pages before making its page"
    );
}

/// Installs the layout `toml`, runs [`WORKERS`] threads of `shape` and the compacting
/// thread for `WGPU_MEMORY_MODEL_SECS` (default 20), and asserts that no byte was wrong,
/// no call failed, and nothing stays live or exported at the end. Returns how many of
/// the workers' reservations gave back empty pages of other pools before making a page.
fn run_model(client: &Client, toml: &str, shape: Shape) -> u64 {
    let traded = Arc::new(AtomicU64::new(0));
    let counted = traded.clone();
    let pools = parse_memory_config(toml).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
    let seconds: u64 = std::env::var("WGPU_MEMORY_MODEL_SECS").map_or(20, |value| {
        value.parse().expect("WGPU_MEMORY_MODEL_SECS: seconds")
    });
    let seed: u64 = std::env::var("WGPU_MEMORY_MODEL_SEED").map_or_else(
        |_| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |since| since.as_nanos() as u64)
        },
        |value| value.parse().expect("WGPU_MEMORY_MODEL_SEED: a number"),
    );
    let until = Instant::now() + Duration::from_secs(seconds);
    let limit = Duration::from_secs(seconds + 120);
    let inner = client.clone();
    let (tally, wrong, compactions, cleanups, moves) =
        within("the model's threads", limit, move || {
            let client = inner;
            let stop = Arc::new(AtomicBool::new(false));
            let compactor = {
                let (client, stop) = (client.clone(), stop.clone());
                std::thread::spawn(move || {
                    let (mut compactions, mut cleanups, mut moves, mut errors) =
                        (0u64, 0u64, 0u64, Vec::new());
                    while !stop.load(Ordering::Acquire) {
                        std::thread::sleep(shape.compactor_period);
                        compactions += 1;
                        if compactions % shape.cleanup_every == 0 {
                            cleanups += 1;
                            moves += client.cleanup().moves as u64;
                        } else {
                            match client.compact() {
                                Ok(done) => moves += done.moves as u64,
                                Err(error) => errors.push(format!("compact: {error}")),
                            }
                        }
                    }
                    (compactions, cleanups, moves, errors)
                })
            };
            let workers: Vec<_> = (0..WORKERS)
                .map(|index| {
                    let client = client.clone();
                    std::thread::Builder::new()
                        .name(format!("model worker {index}"))
                        .spawn({
                            let traded = counted.clone();
                            move || counting(traded, || worker(client, index, seed, shape, until))
                        })
                        .unwrap()
                })
                .collect();
            let grower = shape.grower.then(|| {
                let (client, traded) = (client.clone(), counted.clone());
                std::thread::spawn(move || counting(traded, || grower(client, until)))
            });
            let mut tally = Tally::default();
            let mut wrong = Vec::new();
            if let Some(grower) = grower {
                let (checked, found) = grower.join().expect("the grower panicked");
                tally.handles_checked += checked;
                wrong.extend(found);
            }
            for worker in workers {
                let (done, found) = worker.join().expect("a worker panicked");
                tally.add(&done);
                wrong.extend(found);
            }
            stop.store(true, Ordering::Release);
            let (compactions, cleanups, moves, errors) =
                compactor.join().expect("the compactor panicked");
            wrong.extend(errors);
            (tally, wrong, compactions, cleanups, moves)
        });
    eprintln!(
        "threads model: {seconds} s, seed {seed}, {compactions} compactions ({cleanups} cleanups) moving {moves} slices; {tally:?}"
    );
    assert!(
        wrong.is_empty() && tally.wrong_handles == 0 && tally.errors == 0,
        "seed {seed}: {} handles read {} wrong bytes, {} errors: {:#?}",
        tally.wrong_handles,
        tally.wrong_bytes,
        tally.errors,
        wrong
    );
    assert!(
        tally.app_copies > 0 && tally.copies_dropped_first > 0,
        "{tally:?}"
    );
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
    // Every worker has exited and dropped everything: one cleanup leaves nothing live.
    client.cleanup();
    assert_eq!(client.held_exports(), 0);
    let usage = client.memory_report().streams[0].pools.usage();
    assert_eq!((usage.number_allocs, usage.bytes_in_use), (0, 0));
    traded.load(Ordering::Relaxed)
}
