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
//! step counts.

use crate::device::pattern;
use crate::kernels::{ADD_ONE, groups_for};
use crate::misuse::AppAddOne;
use crate::watchdog::within;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
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

/// A small deterministic generator (one per thread).
struct Lcg(u64);

impl Lcg {
    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Adds 1 to each little-endian word of `bytes` that `ADD_ONE` dispatched over
/// `groups_for(dispatched)` reaches; a partial last word as the kernel leaves the bytes
/// of it that the handle holds (a carry only runs upward, so the padding's bytes do not
/// matter).
fn add_one(bytes: &mut [u8], dispatched: u64) {
    let reached = groups_for(dispatched)[0] as usize * crate::kernels::WORKGROUP as usize * 4;
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(4), 0);
    for word in padded.chunks_exact_mut(4).take(reached / 4) {
        let value = u32::from_le_bytes(word.try_into().unwrap()).wrapping_add(1);
        word.copy_from_slice(&value.to_le_bytes());
    }
    let len = bytes.len();
    bytes.copy_from_slice(&padded[..len]);
}

/// The allocation a handle names (ids are never reused).
fn id_of(handle: &Handle) -> ManagedMemoryId {
    handle.memory().descriptor().id
}

/// What the threads did, summed at the end.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    steps: u64,
    creates: u64,
    drops: u64,
    writes: u64,
    launches: u64,
    reads: u64,
    read_then_writes: u64,
    checks: u64,
    pins: u64,
    app_copies: u64,
    /// App copies whose resources were dropped before their submit.
    copies_dropped_first: u64,
    /// App copies with a handle they use dropped before their submit.
    copies_over_dropped_handles: u64,
    app_passes: u64,
    app_writes: u64,
    submits: u64,
    syncs: u64,
    handles_checked: u64,
    /// Handles that read other bytes than the model's.
    wrong_handles: u64,
    wrong_bytes: u64,
    errors: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        macro_rules! sum {
            ($($field:ident),*) => { $(self.$field += other.$field;)* };
        }
        sum!(
            steps,
            creates,
            drops,
            writes,
            launches,
            reads,
            read_then_writes,
            checks,
            pins,
            app_copies,
            copies_dropped_first,
            copies_over_dropped_handles,
            app_passes,
            app_writes,
            submits,
            syncs,
            handles_checked,
            wrong_handles,
            wrong_bytes,
            errors
        );
    }
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
        if self.owned.len() < 2 {
            self.create();
            return;
        }
        match self.rng.below(32) {
            0..=3 if self.owned.len() < MAX_OWNED => self.create(),
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

    fn create(&mut self) {
        let len = 1 + self.rng.below(MAX_SIZE) as usize;
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

    /// A resource of the owned handle `at`: one held across steps when there is one
    /// (the application keeps it past the submit), else a new one (`true`: to drop).
    fn resource_of(&mut self, at: usize) -> Option<(HandleResource, bool)> {
        let id = id_of(&self.owned[at].handle);
        if let Some(held) = self.held.iter().find(|held| id_of(&held.handle) == id) {
            return Some((held.resource.clone(), false));
        }
        match self.client.resource(&self.owned[at].handle) {
            Ok(resource) => Some((resource, true)),
            Err(error) => {
                self.error("resource", error);
                None
            }
        }
    }

    /// The bytes the model holds for the allocation `id`, live or dropped since.
    fn bytes_of(&self, id: ManagedMemoryId) -> Option<&Vec<u8>> {
        self.owned
            .iter()
            .find(|owned| id_of(&owned.handle) == id)
            .map(|owned| &owned.bytes)
            .or_else(|| {
                self.dropped
                    .iter()
                    .find(|(dropped, _)| *dropped == id)
                    .map(|(_, bytes)| bytes)
            })
    }

    /// The owned handle of allocation `id`, if still owned.
    fn owned_mut(&mut self, id: ManagedMemoryId) -> Option<&mut Owned> {
        self.owned
            .iter_mut()
            .find(|owned| id_of(&owned.handle) == id)
    }

    /// Other work while the application's own work waits for its submit: the thread's
    /// other operations, drops of the handles the work uses included, or a sleep (the
    /// compacting thread runs meanwhile).
    fn meanwhile(&mut self, uses: &[ManagedMemoryId]) {
        match self.rng.below(4) {
            0 => std::thread::sleep(Duration::from_micros(self.rng.below(4000))),
            1 => {
                for _ in 0..1 + self.rng.below(3) {
                    if self.owned.len() < 3 {
                        break;
                    }
                    match self.rng.below(5) {
                        0 if self.owned.len() < MAX_OWNED => self.create(),
                        0 | 1 => self.drop_one(),
                        2 => self.write(),
                        3 => self.launch(),
                        _ => self.check_one(),
                    }
                }
            }
            2 => {
                // The copy's own handles dropped before the submit.
                let at = self
                    .owned
                    .iter()
                    .position(|owned| uses.contains(&id_of(&owned.handle)));
                if let Some(at) = at {
                    self.tally.copies_over_dropped_handles += 1;
                    self.drop_at(at);
                }
                std::thread::sleep(Duration::from_micros(self.rng.below(2000)));
            }
            _ => std::thread::yield_now(),
        }
    }

    /// The application copies a range of one live handle into another in its own
    /// encoder, lets the resources go (mostly), then submits through `Client::queue()`.
    fn app_copy(&mut self) {
        let (a, b) = (self.pick(), self.pick());
        let (len_a, len_b) = (
            self.owned[a].bytes.len() as u64 / 4 * 4,
            self.owned[b].bytes.len() as u64 / 4 * 4,
        );
        if a == b || len_a == 0 || len_b == 0 {
            return;
        }
        let from = self.rng.below(len_a / 4) * 4;
        let to = self.rng.below(len_b / 4) * 4;
        let len = 4 * (1 + self.rng.below((len_a - from).min(len_b - to) / 4));
        let (source, target) = (id_of(&self.owned[a].handle), id_of(&self.owned[b].handle));
        let Some((ra, drop_a)) = self.resource_of(a) else {
            return;
        };
        let Some((rb, drop_b)) = self.resource_of(b) else {
            return;
        };
        let device = self.client.device();
        let mut encoder = device.create_command_encoder(&Default::default());
        if ra.buffer == rb.buffer {
            // wgpu refuses a copy within one buffer: through a scratch buffer.
            let scratch = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("the application's scratch"),
                size: len,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(&ra.buffer, ra.offset + from, &scratch, 0, len);
            encoder.copy_buffer_to_buffer(&scratch, 0, &rb.buffer, rb.offset + to, len);
        } else {
            encoder.copy_buffer_to_buffer(
                &ra.buffer,
                ra.offset + from,
                &rb.buffer,
                rb.offset + to,
                len,
            );
        }
        let kept = if self.rng.below(4) == 0 {
            // The documented pattern: the resources live until the submit.
            Some((ra, rb))
        } else {
            drop((ra, rb));
            if drop_a || drop_b {
                self.tally.copies_dropped_first += 1;
            }
            None
        };
        self.meanwhile(&[source, target]);
        self.client.queue().submit([encoder.finish()]);
        drop(kept);
        self.tally.app_copies += 1;
        // The copy ran after all the client's work recorded before the submit: it took
        // the source's bytes as the model has them now.
        let data = self.bytes_of(source).expect("the source is modelled")
            [from as usize..(from + len) as usize]
            .to_vec();
        if let Some(owned) = self.owned_mut(target) {
            owned.bytes[to as usize..(to + len) as usize].copy_from_slice(&data);
            owned.note("app copy");
        }
        self.dropped.clear();
    }

    /// The application's own pass over `resource()` of a live handle, the resource
    /// dropped at the end of the statement that binds it, then submitted.
    fn app_pass(&mut self) {
        let at = self.pick();
        let encoder = match self.client.resource(&self.owned[at].handle) {
            Ok(resource) => self.app.record(&self.client, &resource),
            Err(error) => return self.error("resource", error),
        };
        let target = id_of(&self.owned[at].handle);
        self.meanwhile(&[target]);
        self.client.queue().submit([encoder.finish()]);
        self.tally.app_passes += 1;
        if let Some(owned) = self.owned_mut(target) {
            // `AppAddOne` dispatches over the resource's size.
            let len = owned.bytes.len() as u64;
            add_one(&mut owned.bytes, len);
            owned.note("app pass");
        }
        self.dropped.clear();
    }

    /// `Client::queue().write_buffer` on an exported slice, the resource kept or
    /// dropped before the write.
    fn app_write(&mut self) {
        let at = self.pick();
        let len = self.owned[at].bytes.len() as u64 / 4 * 4;
        if len == 0 {
            return;
        }
        let from = self.rng.below(len / 4) * 4;
        let count = 4 * (1 + self.rng.below((len - from) / 4));
        let data = pattern(count as usize, self.rng.below(1 << 20));
        let Some((resource, _)) = self.resource_of(at) else {
            return;
        };
        let (buffer, offset) = (resource.buffer.clone(), resource.offset);
        if self.rng.below(2) == 0 {
            drop(resource);
            self.client
                .queue()
                .write_buffer(&buffer, offset + from, &data);
        } else {
            self.client
                .queue()
                .write_buffer(&buffer, offset + from, &data);
            drop(resource);
        }
        self.tally.app_writes += 1;
        self.owned[at].bytes[from as usize..(from + count) as usize].copy_from_slice(&data);
        self.owned[at].note("app write");
    }
}

/// One worker until `until`: returns its tally and what it found wrong, after a last
/// check of every handle it owns.
fn worker(client: Client, index: u64, until: Instant) -> (Tally, Vec<String>) {
    let mut worker = Worker {
        app: AppAddOne::new(&client),
        client,
        index,
        rng: Lcg(0x9e37_79b9_7f4a_7c15 ^ (index + 1).wrapping_mul(0x1234_5678_9abc_def1)),
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
    let pools = parse_memory_config(toml).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
    let seconds: u64 = std::env::var("WGPU_MEMORY_MODEL_SECS").map_or(20, |value| {
        value.parse().expect("WGPU_MEMORY_MODEL_SECS: seconds")
    });
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
                        std::thread::sleep(Duration::from_millis(2));
                        compactions += 1;
                        if compactions % 4 == 0 {
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
                        .spawn(move || worker(client, index, until))
                        .unwrap()
                })
                .collect();
            let mut tally = Tally::default();
            let mut wrong = Vec::new();
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
        "threads model: {seconds} s, {compactions} compactions ({cleanups} cleanups) moving {moves} slices; {tally:?}"
    );
    assert!(
        wrong.is_empty() && tally.wrong_handles == 0 && tally.errors == 0,
        "{} handles read {} wrong bytes, {} errors: {:#?}",
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
}
