//! What to run, from environment variables (see the crate doc in `main.rs`).

use std::env;
use std::str::FromStr;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Upload and round-trip sizes, before the device's caps.
const SIZES: [u64; 4] = [4 * KIB, MIB, 64 * MIB, 256 * MIB];
/// The largest size `E2E_SMALL=1` keeps.
const SMALL_LARGEST: u64 = 64 * MIB;

/// The run's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Timed repetitions per side and case (`E2E_REPS`, default 7).
    pub reps: usize,
    /// Workloads to run, letters `a` to `e` (`E2E_ONLY=a,c`, default all).
    pub only: Vec<char>,
    /// Small mode for software adapters (`E2E_SMALL=1`): sizes up to 64 MiB, fewer
    /// dispatches and steps.
    pub small: bool,
    /// Dispatches of workload (a), even (`E2E_DISPATCHES`, default 2000, 500 when small).
    pub dispatches: u32,
    /// Model steps per timed sample of workload (b) (`E2E_STEPS`, default 10, 3 when small).
    pub steps: usize,
    /// The seed of workload (b)'s held-out plan (`E2E_MODEL=held-out`, or
    /// `E2E_MODEL=held-out:SEED`); `None`: the default plan.
    pub held_out: Option<u64>,
}

impl Config {
    /// Reads the environment.
    ///
    /// # Panics
    /// When a variable is set but does not parse, naming it.
    pub fn from_env() -> Self {
        let small = matches!(env::var("E2E_SMALL").as_deref(), Ok("1" | "true" | "yes"));
        let only = match env::var("E2E_ONLY") {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| match item {
                    "a" | "b" | "c" | "d" | "e" => item.chars().next().expect("one letter"),
                    other => panic!("E2E_ONLY: unknown workload {other:?} (use a, b, c, d, e)"),
                })
                .collect(),
            Err(_) => vec!['a', 'b', 'c', 'd', 'e'],
        };
        let dispatches: u32 = number("E2E_DISPATCHES").unwrap_or(if small { 500 } else { 2000 });
        let reps: usize = number("E2E_REPS").unwrap_or(7);
        assert!(reps > 0, "E2E_REPS must be at least 1");
        let steps: usize = number("E2E_STEPS").unwrap_or(if small { 3 } else { 10 });
        assert!(steps > 0, "E2E_STEPS must be at least 1");
        let held_out = match env::var("E2E_MODEL").as_deref().map(str::trim) {
            Err(_) | Ok("" | "default") => None,
            Ok("held-out") => Some(crate::plan::HELD_OUT_SEED),
            Ok(other) => Some(
                other
                    .strip_prefix("held-out:")
                    .and_then(|seed| seed.parse().ok())
                    .unwrap_or_else(|| {
                        panic!("E2E_MODEL: {other:?} (use default, held-out or held-out:SEED)")
                    }),
            ),
        };
        Self {
            reps,
            only,
            small,
            // Even, so the chain always ends in the same buffer.
            dispatches: dispatches.max(2).next_multiple_of(2),
            steps,
            held_out,
        }
    }

    /// Whether workload `letter` runs.
    pub fn runs(&self, letter: char) -> bool {
        self.only.contains(&letter)
    }

    /// The upload and round-trip sizes for a device with `limits`: the fixed sizes, each
    /// capped at the largest buffer a storage binding and a buffer may have (rounded down
    /// to 1 MiB), duplicates removed; up to 64 MiB in small mode.
    pub fn sizes(&self, limits: &wgpu::Limits) -> Vec<u64> {
        let cap = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let cap = if cap >= MIB {
            cap / MIB * MIB
        } else {
            cap / 4 * 4
        };
        let mut sizes: Vec<u64> = SIZES
            .iter()
            .filter(|&&size| !self.small || size <= SMALL_LARGEST)
            .map(|&size| size.min(cap))
            .collect();
        sizes.dedup();
        sizes
    }
}

fn number<T: FromStr>(name: &str) -> Option<T> {
    let value = env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {value:?} is not a number")),
    )
}
