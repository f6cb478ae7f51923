//! A property test of compaction against a shadow model: random reservations, writes,
//! frees, reads held in flight, exported resources, launches, compactions and cleanups.
//! After every step each live handle reads the bytes the model says, no pinned slice has
//! moved, and the main memory's bytes in use equal the sum of the live sizes.

use crate::device::pattern;
use proptest::prelude::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use wgpu_memory::memory_management::parse_memory_config;
use wgpu_memory::{Client, ClientError, Handle, HandleResource, Kernel, ReadBytes};

/// Sizes (bytes, multiples of 4) the model reserves: small enough that many share a page.
const SIZES: [u64; 5] = [256, 512, 768, 1024, 2048];

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
    Write {
        pick: usize,
        at: u16,
        seed: u64,
    },
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
        2 => (any::<usize>(), any::<u16>(), any::<u64>())
            .prop_map(|(pick, at, seed)| Step::Write { pick, at, seed }),
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
    /// Reads in flight, with the bytes they must return and the handle read (a read in
    /// flight keeps its slice).
    reads: Vec<(Read, Vec<u8>, Handle)>,
    /// Exported resources, with where they said the slice was.
    exported: Vec<(Handle, HandleResource, wgpu::Buffer, u64)>,
    /// Every export's slice is held (and pinned) until the application's next submission
    /// through `Client::queue()` and the reservation after it; `true` once submitted.
    held: Vec<(Handle, bool)>,
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
    fn apply(&mut self, client: &Client, step: &Step) {
        let count = self.live.len();
        match *step {
            Step::Create { size, seed } => {
                let bytes = pattern(SIZES[size] as usize, seed);
                self.live.push((client.create(&bytes).unwrap(), bytes));
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
            Step::Write { pick, at, seed } if count > 0 => {
                let (handle, bytes) = &mut self.live[pick % count];
                let at = usize::from(at) % bytes.len();
                let data = pattern((bytes.len() - at).min(700), seed);
                client.write(handle, at as u64, &data).unwrap();
                bytes[at..at + data.len()].copy_from_slice(&data);
            }
            Step::Read { pick } if count > 0 => {
                let (handle, bytes) = &self.live[pick % count];
                self.reads
                    .push((Box::pin(client.read(handle)), bytes.clone(), handle.clone()));
            }
            Step::Finish => {
                if let Some((read, expected, _)) = self.reads.pop() {
                    let got = pollster::block_on(read).unwrap();
                    assert!(
                        got[..] == expected[..],
                        "a read in flight returned other bytes"
                    );
                }
            }
            Step::Export { pick } if count > 0 => {
                let handle = self.live[pick % count].0.clone();
                let resource = client.resource(&handle).unwrap();
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
                let (handle, bytes) = &mut self.live[pick % count];
                let groups = (bytes.len() as u32 / 4).div_ceil(64);
                client.launch(&kernel(), [groups, 1, 1], &[handle]).unwrap();
                triple_plus_one(bytes);
            }
            Step::Compact => {
                client.compact().unwrap();
            }
            Step::Cleanup => {
                client.cleanup();
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
        // Every export (looking above is one too) is held until a submission through the
        // client's queue and the reservation after it: settle them, then the report must
        // count exactly the live handles, the resources and reads still held.
        client.queue().submit([]);
        drop(client.empty(4).unwrap());
        self.held.clear();
        let mut held: Vec<&Handle> = self.live.iter().map(|(handle, _)| handle).collect();
        held.extend(self.exported.iter().map(|(handle, ..)| handle));
        held.extend(self.held.iter().map(|(handle, _)| handle));
        held.extend(self.reads.iter().map(|(_, _, handle)| handle));
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
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_every_handles_bytes(steps in prop::collection::vec(step(), 20..80)) {
        let Some(client) = client() else { return Ok(()) };
        // Exports of an earlier case are held until a submission through the client's
        // queue and the reservation after it.
        client.queue().submit([]);
        drop(client.empty(4).unwrap());
        let mut model = Model::default();
        for step in &steps {
            model.apply(&client, step);
            if matches!(step, Step::Compact | Step::Cleanup | Step::Launch { .. }) {
                model.check(&client);
            }
        }
        model.check(&client);
        while let Some((read, expected, _)) = model.reads.pop() {
            prop_assert!(pollster::block_on(read).unwrap()[..] == expected[..]);
        }
        drop(model);
        client.cleanup();
        prop_assert!(client.uncaptured_errors().is_empty());
    }
}
