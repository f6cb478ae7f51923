//! Interleaved timing: every side runs once as a warm-up, then the repetitions go round
//! robin (ours, peer, bare, ours, peer, bare, ...), so drift in clocks, temperature or the
//! rest of the machine lands on every side alike.

use crate::support_median::median;
use std::time::Duration;

/// One side of one workload, ready to run: each call does the whole timed unit of work
/// (setup happened before) and returns how long it took.
pub trait Timed {
    /// Runs the timed unit once.
    fn run(&mut self) -> Duration;
}

/// Runs each of `sides` once untimed, then `reps` times interleaved; the median seconds of
/// each, in the order given.
pub fn interleaved(reps: usize, sides: &mut [&mut dyn Timed]) -> Vec<f64> {
    for side in sides.iter_mut() {
        side.run();
    }
    let mut samples = vec![Vec::with_capacity(reps); sides.len()];
    for _ in 0..reps {
        for (side, samples) in sides.iter_mut().zip(&mut samples) {
            samples.push(side.run().as_secs_f64());
        }
    }
    samples
        .into_iter()
        .map(|samples| median(samples).expect("at least one repetition"))
        .collect()
}

impl<F: FnMut() -> Duration> Timed for F {
    fn run(&mut self) -> Duration {
        self()
    }
}
