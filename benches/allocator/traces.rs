//! The allocation traces the allocator bench replays: patterns users run, each drawn
//! from a fixed seed, so every run replays the same operations on both sides.
//!
//! Every trace is closed (whatever it reserves it also drops by its end), so it can be
//! replayed any number of times on the same memory.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// One operation of a trace. Slots name live handles: a `Reserve` fills an empty slot, a
/// `Drop` empties a full one (dropping the handle releases the memory on both sides).
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Reserve { slot: u32, size: u64 },
    Drop { slot: u32 },
}

/// A closed trace of operations.
pub struct Trace {
    pub name: &'static str,
    pub description: String,
    pub ops: Vec<Op>,
    /// Slots the ops name (indices below this).
    pub slots: usize,
}

impl Trace {
    pub fn reserves(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op, Op::Reserve { .. }))
            .count()
    }

    /// Peak of the sum of the requested sizes of live handles, in bytes.
    pub fn peak_live_bytes(&self) -> u64 {
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
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// Uniform in `lo..=hi`.
    pub fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        lo + (self.next() % (hi - lo + 1))
    }

    /// Log-uniform in `lo..=hi`: as many sizes per octave at each end.
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        ((l + (h - l) * unit).exp() as u64).clamp(lo, hi)
    }
}

/// Builds a closed trace: hands out slots and drops whatever is still live at the end,
/// oldest first.
pub struct Builder {
    ops: Vec<Op>,
    vacant: Vec<u32>,
    slots: u32,
    /// Live slots in reservation order.
    live: Vec<u32>,
}

impl Builder {
    pub fn new() -> Self {
        Self {
            ops: Vec::new(),
            vacant: Vec::new(),
            slots: 0,
            live: Vec::new(),
        }
    }

    pub fn reserve(&mut self, size: u64) -> u32 {
        let slot = self.vacant.pop().unwrap_or_else(|| {
            self.slots += 1;
            self.slots - 1
        });
        self.ops.push(Op::Reserve { slot, size });
        self.live.push(slot);
        slot
    }

    pub fn release(&mut self, slot: u32) {
        let at = self
            .live
            .iter()
            .position(|&s| s == slot)
            .expect("a live slot");
        self.live.remove(at);
        self.ops.push(Op::Drop { slot });
        self.vacant.push(slot);
    }

    pub fn finish(mut self, name: &'static str, description: String) -> Trace {
        for slot in std::mem::take(&mut self.live) {
            self.ops.push(Op::Drop { slot });
        }
        Trace {
            name,
            description,
            ops: self.ops,
            slots: self.slots as usize,
        }
    }
}

/// Trace lengths: full for benchmarking, reduced for `cargo test --benches`.
#[derive(Clone, Copy)]
pub struct Scale {
    random_reserves: usize,
    training_steps: usize,
    inference_repeats: usize,
    drifting_steps: usize,
    tiny_reserves: usize,
    large_live_reserves: usize,
    phase_pairs: usize,
    leak_mix_reserves: usize,
    fence_steps: usize,
    frames: usize,
    steady_reserves: usize,
    ascending_repeats: usize,
}

pub const FULL: Scale = Scale {
    random_reserves: 20_000,
    training_steps: 200,
    inference_repeats: 200,
    drifting_steps: 4_000,
    tiny_reserves: 50_000,
    large_live_reserves: 3_000,
    phase_pairs: 30,
    leak_mix_reserves: 8_000,
    fence_steps: 300,
    frames: 2_000,
    steady_reserves: 50_000,
    ascending_repeats: 500,
};

pub const TEST: Scale = Scale {
    random_reserves: 1_000,
    training_steps: 10,
    inference_repeats: 10,
    drifting_steps: 400,
    tiny_reserves: 3_000,
    large_live_reserves: 200,
    phase_pairs: 3,
    leak_mix_reserves: 600,
    fence_steps: 30,
    frames: 100,
    steady_reserves: 2_000,
    ascending_repeats: 20,
};

/// Every trace, in the order of the tables.
pub fn traces(scale: Scale) -> Vec<Trace> {
    vec![
        random(scale),
        training(scale),
        inference(scale),
        drifting(scale),
        tiny(scale),
        large_live(scale),
        phases(scale),
        leak_mix(scale),
        fence_cycles(scale),
        frame_loop(scale),
        steady(scale),
        ascending(scale),
    ]
}

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
            "{reserves} reservations of {min}..={max} B (uniform), {live} live, random replacement"
        ),
        ops,
        slots: live,
    }
}

fn random(scale: Scale) -> Trace {
    random_seeded(scale, 0x5EED_0001)
}

/// The random trace's shape drawn from another seed.
pub fn random_seeded(scale: Scale, seed: u64) -> Trace {
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

/// Large live sets: sizes 1..=64 MiB (log-uniform); the live-bytes budget is drawn again
/// every 250 reservations, uniformly in 100 MiB..=1 GiB, and a reservation first drops
/// random live buffers until it fits the budget.
fn large_live(scale: Scale) -> Trace {
    let mut rng = Rng::new(0x5EED_0006);
    let mut trace = Builder::new();
    let mut live: Vec<(u32, u64)> = Vec::new();
    let mut budget = 0;
    for i in 0..scale.large_live_reserves {
        if i % 250 == 0 {
            budget = rng.uniform(100 * MIB, GIB);
        }
        let size = rng.log_uniform(MIB, 64 * MIB);
        while !live.is_empty() && live.iter().map(|l| l.1).sum::<u64>() + size > budget {
            let (slot, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
            trace.release(slot);
        }
        live.push((trace.reserve(size), size));
    }
    trace.finish(
        "large_live",
        format!(
            "{} reservations of 1..64 MiB (log-uniform) under a live budget redrawn every \
             250 in 100 MiB..1 GiB; random buffers dropped to fit",
            scale.large_live_reserves
        ),
    )
}

/// Alternating phases: a phase of small buffers (4 KiB..512 KiB, 96 live, random
/// replacement, 400 reservations), then a phase of large ones (8..96 MiB, 6 live, 60
/// reservations); a phase drops everything of the one before as it starts.
fn phases(scale: Scale) -> Trace {
    let mut rng = Rng::new(0x5EED_0007);
    let mut trace = Builder::new();
    let mut live: Vec<u32> = Vec::new();
    for _ in 0..scale.phase_pairs {
        for (count, limit, lo, hi) in [(400, 96, 4 * KIB, 512 * KIB), (60, 6, 8 * MIB, 96 * MIB)] {
            for slot in live.drain(..) {
                trace.release(slot);
            }
            for _ in 0..count {
                if live.len() == limit {
                    let victim = live.swap_remove(rng.below(limit as u64) as usize);
                    trace.release(victim);
                }
                live.push(trace.reserve(rng.log_uniform(lo, hi)));
            }
        }
    }
    trace.finish(
        "phases",
        format!(
            "{} pairs of phases: 400 reservations of 4 KiB..512 KiB (96 live), then 60 of \
             8..96 MiB (6 live); each phase drops the previous one's buffers",
            scale.phase_pairs
        ),
    )
}

/// Leak mix: random replacement of 1 KiB..4 MiB (log-uniform), 128 live; one
/// reservation in 20 is never dropped before the end of the trace.
fn leak_mix(scale: Scale) -> Trace {
    let mut rng = Rng::new(0x5EED_0008);
    let mut trace = Builder::new();
    let mut live: Vec<u32> = Vec::new();
    for _ in 0..scale.leak_mix_reserves {
        let size = rng.log_uniform(KIB, 4 * MIB);
        if rng.below(20) == 0 {
            trace.reserve(size);
            continue;
        }
        if live.len() == 128 {
            let victim = live.swap_remove(rng.below(128) as usize);
            trace.release(victim);
        }
        live.push(trace.reserve(size));
    }
    trace.finish(
        "leak_mix",
        format!(
            "{} reservations of 1 KiB..4 MiB (log-uniform), 128 live with random \
             replacement; 1 in 20 kept until the end",
            scale.leak_mix_reserves
        ),
    )
}

/// Fence cycles: per step 8..=24 buffers of 256 KiB..32 MiB (log-uniform); a step's
/// buffers are dropped together four steps later (its submission's fence passing).
fn fence_cycles(scale: Scale) -> Trace {
    const DELAY: usize = 4;
    let mut rng = Rng::new(0x5EED_0009);
    let mut trace = Builder::new();
    let mut in_flight: std::collections::VecDeque<Vec<u32>> = Default::default();
    for _ in 0..scale.fence_steps {
        if in_flight.len() == DELAY {
            for slot in in_flight.pop_front().unwrap_or_default() {
                trace.release(slot);
            }
        }
        let count = rng.uniform(8, 24);
        let batch = (0..count)
            .map(|_| trace.reserve(rng.log_uniform(256 * KIB, 32 * MIB)))
            .collect();
        in_flight.push_back(batch);
    }
    trace.finish(
        "fence_cycles",
        format!(
            "{} steps of 8..24 buffers of 256 KiB..32 MiB (log-uniform), each step's batch \
             dropped {DELAY} steps later",
            scale.fence_steps
        ),
    )
}

/// A per-frame loop: each frame reserves 24 uniforms (16..=256 B) and 4..=10 medium
/// buffers (64 KiB..4 MiB, log-uniform; the first four the same sizes every frame); the
/// medium buffers go at the frame's end, the uniforms two frames later.
fn frame_loop(scale: Scale) -> Trace {
    let mut rng = Rng::new(0x5EED_000A);
    let fixed: Vec<u64> = (0..4).map(|_| rng.log_uniform(64 * KIB, 4 * MIB)).collect();
    let mut trace = Builder::new();
    let mut uniforms: std::collections::VecDeque<Vec<u32>> = Default::default();
    for _ in 0..scale.frames {
        let frame_uniforms = (0..24)
            .map(|_| trace.reserve(rng.uniform(16, 256)))
            .collect();
        let extra = rng.uniform(0, 6) as usize;
        let mut medium: Vec<u32> = fixed.iter().map(|&size| trace.reserve(size)).collect();
        medium.extend((0..extra).map(|_| trace.reserve(rng.log_uniform(64 * KIB, 4 * MIB))));
        for slot in medium {
            trace.release(slot);
        }
        uniforms.push_back(frame_uniforms);
        if uniforms.len() > 2 {
            for slot in uniforms.pop_front().unwrap_or_default() {
                trace.release(slot);
            }
        }
    }
    trace.finish(
        "frame_loop",
        format!(
            "{} frames: 24 uniforms of 16..256 B (kept 2 frames) and 4..10 buffers of \
             64 KiB..4 MiB (4 of fixed sizes), dropped at the frame's end",
            scale.frames
        ),
    )
}

/// One steady size: 256 KiB, four live, the oldest dropped before each reservation.
fn steady(scale: Scale) -> Trace {
    let mut trace = Builder::new();
    let mut live = std::collections::VecDeque::new();
    for _ in 0..scale.steady_reserves {
        if live.len() == 4 {
            let oldest = live.pop_front().expect("four live");
            trace.release(oldest);
        }
        live.push_back(trace.reserve(256 * KIB));
    }
    trace.finish(
        "steady",
        format!(
            "{} reservations of 256 KiB, 4 live, oldest dropped first",
            scale.steady_reserves
        ),
    )
}

/// Ascending sizes kept (issue 12's field failure 2): k * 100 KiB for k = 1..=16
/// reserved and kept, then all dropped, repeated.
fn ascending(scale: Scale) -> Trace {
    let sizes: Vec<u64> = (1..=16).map(|k| k * 100 * KIB).collect();
    let mut ops = Vec::new();
    for _ in 0..scale.ascending_repeats {
        reserve_then_drop(&mut ops, &sizes);
    }
    Trace {
        name: "ascending",
        description: format!(
            "k * 100 KiB for k = 1..16 reserved and kept, then all dropped, {} times",
            scale.ascending_repeats
        ),
        ops,
        slots: sizes.len(),
    }
}
