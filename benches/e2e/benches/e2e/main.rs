//! End-to-end benchmark: `wgpu_memory::Client` ("ours") against cubecl-wgpu 0.12.0-pre.1
//! (the runtime our users would pick instead, "peer") and bare wgpu 30, on one adapter,
//! each side on a device of its own.
//!
//! The peer comes up exactly as `WgpuRuntime::client(&Default::default())` brings it up
//! (its own adapter choice, device request and default runtime options, without the
//! `persistence` feature); ours and bare wgpu then request their devices from the adapter
//! it picked, with the adapter's limits. All three run the same two WGSL kernels
//! (`kernels.rs`): ours through `Kernel`, the peer as precompiled WGSL kernels launched
//! with `Client::launch`, bare wgpu through its own pipelines.
//!
//! Every case builds its inputs and checks each side's result once (untimed), runs each
//! side once more as a warm-up, then `E2E_REPS` timed repetitions interleaved (ours, peer,
//! bare, ours, peer, bare, ...). Figures are medians. Ratios say how many times faster
//! ours is (above 1: ours is faster), for rates and times alike. GB/s are 10^9 bytes/s.
//!
//! Workloads:
//! - **(a) dispatch throughput**: 2000 dispatches of a one-workgroup kernel ping-ponging
//!   between two 1 KiB buffers (`dst[i] = src[i] + 1`), then one read of the last one
//!   (checked). Ours: `launch` each, `read_blocking`. Peer: `launch` each, `read_one`.
//!   Bare: every dispatch in one compute pass (bind groups made beforehand), the copy to
//!   a staging buffer, one submit, one map. Dispatches/s.
//! - **(b) model-like step**: 50 temporaries of 1 KiB ..= 16 MiB (log-uniform, fixed seed,
//!   `plan.rs`), each made empty and filled by a kernel, dropped in mixed order (about 40%
//!   die before the next one is made), then a sync. Ours: `empty`, `launch`, drop,
//!   `sync`. Peer: `empty`, `launch`, drop, `sync`. Bare: a buffer and a bind group per
//!   temporary, every dispatch in one pass, one submit, a wait. Milliseconds per step.
//!   A second table gives the device buffers each memory holds after the warm-up and how
//!   many it gained while timed (its page count, read from its memory report after each
//!   timed sample, against the count after the warm-up; bare wgpu creates one per
//!   temporary), and, from one more step with a memory report after every temporary, the
//!   peak bytes in use (main pools) and reserved (every memory, staging included) and
//!   their ratio, and the peak device memory: wgpu's own allocator report
//!   (`Device::generate_allocator_report`: bytes in device memory blocks, and bytes
//!   allocated in them) of each side's device, sampled after every temporary is made
//!   (ours through `Client::device_memory`, the peer on the device `init_setup` returned,
//!   bare wgpu on its own). Ours opens its device with `Client::memory_hints()` (4 MiB
//!   blocks, as `Client::open_default` does), the peer with its own
//!   `MemoryHints::MemoryUsage`, bare wgpu with wgpu's default. `E2E_MODEL=held-out`
//!   runs a held-out plan instead (`plan.rs`).
//! - **(c) upload**: 4 KiB, 1 MiB, 64 MiB and 256 MiB (each capped at the device's
//!   `max_storage_buffer_binding_size` and `max_buffer_size`), each upload waited for
//!   (4 KiB: 64 per sample, 1 MiB: 16, larger: 1). Ours: `create` + `sync`, and
//!   `create_with` (the closure copies the same warm host slice into the bytes it is
//!   given) + `sync`. Peer: `create_from_slice` + `sync`. Bare: `queue.write_buffer` into
//!   a buffer made beforehand, an empty submit, a wait. GB/s.
//! - **(d) upload + readback round trip** at the same sizes: ours `create` +
//!   `read_blocking`; peer `create_from_slice` + `read_one`; bare `create_buffer_init`, a
//!   copy into a new MAP_READ buffer, submit, map, unmap. One byte per 4 KiB touched on
//!   each side; buffers dropped inside the timing. GB/s.
//! - **(e) 1000 reads of 4 KiB in one batch**: ours `read_many_blocking`; peer `read` of
//!   1000 handles; bare 1000 copies into one staging buffer made beforehand, one submit,
//!   one map. Each part touched. Milliseconds per batch.
//!
//! After the main table, `stages.rs` splits (a) and (e) for ours and bare wgpu: the
//! median of each stage (recording, submit, the wait for the map, the host's touch), timed
//! with `Instant` inside the same timed runs.
//!
//! Run (from the repository root; a release build, the table goes to stdout):
//!
//! ```sh
//! cargo bench -p e2e                                # everything, 7 repetitions
//! E2E_REPS=11 E2E_ONLY=a,b cargo bench -p e2e       # some workloads, more repetitions
//! E2E_SMALL=1 cargo bench -p e2e                    # lavapipe: up to 64 MiB, 500 dispatches
//! ```
//!
//! Environment: `E2E_REPS` (default 7), `E2E_ONLY` (letters, default `a,b,c,d,e`),
//! `E2E_SMALL=1` (sizes up to 64 MiB, 500 dispatches, 3 steps per sample),
//! `E2E_DISPATCHES` (default 2000), `E2E_STEPS` (model steps per timed sample, default
//! 10), `E2E_MODEL` (workload (b)'s plan: `default`, `held-out`, or `held-out:SEED`), `E2E_BLOCKS=1` (print wgpu's device memory blocks and what each holds at every new peak of ours' model step). Ours takes its submit policy from the `[submit]` table of `wgpu-memory.toml` (or
//! the file `WGPU_MEMORY_CONFIG` names) when there is one; the header prints it. Progress
//! goes to stderr.

#[path = "../../../support/median.rs"]
mod support_median;

mod bare;
mod common;
mod config;
mod kernels;
mod measure;
mod ours;
mod peer;
mod plan;
mod stages;
mod table;

use bare::Bare;
use common::pattern;
use config::Config;
use measure::interleaved;
use ours::{Ours, Upload};
use peer::Peer;
use plan::{Plan, TEMPORARIES};
use stages::{Stages, print_split};
use table::{Better, Row};
use wgpu_memory::memory_management::format_bytes;

/// Small reads of workload (e): how many, of how many bytes.
const SMALL_READS: usize = 1000;
const SMALL_READ_SIZE: usize = 4096;

/// Uploads per timed sample of workload (c): enough for 16 MiB, between 1 and 64.
fn uploads_per_sample(size: u64) -> usize {
    ((16 << 20) / size).clamp(1, 64) as usize
}

fn main() {
    let config = Config::from_env();
    let (peer, setup) = Peer::open();
    let ours = Ours::open(&setup.adapter);
    let bare = Bare::open(&setup.adapter);
    let info = setup.adapter.get_info();
    let sizes = config.sizes(&setup.adapter.limits());

    println!("## e2e: wgpu-memory vs cubecl-wgpu 0.12.0-pre.1 vs bare wgpu 30.0.2\n");
    println!(
        "adapter: {} ({:?}, {:?}); driver: {} {}",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    let policy = ours.submit_policy();
    println!(
        "ours: submit policy {} dispatches / {}",
        policy.max_dispatches,
        format_bytes(policy.max_bytes)
    );
    println!(
        "{} timed repetitions per side, interleaved, medians; ratios: times faster ours is \
         (above 1: ours faster); GB/s = 10^9 bytes/s; sizes: {}{}\n",
        config.reps,
        sizes
            .iter()
            .map(|&size| format_bytes(size))
            .collect::<Vec<_>>()
            .join(", "),
        if config.small { " (E2E_SMALL)" } else { "" },
    );

    let mut rows = Vec::new();
    let mut model_memory = None;
    let mut splits = Vec::new();

    if config.runs('a') {
        eprintln!("e2e: (a) {} dispatches", config.dispatches);
        let count = config.dispatches;
        let ours_stages = Stages::new(&["record", "wait"]);
        let bare_stages = Stages::new(&["record", "submit", "wait"]);
        let medians = interleaved(
            config.reps,
            &mut [
                &mut ours.dispatches(count, ours_stages.clone()),
                &mut peer.dispatches(count),
                &mut bare.dispatches(count, bare_stages.clone()),
            ],
        );
        splits.push((
            format!("(a) {count} dispatches"),
            count as usize,
            "dispatch",
            ours_stages,
            bare_stages,
        ));
        let rate = |seconds: f64| f64::from(count) / seconds;
        rows.push(Row {
            case: format!("(a) {count} dispatches + 1 read"),
            unit: "dispatches/s",
            better: Better::Higher,
            ours: rate(medians[0]),
            peer: Some(rate(medians[1])),
            bare: Some(rate(medians[2])),
        });
    }

    if config.runs('b') {
        let (plan, plan_name) = match config.held_out {
            None => (Plan::model_step(), "default plan".to_string()),
            Some(seed) => (Plan::held_out(seed), format!("held-out plan (seed {seed})")),
        };
        eprintln!(
            "e2e: (b) model step, {plan_name}, {TEMPORARIES} temporaries, {} in all, {} steps per sample",
            format_bytes(plan.total_bytes()),
            config.steps
        );
        let mut ours_model = ours.model(&plan, config.steps);
        let mut peer_model = peer.model(&plan, config.steps);
        let mut bare_model = bare.model(&plan, config.steps);
        let medians = interleaved(
            config.reps,
            &mut [&mut ours_model, &mut peer_model, &mut bare_model],
        );
        let per_step = |seconds: f64| seconds * 1e3 / config.steps as f64;
        rows.push(Row {
            case: format!(
                "(b) model step: {TEMPORARIES} temporaries 1 KiB-{}, sync",
                format_bytes(plan.largest)
            ),
            unit: "ms/step",
            better: Better::Lower,
            ours: per_step(medians[0]),
            peer: Some(per_step(medians[1])),
            bare: Some(per_step(medians[2])),
        });
        model_memory = Some((
            plan_name,
            [
                ("ours", ours_model.memory()),
                ("cubecl-wgpu", peer_model.memory()),
                ("bare wgpu", bare_model.memory()),
            ],
        ));
    }

    if config.runs('c') {
        for &size in &sizes {
            eprintln!("e2e: (c) upload {}", format_bytes(size));
            let src = pattern(size as usize, 1);
            let count = uploads_per_sample(size);
            let medians = interleaved(
                config.reps,
                &mut [
                    &mut ours.uploads(&src, count, Upload::Create),
                    &mut ours.uploads(&src, count, Upload::CreateWith),
                    &mut peer.uploads(&src, count),
                    &mut bare.uploads(&src, count),
                ],
            );
            let rate = |seconds: f64| (size * count as u64) as f64 / seconds / 1e9;
            for (call, ours) in [("create", medians[0]), ("create_with", medians[1])] {
                rows.push(Row {
                    case: format!("(c) upload {}, ours `{call}`", format_bytes(size)),
                    unit: "GB/s",
                    better: Better::Higher,
                    ours: rate(ours),
                    peer: Some(rate(medians[2])),
                    bare: Some(rate(medians[3])),
                });
            }
        }
    }

    if config.runs('d') {
        for &size in &sizes {
            eprintln!("e2e: (d) round trip {}", format_bytes(size));
            let src = pattern(size as usize, 2);
            let medians = interleaved(
                config.reps,
                &mut [
                    &mut ours.round_trip(&src),
                    &mut peer.round_trip(&src),
                    &mut bare.round_trip(&src),
                ],
            );
            let rate = |seconds: f64| size as f64 / seconds / 1e9;
            rows.push(Row {
                case: format!("(d) upload + read {}", format_bytes(size)),
                unit: "GB/s",
                better: Better::Higher,
                ours: rate(medians[0]),
                peer: Some(rate(medians[1])),
                bare: Some(rate(medians[2])),
            });
        }
    }

    if config.runs('e') {
        eprintln!("e2e: (e) {SMALL_READS} reads of {SMALL_READ_SIZE} B");
        let ours_stages = Stages::new(&["record", "wait", "touch"]);
        let bare_stages = Stages::new(&["record", "submit", "wait", "touch"]);
        let medians = interleaved(
            config.reps,
            &mut [
                &mut ours.small_reads(SMALL_READS, SMALL_READ_SIZE, ours_stages.clone()),
                &mut peer.small_reads(SMALL_READS, SMALL_READ_SIZE),
                &mut bare.small_reads(SMALL_READS, SMALL_READ_SIZE, bare_stages.clone()),
            ],
        );
        splits.push((
            format!("(e) {SMALL_READS} reads"),
            SMALL_READS,
            "read",
            ours_stages,
            bare_stages,
        ));
        let ms = |seconds: f64| seconds * 1e3;
        rows.push(Row {
            case: format!(
                "(e) {SMALL_READS} reads of {} in one batch",
                format_bytes(SMALL_READ_SIZE as u64)
            ),
            unit: "ms/batch",
            better: Better::Lower,
            ours: ms(medians[0]),
            peer: Some(ms(medians[1])),
            bare: Some(ms(medians[2])),
        });
    }

    table::print_rows(&rows);
    if let Some((plan, memory)) = model_memory {
        println!();
        table::print_model_memory(&plan, &memory);
    }
    for (case, per, item, ours_stages, bare_stages) in &splits {
        print_split(
            case,
            *per,
            item,
            &[("ours", ours_stages), ("bare wgpu", bare_stages)],
        );
    }
    let errors = ours.uncaptured_errors();
    if !errors.is_empty() {
        println!(
            "\nours: {} uncaptured wgpu errors: {errors:?}",
            errors.len()
        );
    }
}
