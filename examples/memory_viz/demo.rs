//! A synthetic snapshot, made without a GPU: 3 pools, 20 pages (one of them holding 1000
//! slices), labels and a history of a model that loads weights, runs ten steps, cleans up
//! and finally asks for more than the device has.
//!
//! The history agrees with the pages (every live slice has its reservation, every
//! temporary its free), and the report is the pages' sums, so `check` and `check_report`
//! pass. The same seed always gives the same snapshot.

use cubecl_environment::stream::StreamId;
use wgpu_memory::memory_management::{
    AuxiliaryMemoryReport, MemoryPoolKind, MemoryPoolReport, MemoryPoolsReport, MemoryReport,
    MemoryUsage, StreamMemoryReport,
};
use wgpu_memory::report::{
    EventKind, HistoryEvent, MAIN_MEMORY, MemorySnapshot, MemorySnapshotMemory, PageSnapshot,
    PoolSnapshot, SliceSnapshot,
};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// When the snapshot is taken, in µs.
const TAKEN_US: u64 = 2_000_000;
/// Slice alignment, in bytes: a slice's footprint is its size rounded up to this.
const ALIGN: u64 = 256;

/// The number of slices of the dense page.
pub const DENSE_SLICES: usize = 1000;

/// xorshift64*: a tiny deterministic generator, enough for a demo.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `lo .. hi` (`lo` when the range is empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// The history and the next allocation id, shared while pages are filled.
struct Recorder {
    rng: Rng,
    next_id: u64,
    history: Vec<HistoryEvent>,
}

impl Recorder {
    fn event(
        &mut self,
        time_us: u64,
        kind: EventKind,
        bytes: u64,
        pool: &str,
        page: Option<u64>,
        label: Option<&str>,
    ) -> &mut HistoryEvent {
        self.history.push(HistoryEvent {
            pool: Some(pool.to_string()),
            page,
            label: label.map(str::to_string),
            ..HistoryEvent::new(time_us, kind, bytes)
        });
        let last = self.history.len() - 1;
        &mut self.history[last]
    }

    /// A reservation at `time_us` and its free at `free_us`.
    fn temporary(
        &mut self,
        time_us: u64,
        free_us: u64,
        bytes: u64,
        pool: &str,
        page: u64,
        label: &str,
    ) {
        let id = self.next_id;
        self.next_id += 1;
        for (time, kind) in [(time_us, EventKind::Reserve), (free_us, EventKind::Free)] {
            let event = self.event(time, kind, bytes, pool, Some(page), Some(label));
            event.id = Some(id);
            event.offset = Some(0);
        }
    }
}

/// A page being filled left to right.
struct PageFill {
    page: PageSnapshot,
    pool: String,
    cursor: u64,
    made_us: u64,
}

impl PageFill {
    fn new(rec: &mut Recorder, pool: &str, id: u64, size: u64, made_us: u64) -> Self {
        rec.event(made_us, EventKind::PageMade, size, pool, Some(id), None);
        PageFill {
            page: PageSnapshot {
                id,
                size,
                slices: Vec::new(),
            },
            pool: pool.to_string(),
            cursor: 0,
            made_us,
        }
    }

    /// Places a live slice of `size` requested bytes reserved at `time_us`; false when it
    /// does not fit.
    fn place(&mut self, rec: &mut Recorder, size: u64, label: &str, time_us: u64) -> bool {
        let footprint = size.div_ceil(ALIGN) * ALIGN;
        if self.cursor + footprint > self.page.size {
            return false;
        }
        let id = rec.next_id;
        rec.next_id += 1;
        let time_us = time_us.clamp(self.made_us + 1, TAKEN_US - 1);
        self.page.slices.push(SliceSnapshot {
            id: Some(id),
            age_us: Some(TAKEN_US - time_us),
            ..SliceSnapshot::live(self.cursor, size, footprint - size).labelled(label)
        });
        let pool = self.pool.clone();
        let event = rec.event(
            time_us,
            EventKind::Reserve,
            size,
            &pool,
            Some(self.page.id),
            Some(label),
        );
        event.offset = Some(self.cursor);
        event.id = Some(id);
        self.cursor += footprint;
        true
    }

    /// Leaves `bytes` free (as much as fits).
    fn hole(&mut self, bytes: u64) {
        self.cursor = (self.cursor + bytes.div_ceil(ALIGN) * ALIGN).min(self.page.size);
    }

    /// The page, with its trailing free range listed as a free slice.
    fn finish(mut self) -> PageSnapshot {
        if self.cursor < self.page.size {
            self.page.slices.push(SliceSnapshot::free(
                self.cursor,
                self.page.size - self.cursor,
            ));
        }
        self.page
    }
}

const SMALL_POOL: &str = "sliced, 4 MiB pages, slices up to 64 KiB";
const LARGE_POOL: &str = "sliced, 64 MiB pages, slices up to 16 MiB";
const STAGING_POOL: &str = "sliced, 16 MiB pages";

const SMALL_LABELS: [&str; 6] = [
    "tokenizer/vocab",
    "model/norm params",
    "kv cache/block table",
    "sampler/state",
    "metrics",
    "model/layer 0/attention/rotary tables",
];

/// The small-slice pool: a dense page of [`DENSE_SLICES`] slices, then five sparser pages.
fn small_pool(rec: &mut Recorder) -> Vec<PageSnapshot> {
    let mut pages = Vec::new();
    let mut dense = PageFill::new(rec, SMALL_POOL, 0, 4 * MIB, 2_000);
    let mut placed = 0;
    while placed < DENSE_SLICES {
        let label = rec.rng.pick(&SMALL_LABELS);
        let block = rec.rng.range(30, 150) as usize;
        for _ in 0..block.min(DENSE_SLICES - placed) {
            let left = (DENSE_SLICES - placed) as u64;
            let hole = rec.rng.range(KIB, 16 * KIB);
            if rec.rng.chance(6) && dense.cursor + hole + left * 4 * KIB <= dense.page.size {
                dense.hole(hole);
            }
            // Metrics are scalars: mostly padding once aligned.
            let size = if label == "metrics" {
                rec.rng.range(16, 700)
            } else {
                rec.rng.range(1500, 3500)
            };
            let time = rec.rng.range(10_000, TAKEN_US);
            if dense.place(rec, size, label, time) {
                placed += 1;
            }
        }
    }
    pages.push(dense.finish());

    let made = [50_000, 300_000, 600_000, 900_000, 1_200_000];
    for (i, &made_us) in made.iter().enumerate() {
        let mut page = PageFill::new(rec, SMALL_POOL, i as u64 + 1, 4 * MIB, made_us);
        let slices = rec.rng.range(20, 200);
        for _ in 0..slices {
            if rec.rng.chance(20) {
                let hole = rec.rng.range(4 * KIB, 128 * KIB);
                page.hole(hole);
            }
            let size = rec.rng.range(2 * KIB, 40 * KIB);
            let label = rec.rng.pick(&SMALL_LABELS);
            let time = rec.rng.range(made_us, TAKEN_US);
            if !page.place(rec, size, label, time) {
                break;
            }
        }
        pages.push(page.finish());
    }
    pages
}

/// The large-slice pool: weights, the kv cache, optimizer state and a sparse last page.
fn large_pool(rec: &mut Recorder) -> Vec<PageSnapshot> {
    let weights = [
        "weights/embed",
        "weights/layer 0",
        "weights/layer 1",
        "weights/layer 2",
        "weights/layer 3",
        "weights/layer 4",
        "weights/layer 5",
        "weights/lm head",
    ];
    let mut pages = Vec::new();
    let mut weight = 0;
    for i in 0..10u64 {
        let (made_us, labels, sizes, holes): (u64, Vec<&str>, (u64, u64), u64) = match i {
            0..=4 => (5_000 + i * 10_000, vec![], (MIB, 16 * MIB), 10),
            5 | 6 => (
                200_000 + i * 5_000,
                vec!["kv cache"],
                (8 * MIB, 16 * MIB),
                5,
            ),
            7 | 8 => (
                320_000 + i * 5_000,
                vec!["optimizer/adam m", "optimizer/adam v"],
                (2 * MIB, 12 * MIB),
                20,
            ),
            _ => (
                400_000,
                vec!["activations/saved for backward"],
                (MIB, 4 * MIB),
                60,
            ),
        };
        let mut page = PageFill::new(rec, LARGE_POOL, 6 + i, 64 * MIB, made_us);
        let mut count = 0;
        loop {
            if rec.rng.chance(holes) {
                let hole = rec.rng.range(256 * KIB, 6 * MIB);
                page.hole(hole);
            }
            let size = rec.rng.range(sizes.0, sizes.1) / 4 * 4 + 4;
            let label = if labels.is_empty() {
                weights[(weight / 3) % weights.len()]
            } else {
                rec.rng.pick(&labels)
            };
            let time = made_us + rec.rng.range(1, 30_000);
            if !page.place(rec, size, label, time) {
                break;
            }
            if labels.is_empty() {
                weight += 1;
                rec.event(
                    time,
                    EventKind::Upload,
                    size,
                    LARGE_POOL,
                    Some(6 + i),
                    Some(label),
                );
            }
            count += 1;
            if i == 9 && count == 5 {
                break;
            }
        }
        pages.push(page.finish());
    }
    pages
}

/// The staging memory's pool: a few readback slices held by reads in flight.
fn staging_pool(rec: &mut Recorder) -> Vec<PageSnapshot> {
    let made = [100_000, 500_000, 1_000_000, 1_500_000];
    let mut pages = Vec::new();
    for (i, &made_us) in made.iter().enumerate() {
        let mut page = PageFill::new(rec, STAGING_POOL, i as u64, 16 * MIB, made_us);
        for _ in 0..rec.rng.range(1, 4) {
            let size = rec.rng.range(MIB, 5 * MIB);
            let label = rec.rng.pick(&["readback/logits", "readback/metrics"]);
            let time = rec.rng.range(1_950_000, TAKEN_US);
            if !page.place(rec, size, label, time) {
                break;
            }
            page.hole(rec.rng.range(0, 2 * MIB));
        }
        pages.push(page.finish());
    }
    pages
}

/// Ten steps of temporaries on three pages made for them, given back by a cleanup; then an
/// out-of-memory. None of it is live at the end.
fn steps(rec: &mut Recorder) {
    let transient: [u64; 3] = [16, 17, 18];
    for (i, &page) in transient.iter().enumerate() {
        rec.event(
            450_000 + i as u64 * 9_000,
            EventKind::PageMade,
            64 * MIB,
            LARGE_POOL,
            Some(page),
            None,
        );
    }
    for step in 0..10u64 {
        let start = 450_000 + step * 120_000;
        for layer in 0..6u64 {
            let label = format!("activations/layer {layer}");
            let size = rec.rng.range(6 * MIB, 14 * MIB);
            let reserve = start + layer * 8_000 + rec.rng.range(0, 2_000);
            let free = start + 60_000 + (5 - layer) * 8_000 + rec.rng.range(0, 2_000);
            rec.temporary(
                reserve,
                free,
                size,
                LARGE_POOL,
                transient[(layer % 3) as usize],
                &label,
            );
            rec.event(
                reserve + 500,
                EventKind::Launch,
                0,
                LARGE_POOL,
                None,
                Some("matmul"),
            );
            for k in 0..3 {
                let t = reserve + 1_000 + k * 1_500;
                let bytes = rec.rng.range(MIB, 4 * MIB);
                rec.temporary(
                    t,
                    t + 1_000,
                    bytes,
                    LARGE_POOL,
                    transient[(k % 3) as usize],
                    "scratch/matmul",
                );
            }
        }
        for _ in 0..150 {
            let t = start + rec.rng.range(0, 110_000);
            let bytes = rec.rng.range(256, 16 * KIB);
            let free = t + rec.rng.range(100, 5_000);
            rec.temporary(t, free, bytes, SMALL_POOL, 5, "step/scalars");
        }
        let t = start + 110_000;
        rec.event(
            t,
            EventKind::Readback,
            4 * MIB,
            STAGING_POOL,
            Some(0),
            Some("readback/logits"),
        );
    }
    let cleanup = 1_750_000;
    for &page in &transient {
        rec.event(
            cleanup,
            EventKind::PageReleased,
            64 * MIB,
            LARGE_POOL,
            Some(page),
            None,
        );
    }
    rec.event(
        cleanup,
        EventKind::Cleanup,
        3 * 64 * MIB,
        LARGE_POOL,
        None,
        None,
    );
    rec.event(
        1_900_000,
        EventKind::OutOfMemory,
        1536 * MIB,
        LARGE_POOL,
        None,
        Some("activations/layer 5"),
    );
}

fn pool_report(pages: &[PageSnapshot], kind: MemoryPoolKind, pages_peak: u64) -> MemoryPoolReport {
    let mut usage = MemoryUsage::default();
    let mut largest_alloc = 0;
    for page in pages {
        let totals = page.totals();
        usage.number_allocs += totals.slices;
        usage.bytes_in_use += totals.bytes_in_use;
        usage.bytes_padding += totals.bytes_padding;
        usage.bytes_reserved += totals.bytes_reserved;
        for slice in page.slices.iter().filter(|s| s.live) {
            largest_alloc = largest_alloc.max(slice.size);
        }
    }
    MemoryPoolReport {
        kind,
        usage,
        pages: pages.len() as u64,
        pages_peak,
        pages_unmapped: 0,
        largest_alloc,
    }
}

fn pools_report(dynamic: Vec<MemoryPoolReport>) -> MemoryPoolsReport {
    MemoryPoolsReport {
        dynamic,
        persistent: pool_report(&[], MemoryPoolKind::Persistent, 0),
        dedicated: pool_report(&[], MemoryPoolKind::Direct, 0),
    }
}

/// The demo snapshot.
pub fn snapshot() -> MemorySnapshot {
    let mut rec = Recorder {
        rng: Rng(0x5EED_CAFE_F00D_0001),
        next_id: 0,
        history: Vec::new(),
    };
    let small = small_pool(&mut rec);
    let large = large_pool(&mut rec);
    let staging = staging_pool(&mut rec);
    steps(&mut rec);
    rec.history.sort_by_key(|event| event.time_us);

    let report = MemoryReport {
        streams: vec![StreamMemoryReport {
            stream: StreamId { value: 0 },
            pools: pools_report(vec![
                pool_report(
                    &small,
                    MemoryPoolKind::Sliced {
                        page_size: 4 * MIB,
                        max_slice_size: 64 * KIB,
                    },
                    small.len() as u64,
                ),
                pool_report(
                    &large,
                    MemoryPoolKind::Sliced {
                        page_size: 64 * MIB,
                        max_slice_size: 16 * MIB,
                    },
                    large.len() as u64 + 3,
                ),
            ]),
            auxiliary: vec![
                AuxiliaryMemoryReport {
                    name: "staging".to_string(),
                    pools: pools_report(vec![pool_report(
                        &staging,
                        MemoryPoolKind::Sliced {
                            page_size: 16 * MIB,
                            max_slice_size: 16 * MIB,
                        },
                        staging.len() as u64,
                    )]),
                },
                AuxiliaryMemoryReport {
                    name: "upload".to_string(),
                    pools: pools_report(vec![]),
                },
            ],
        }],
    };
    let pool = |name: &str, index: usize, pages: Vec<PageSnapshot>| PoolSnapshot {
        pool: name.to_string(),
        index,
        pages,
    };
    MemorySnapshot {
        taken_us: TAKEN_US,
        memories: vec![
            MemorySnapshotMemory {
                name: MAIN_MEMORY.to_string(),
                pools: vec![pool(SMALL_POOL, 0, small), pool(LARGE_POOL, 1, large)],
            },
            MemorySnapshotMemory {
                name: "staging".to_string(),
                pools: vec![pool(STAGING_POOL, 0, staging)],
            },
        ],
        history: rec.history,
        history_dropped: 0,
        started_unix_us: None,
        budget: None,
        report,
    }
}
