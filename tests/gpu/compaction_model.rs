//! A property test of the client API against a shadow model: random creates (`create`,
//! `create_with`), writes at any offset and length (`write`, `write_with`), frees, reads
//! held in flight, exported resources, launches, compactions, cleanups, and a budget set
//! near what the client holds (`held + k`, `k` from 0) or cleared (issue 22).
//!
//! The model changes only when an operation returns `Ok`. The one legal error is a
//! refusal of the budget in force (`OutOfMemory` naming it); any other error fails the
//! case. After every step, `Ok` or refused, each live handle reads the bytes the model
//! says (so a refused operation left every byte as it was, and an `Ok` one wrote what it
//! was given), no pinned slice has moved, and the main memory's bytes in use equal the
//! sum of the live sizes.

use crate::device::pattern;
use proptest::prelude::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use wgpu_memory::memory_management::{PoolConfigError, parse_memory_config};
use wgpu_memory::{Client, ClientError, Handle, HandleResource, Kernel, ReadBytes};

/// Sizes (bytes, multiples of 4) the model reserves: small enough that many share a page.
const SIZES: [u64; 5] = [256, 512, 768, 1024, 2048];

/// What a budget leaves above what is held, in bytes: nothing, less than a main page
/// (4 KiB), a page, less than the smallest upload staging page, and one staging page.
const SLACK: [u64; 5] = [0, 1000, 4096, 100 << 10, 256 << 10];

#[derive(Debug, Clone)]
enum Step {
    Create {
        size: usize,
        seed: u64,
    },
    Drop {
        pick: usize,
    },
    /// Drops every other live handle: the holes compaction gathers.
    DropAlternate,
    /// A `create_with` of one of [`SIZES`].
    CreateWith {
        size: usize,
        seed: u64,
    },
    /// A write of any offset and length (edges unaligned), through `write` or, with
    /// `with`, `write_with`.
    Write {
        pick: usize,
        at: u16,
        len: u16,
        seed: u64,
        with: bool,
    },
    /// Sets the budget to what the client holds plus `SLACK[k]` bytes; with `tight`,
    /// what it holds once a cleanup gave every free page back.
    SetBudget {
        k: usize,
        tight: bool,
    },
    ClearBudget,
    /// Starts a read and keeps it in flight until a later `Finish`.
    Read {
        pick: usize,
    },
    Finish,
    Export {
        pick: usize,
    },
    Unexport,
    /// The application submits through `Client::queue()`: exports made before it are let
    /// go at the next reservation (the client's contract for exported slices).
    AppSubmit,
    Launch {
        pick: usize,
    },
    Compact,
    Cleanup,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..SIZES.len(), any::<u64>()).prop_map(|(size, seed)| Step::Create { size, seed }),
        2 => any::<usize>().prop_map(|pick| Step::Drop { pick }),
        1 => Just(Step::DropAlternate),
        2 => (0..SIZES.len(), any::<u64>())
            .prop_map(|(size, seed)| Step::CreateWith { size, seed }),
        4 => (any::<usize>(), any::<u16>(), any::<u16>(), any::<u64>(), any::<bool>())
            .prop_map(|(pick, at, len, seed, with)| Step::Write { pick, at, len, seed, with }),
        2 => (0..SLACK.len(), any::<bool>()).prop_map(|(k, tight)| Step::SetBudget { k, tight }),
        1 => Just(Step::ClearBudget),
        1 => any::<usize>().prop_map(|pick| Step::Read { pick }),
        1 => Just(Step::Finish),
        1 => any::<usize>().prop_map(|pick| Step::Export { pick }),
        1 => Just(Step::Unexport),
        1 => Just(Step::AppSubmit),
        1 => any::<usize>().prop_map(|pick| Step::Launch { pick }),
        2 => Just(Step::Compact),
        1 => Just(Step::Cleanup),
    ]
}

type Read = Pin<Box<dyn Future<Output = Result<ReadBytes, ClientError>> + Send>>;

/// The model: every live handle and the bytes it must hold.
#[derive(Default)]
struct Model {
    live: Vec<(Handle, Vec<u8>)>,
    /// Reads in flight, with the bytes they must return, the handle read (a read in
    /// flight keeps its slice)
    /// and whether a budget was in force when it started (it may then be refused).
    reads: Vec<(Read, Vec<u8>, Handle, bool)>,
    /// Exported resources, with where they said the slice was.
    exported: Vec<(Handle, HandleResource, wgpu::Buffer, u64)>,
    /// Every export's slice is held (and pinned) until the application's next submission
    /// through `Client::queue()` and the reservation after it; `true` once submitted.
    held: Vec<(Handle, bool)>,
    /// The budget in force (bytes).
    budget: Option<u64>,
}

/// Whether `error` is a refusal by the budget.
fn refused(error: &ClientError) -> bool {
    matches!(error, ClientError::OutOfMemory { detail, .. } if detail.budget.is_some())
}

/// One client for the whole property (opening an adapter per case would dominate),
/// with pages of 4 KiB so that a few dozen slices spread over many pages.
fn client() -> Option<Client> {
    static CLIENT: OnceLock<Option<Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let client = crate::device::fresh()?;
            let toml = "[memory]\npools = [ { type = \"sliced\", page_size = \"4 KiB\", max_slice_size = \"4 KiB\" } ]\n";
            let pools = parse_memory_config(toml).unwrap().pools.unwrap();
            client.install_memory_pools(&pools).unwrap();
            Some(client)
        })
        .clone()
}

/// Multiplies every u32 word by 3 and adds 1, as the model does.
fn kernel() -> Kernel {
    Kernel::new(
        "model step",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
             if (i.x < arrayLength(&x)) { x[i.x] = x[i.x] * 3u + 1u; }
         }",
        "main",
    )
}

fn triple_plus_one(bytes: &mut [u8]) {
    for word in bytes.chunks_exact_mut(4) {
        let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        word.copy_from_slice(&value.wrapping_mul(3).wrapping_add(1).to_le_bytes());
    }
}

impl Model {
    /// `result`'s value; `None` for a refusal of the budget in force; any other
    /// error, or a refusal with no budget, fails the case.
    fn sort<T>(&mut self, step: &Step, result: Result<T, ClientError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) if refused(&error) && self.budget.is_some() => None,
            Err(error) => panic!("{step:?} under the budget {:?}: {error}", self.budget),
        }
    }

    fn apply(&mut self, client: &Client, step: &Step) {
        let count = self.live.len();
        match *step {
            Step::Create { size, seed } => {
                let bytes = pattern(SIZES[size] as usize, seed);
                if let Some(handle) = self.sort(step, client.create(&bytes)) {
                    self.live.push((handle, bytes));
                }
                self.held.retain(|(_, submitted)| !submitted);
            }
            Step::CreateWith { size, seed } => {
                let bytes = pattern(SIZES[size] as usize, seed);
                let created =
                    client.create_with(SIZES[size], |mut view| view.copy_from_slice(&bytes));
                if let Some(handle) = self.sort(step, created) {
                    self.live.push((handle, bytes));
                }
                self.held.retain(|(_, submitted)| !submitted);
            }
            Step::Drop { pick } if count > 0 => drop(self.live.swap_remove(pick % count)),
            Step::DropAlternate => {
                let mut index = 0;
                self.live.retain(|_| {
                    index += 1;
                    index % 2 == 1
                });
            }
            Step::Write {
                pick,
                at,
                len,
                seed,
                with,
            } if count > 0 => {
                let (handle, bytes) = &self.live[pick % count];
                let at = usize::from(at) % bytes.len();
                let data = pattern(usize::from(len) % (bytes.len() - at + 1), seed);
                let written = match with {
                    false => client.write(handle, at as u64, &data),
                    true => client.write_with(handle, at as u64, data.len() as u64, |mut view| {
                        view.copy_from_slice(&data)
                    }),
                };
                if self.sort(step, written).is_some() {
                    let bytes = &mut self.live[pick % count].1;
                    bytes[at..at + data.len()].copy_from_slice(&data);
                }
                self.held.retain(|(_, submitted)| !submitted);
            }
            Step::Read { pick } if count > 0 => {
                let (handle, bytes) = &self.live[pick % count];
                self.reads.push((
                    Box::pin(client.read(handle)),
                    bytes.clone(),
                    handle.clone(),
                    self.budget.is_some(),
                ));
            }
            Step::Finish => {
                if let Some((read, expected, _, budget)) = self.reads.pop() {
                    match pollster::block_on(read) {
                        Ok(got) => assert!(
                            got[..] == expected[..],
                            "a read in flight returned other bytes"
                        ),
                        Err(error) if budget && refused(&error) => {}
                        Err(error) => panic!("a read in flight (budget: {budget}): {error}"),
                    }
                }
            }
            Step::Export { pick } if count > 0 => {
                let handle = self.live[pick % count].0.clone();
                let Some(resource) = self.sort(step, client.resource(&handle)) else {
                    return;
                };
                let (buffer, offset) = (resource.buffer.clone(), resource.offset);
                self.held.push((handle.clone(), false));
                self.exported.push((handle, resource, buffer, offset));
            }
            Step::Unexport => drop(self.exported.pop()),
            Step::AppSubmit => {
                client.queue().submit([]);
                for (_, submitted) in &mut self.held {
                    *submitted = true;
                }
            }
            Step::Launch { pick } if count > 0 => {
                let groups = (self.live[pick % count].1.len() as u32 / 4).div_ceil(64);
                let launched =
                    client.launch(&kernel(), [groups, 1, 1], &[&self.live[pick % count].0]);
                if self.sort(step, launched).is_some() {
                    triple_plus_one(&mut self.live[pick % count].1);
                }
            }
            Step::Compact => {
                self.sort(step, client.compact());
            }
            Step::Cleanup => {
                client.cleanup();
            }
            Step::SetBudget { k, tight } => {
                if tight {
                    client.cleanup();
                }
                let mut budget = (client.budget().held + SLACK[k]).max(1);
                // A budget below the smallest page is refused, naming the page: the
                // tightest one accepted is that page.
                if let Err(ClientError::Config(PoolConfigError::BudgetBelowSmallestPage {
                    page_size,
                    ..
                })) = client.set_budget(Some(budget))
                {
                    budget = page_size;
                }
                client
                    .set_budget(Some(budget))
                    .unwrap_or_else(|error| panic!("{step:?}: {error}"));
                self.budget = Some(budget);
            }
            Step::ClearBudget => {
                client.set_budget(None).unwrap();
                self.budget = None;
            }
            _ => {}
        }
    }

    /// Every handle holds its bytes, every pinned slice is where its resource says, and
    /// the report counts exactly the bytes still held.
    fn check(&mut self, client: &Client) {
        for (handle, _, buffer, offset) in &self.exported {
            let now = client.resource(handle).unwrap();
            assert_eq!(
                (&now.buffer, now.offset),
                (buffer, *offset),
                "a pinned slice moved"
            );
        }
        // The checks' own reads and reservation need room the budget may refuse: they
        // run without it, and it is set again after.
        if self.budget.is_some() {
            client.set_budget(None).unwrap();
        }
        // Every export (looking above is one too) is held until a submission through the
        // client's queue and the reservation after it: settle them, then the report must
        // count exactly the live handles, the resources and reads still held.
        client.queue().submit([]);
        drop(client.empty(4).unwrap());
        self.held.clear();
        let mut held: Vec<&Handle> = self.live.iter().map(|(handle, _)| handle).collect();
        held.extend(self.exported.iter().map(|(handle, ..)| handle));
        held.extend(self.held.iter().map(|(handle, _)| handle));
        held.extend(self.reads.iter().map(|(_, _, handle, _)| handle));
        let in_use: u64 = {
            let mut ids = std::collections::HashSet::new();
            held.iter()
                .filter(|handle| ids.insert(handle.memory().descriptor().id))
                .map(|handle| handle.size())
                .sum()
        };
        let report = client.memory_report();
        assert_eq!(report.streams[0].pools.usage().bytes_in_use, in_use);
        let handles: Vec<&Handle> = self.live.iter().map(|(handle, _)| handle).collect();
        let read = client.read_many_blocking(&handles).unwrap();
        for ((_, expected), got) in self.live.iter().zip(read) {
            assert!(got[..] == expected[..], "a live handle lost its bytes");
        }
        if let Some(budget) = self.budget {
            client
                .set_budget(Some(budget))
                .unwrap_or_else(|error| panic!("setting the budget again: {error}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_every_handles_bytes(steps in prop::collection::vec(step(), 20..60)) {
        let Some(client) = client() else { return Ok(()) };
        // A case that failed may have left its budget.
        client.set_budget(None).unwrap();
        // Exports of an earlier case are held until a submission through the client's
        // queue and the reservation after it.
        client.queue().submit([]);
        drop(client.empty(4).unwrap());
        let mut model = Model::default();
        for step in &steps {
            // After an `Ok` the bytes are what was written; after a refusal, what they
            // were.
            model.apply(&client, step);
            model.check(&client);
        }
        while let Some((read, expected, _, budget)) = model.reads.pop() {
            match pollster::block_on(read) {
                Ok(got) => prop_assert!(got[..] == expected[..]),
                Err(error) => prop_assert!(budget && refused(&error), "{error}"),
            }
        }
        drop(model);
        client.set_budget(None).unwrap();
        client.cleanup();
        prop_assert!(client.uncaptured_errors().is_empty());
    }
}
