//! The model-like step of workload (b): which temporaries are made, how big, and the order
//! in which they are dropped. One plan, from a fixed seed, shared by every side and step.
//!
//! Two plans: the default one, and a held-out one (`E2E_MODEL=held-out`: another seed,
//! temporaries up to 14 MiB) that no layout default was tuned on, to check that a change
//! that helps the default plan is not fitted to its one draw.

/// Temporaries per step.
pub const TEMPORARIES: usize = 50;
/// Smallest temporary, in bytes.
const SMALLEST: u64 = 1 << 10;
/// Largest temporary of the default plan, in bytes.
const LARGEST: u64 = 16 << 20;
/// Seed of the default plan.
const SEED: u64 = 0x00e2_e5eed;
/// Largest temporary of the held-out plan, in bytes.
const HELD_OUT_LARGEST: u64 = 14 << 20;
/// Seed of the held-out plan.
pub const HELD_OUT_SEED: u64 = 0x0001_d0e5;
/// After each creation, the chance (in percent) that one live temporary, picked at random,
/// is dropped: temporaries die in mixed order, some long before the end of the step.
const DROP_PERCENT: u64 = 40;
/// The same for the held-out plan: temporaries die sooner, so fewer are live at once.
const HELD_OUT_DROP_PERCENT: u64 = 80;

/// One operation of a step.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// Make temporary `slot` of `size` bytes and run the fill kernel on it.
    Create { slot: usize, size: u64 },
    /// Drop temporary `slot`.
    Drop { slot: usize },
}

/// A step: every temporary created once and dropped once (nothing outlives the step).
#[derive(Debug, Clone)]
pub struct Plan {
    pub ops: Vec<Op>,
    /// The largest temporary it may make, in bytes (for the table's caption).
    pub largest: u64,
}

impl Plan {
    /// The plan of workload (b): [`TEMPORARIES`] sizes log-uniform in 1 KiB ..= 16 MiB
    /// (rounded up to 4 bytes), dropped in mixed order.
    pub fn model_step() -> Self {
        Self::drawn(SEED, LARGEST, DROP_PERCENT)
    }

    /// The held-out plan: as [`model_step`](Self::model_step), from `seed` (default
    /// [`HELD_OUT_SEED`]), sizes up to 14 MiB, a temporary dropped after 80 % of the
    /// creations (a smaller working set).
    pub fn held_out(seed: u64) -> Self {
        Self::drawn(seed, HELD_OUT_LARGEST, HELD_OUT_DROP_PERCENT)
    }

    /// [`TEMPORARIES`] sizes log-uniform in 1 KiB ..= `largest` from `seed`, one live
    /// temporary dropped after `drop_percent` % of the creations.
    fn drawn(seed: u64, largest: u64, drop_percent: u64) -> Self {
        let mut rng = SplitMix64(seed);
        let (low, high) = ((SMALLEST as f64).ln(), (largest as f64).ln());
        let mut ops = Vec::with_capacity(2 * TEMPORARIES);
        let mut live = Vec::new();
        for slot in 0..TEMPORARIES {
            let size = (low + rng.unit() * (high - low)).exp() as u64;
            let size = size.clamp(SMALLEST, largest).next_multiple_of(4);
            ops.push(Op::Create { slot, size });
            live.push(slot);
            if rng.below(100) < drop_percent {
                let index = rng.below(live.len() as u64) as usize;
                ops.push(Op::Drop {
                    slot: live.swap_remove(index),
                });
            }
        }
        while !live.is_empty() {
            let index = rng.below(live.len() as u64) as usize;
            ops.push(Op::Drop {
                slot: live.swap_remove(index),
            });
        }
        Self { ops, largest }
    }

    /// Bytes of all temporaries together.
    pub fn total_bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Create { size, .. } => *size,
                Op::Drop { .. } => 0,
            })
            .sum()
    }
}

/// SplitMix64: a tiny, well-mixed generator; enough for a reproducible plan.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..bound` (`bound > 0`; the modulo bias is negligible here).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}
