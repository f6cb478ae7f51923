//! The soak (issues 18 and 22): 8 threads for 30 s (`WGPU_MEMORY_SOAK_SECS` overrides)
//! mixing creates and `create_with`, whole and unaligned writes and `write_with`,
//! launches, reads held and dropped, compactions (on request and inside reservations
//! under the budget), cleanups, application callbacks that call the client, a budget
//! set near what the client holds and cleared again, and `resource()` exports: used by
//! the application's own encoders and submitted through `Client::queue()` while the
//! resource lives, or, from the threads that never submit, sync or clean up, only bound
//! or dropped (held until those threads exit).
//!
//! Each thread keeps a host model of every handle it owns, changed only by operations
//! that returned `Ok`; a budget refusal (`OutOfMemory` naming the budget) is the one
//! legal error, and leaves every byte as it was. At the end: no wrong byte, no hang
//! (each thread under a watchdog), no uncaptured error; after every handle is dropped
//! and one cleanup, no live slice and no reserved byte in any memory, and wgpu's
//! allocator holds what it held before the client was made, within one device memory
//! block.

pub(crate) mod support;

use crate::device::pattern;
use crate::kernels::{ADD_ONE, groups_for};
use crate::misuse::AppAddOne;
use crate::watchdog::within;
use std::time::{Duration, Instant};
use support::{Lcg, Tally, Wrong, add_one, memories_holding, open_measured};
use wgpu_memory::client::DEVICE_MEMORY_BLOCK;
use wgpu_memory::memory_management::{PoolConfigError, parse_memory_config};
use wgpu_memory::{Client, ClientError, Handle, Kernel};

const THREADS: u64 = 8;
const MAX_OWNED: usize = 12;
/// Threads below this index set the budget near what is held, and clear it.
const BUDGET_SETTERS: u64 = 2;
/// Threads from this index on never submit, sync or clean up: their exports are only
/// bound or dropped, held until the thread exits (a dropped export is held until the
/// dropping thread submits, syncs, cleans up or exits).
const FIRST_SILENT: u64 = 6;

/// A handle and the bytes it must hold.
pub struct Owned {
    handle: Handle,
    bytes: Vec<u8>,
}

struct Worker {
    client: Client,
    rng: Lcg,
    kernel: Kernel,
    app: AppAddOne,
    owned: Vec<Owned>,
    wrong: Wrong,
    tally: Tally,
    /// Whether this thread submits through `Client::queue()`, syncs and cleans up.
    submits: bool,
    sets_budget: bool,
}

impl Worker {
    fn pick(&mut self) -> usize {
        self.rng.below(self.owned.len() as u64) as usize
    }

    /// `create` or `create_with` of `len` bytes.
    fn create(&mut self, len: usize) {
        let bytes = pattern(len, self.rng.below(1 << 20));
        let created = if self.rng.below(2) == 0 {
            self.client.create(&bytes)
        } else {
            self.client
                .create_with(len as u64, |mut view| view.copy_from_slice(&bytes))
        };
        self.tally.creates += 1;
        if let Some(handle) = self.tally.sort(&mut self.wrong, "create", created) {
            self.owned.push(Owned { handle, bytes });
        }
    }

    /// `write` or `write_with` of a range with any offset and length (edges unaligned).
    fn write(&mut self) {
        let at = self.pick();
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
        if self.tally.sort(&mut self.wrong, "write", written).is_some() {
            self.owned[at].bytes[offset..end].copy_from_slice(&data);
        }
    }

    fn launch(&mut self, at: usize) {
        let target = &self.owned[at];
        let groups = groups_for(target.bytes.len() as u64);
        let launched = self.client.launch(&self.kernel, groups, &[&target.handle]);
        if self
            .tally
            .sort(&mut self.wrong, "launch", launched)
            .is_some()
        {
            add_one(&mut self.owned[at].bytes);
        }
    }

    fn read(&mut self) {
        let at = self.pick();
        let read = self.client.read_blocking(&self.owned[at].handle);
        self.tally.check(
            &mut self.wrong,
            "read_blocking",
            read,
            &self.owned[at].bytes,
        );
    }

    /// A held read, awaited after more work on the same handle, then a dropped read.
    fn held_read(&mut self) {
        let at = self.pick();
        let want = self.owned[at].bytes.clone();
        let held = self.client.read(&self.owned[at].handle);
        self.launch(at);
        let got = pollster::block_on(held);
        self.tally.check(&mut self.wrong, "held read", got, &want);
        drop(self.client.read(&self.owned[at].handle));
    }

    /// The helper shape: record on an export, make a new handle, submit through the
    /// client's queue, then drop the export (the hold a dropped export leaves lasts
    /// until this thread's next submission: `Client::resource`).
    fn export_and_create(&mut self, len: usize) {
        let at = self.pick();
        let Some(resource) = self.tally.sort(
            &mut self.wrong,
            "resource",
            self.client.resource(&self.owned[at].handle),
        ) else {
            return;
        };
        let encoder = self.app.record(&self.client, &resource);
        if self.rng.below(2) == 0 {
            add_one(&mut self.owned[at].bytes);
        } else {
            self.owned.swap_remove(at);
        }
        self.create(len);
        self.client.queue().submit([encoder.finish()]);
        self.tally.app_submits += 1;
        drop(resource);
        if self.owned.len() > MAX_OWNED {
            self.owned.swap_remove(0);
        }
    }

    /// The application's own pass on a live export, submitted through the client's
    /// queue while the resource lives; or an empty submission.
    fn app_submit(&mut self) {
        if self.owned.is_empty() || self.rng.below(4) == 0 {
            self.client.queue().submit([]);
        } else {
            let at = self.pick();
            let resource = self.client.resource(&self.owned[at].handle);
            let Some(resource) = self.tally.sort(&mut self.wrong, "resource", resource) else {
                return;
            };
            let encoder = self.app.record(&self.client, &resource);
            self.client.queue().submit([encoder.finish()]);
            add_one(&mut self.owned[at].bytes);
        }
        self.tally.app_submits += 1;
    }

    /// A thread that never submits: takes an export, binds it (or not), and drops it,
    /// sometimes after the handle itself.
    fn silent_export(&mut self) {
        let at = self.pick();
        let resource = self.client.resource(&self.owned[at].handle);
        let Some(resource) = self.tally.sort(&mut self.wrong, "resource", resource) else {
            return;
        };
        self.tally.silent_exports += 1;
        if self.rng.below(2) == 0 {
            let bind_group = self.app.bind(&self.client, &resource);
            drop(bind_group);
        }
        if self.rng.below(3) == 0 {
            self.owned.swap_remove(at);
        }
        drop(resource);
    }

    /// An application callback that calls the client.
    fn callback(&mut self) {
        let inner = self.client.clone();
        let probe = self.owned[0].handle.clone();
        let want = self.owned[0].bytes.clone();
        let (sender, receiver) = std::sync::mpsc::channel();
        self.client.queue().on_submitted_work_done(move || {
            let read = inner.read_blocking(&probe);
            let _ = inner.memory_report();
            let _ = sender.send(read);
        });
        let flushed = self.client.flush();
        self.tally.sort(&mut self.wrong, "flush", flushed);
        // The callback runs at the next poll of anyone's; ours makes sure.
        let synced = self.client.sync();
        self.tally.sort(&mut self.wrong, "sync", synced);
        match receiver.recv() {
            Ok(read) => self
                .tally
                .check(&mut self.wrong, "callback read", read, &want),
            Err(_) => self
                .wrong
                .push(("callback".to_string(), "never ran".to_string())),
        }
    }

    fn compact(&mut self) {
        let compacted = self.client.compact();
        if let Some(report) = self.tally.sort(&mut self.wrong, "compact", compacted) {
            self.tally.compactions += 1;
            self.tally.moved += report.moves as u64;
        }
    }

    /// Sets the budget to what is held plus a little (nothing, 64 KiB, 1 MiB, or a
    /// tenth), or clears it. Another thread may grow what is held in between: the
    /// client then refuses with `BudgetBelowHeld`, which is legal; so is
    /// `BudgetBelowSmallestPage` while little is held.
    fn budget(&mut self) {
        let now = self.client.budget();
        let result = if now.budget.is_some() {
            self.client.set_budget(None)
        } else {
            let extra = match self.rng.below(4) {
                0 => 0,
                1 => 64 << 10,
                2 => 1 << 20,
                _ => now.held / 10,
            };
            self.client.set_budget(Some(now.held + extra))
        };
        match result {
            Ok(()) => self.tally.budgets_set += 1,
            Err(ClientError::Config(
                PoolConfigError::BudgetBelowHeld { .. }
                | PoolConfigError::BudgetBelowSmallestPage { .. },
            )) => {}
            Err(error) => self
                .wrong
                .push(("set_budget".to_string(), error.to_string())),
        }
    }

    fn step(&mut self) {
        self.tally.ops += 1;
        let len = 4 * (1 + self.rng.below(2048)) as usize;
        let any = !self.owned.is_empty();
        let room = self.owned.len() < MAX_OWNED;
        match self.rng.below(16) {
            0 | 1 if room => self.create(len),
            2 | 3 if any => self.write(),
            4 if any => {
                let at = self.pick();
                self.launch(at);
            }
            5 if any => self.read(),
            6 if any => self.held_read(),
            7 if any && self.submits => self.export_and_create(len),
            7 | 8 if any && !self.submits => self.silent_export(),
            8 if any => self.callback(),
            9 if self.submits => self.app_submit(),
            10 | 11 => self.compact(),
            12 if self.submits => {
                self.client.cleanup();
            }
            13 if self.sets_budget => self.budget(),
            _ if any => {
                let at = self.pick();
                self.owned.swap_remove(at);
            }
            _ => {}
        }
    }
}

fn worker(client: Client, index: u64, until: Instant) -> (Wrong, Tally, Vec<Owned>) {
    let mut worker = Worker {
        rng: Lcg(index + 1),
        kernel: Kernel::new("add one", ADD_ONE, "main"),
        app: AppAddOne::new(&client),
        client,
        owned: Vec::new(),
        wrong: Wrong::new(),
        tally: Tally::default(),
        submits: index < FIRST_SILENT,
        sets_budget: index < BUDGET_SETTERS,
    };
    while Instant::now() < until {
        worker.step();
    }
    (worker.wrong, worker.tally, worker.owned)
}

#[test]
fn eight_threads_mixing_every_operation_lose_no_byte_keep_nothing_and_never_hang() {
    let Some((client, device_before)) = open_measured() else {
        return;
    };
    // Pages of 32 KiB hold a few of the threads' handles (4 B to 8 KiB) each: the live
    // slices spread over many pages, and the holes drops leave are worth compacting.
    let toml = "[memory]\npools = [ { type = \"sliced\", page_size = \"32 KiB\", max_slice_size = \"32 KiB\" } ]\n";
    let pools = parse_memory_config(toml).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
    let seconds: u64 = std::env::var("WGPU_MEMORY_SOAK_SECS").map_or(30, |value| {
        value.parse().expect("WGPU_MEMORY_SOAK_SECS: seconds")
    });
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..THREADS)
        .map(|index| {
            let client = client.clone();
            std::thread::spawn(move || {
                within(
                    &format!("soak thread {index}"),
                    Duration::from_secs(seconds + 120),
                    move || worker(client, index, until),
                )
            })
        })
        .collect();
    let mut wrong = Wrong::new();
    let mut tally = Tally::default();
    let mut owned = Vec::new();
    for thread in threads {
        let (found, done, kept) = thread.join().expect("a soak thread panicked");
        wrong.extend(found);
        tally.add(&done);
        owned.extend(kept);
    }
    let ran = started.elapsed();
    eprintln!(
        "soak: {} operations over {:.1} s ({seconds} s asked): {tally:?}",
        tally.ops,
        ran.as_secs_f64()
    );
    // Every handle the threads kept reads its model once the budget is gone.
    let finished = within("the final reads", Duration::from_secs(120), move || {
        let mut wrong = wrong;
        let mut tally = Tally::default();
        let cleared = client.set_budget(None);
        tally.sort(&mut wrong, "clearing the budget", cleared);
        for target in &owned {
            let read = client.read_blocking(&target.handle);
            tally.check(&mut wrong, "final read", read, &target.bytes);
        }
        if tally.refused > 0 {
            let refused = format!("{} refused with no budget set", tally.refused);
            wrong.push(("final reads".to_string(), refused));
        }
        drop(owned);
        client.cleanup();
        (client, wrong)
    });
    let (client, wrong) = finished;
    assert!(
        wrong.is_empty(),
        "{} wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
    // Everything is dropped and one cleanup ran: nothing is live, nothing reserved.
    let report = client.memory_report();
    assert_eq!(
        memories_holding(&report),
        Vec::<(String, u64, u64)>::new(),
        "(memory, live slices, bytes reserved) after dropping everything and a cleanup; \
         {} exports held",
        client.held_exports()
    );
    assert_eq!(client.held_exports(), 0);
    assert_eq!(client.pending_upload_bytes(), 0);
    // wgpu frees a given-back buffer once the device is done with it (on the client's
    // reclaimer thread, which `device_memory` waits for).
    client.sync().unwrap();
    let after = client.device_memory().map(|memory| memory.reserved);
    if let (Some(before), Some(after)) = (device_before, after) {
        eprintln!(
            "soak: wgpu's device memory blocks: {before} bytes before the client, {after} after"
        );
        assert!(
            after.abs_diff(before) <= DEVICE_MEMORY_BLOCK,
            "wgpu's allocator holds {after} bytes of blocks, {before} before the client was made"
        );
    }
}
