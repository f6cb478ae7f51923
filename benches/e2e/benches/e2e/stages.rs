//! Where a timed unit's time goes: each side of workloads (a) and (e) times its stages
//! with `Instant` inside the same timed run (no extra runs, so the split is of the very
//! samples the main table's medians come from), and the split table gives each stage's
//! median.
//!
//! The stages are those a user could time around the calls themselves:
//! - ours: `record` (the `launch` calls, or the host part of `read_many`: pins, bindings,
//!   the recorded copies, the submit and the map request, until the future is returned),
//!   `wait` (until the awaited future gives the views: the device's work, the map
//!   callback and the poller thread's wake-up of the reader), `touch` (the host reading
//!   the views);
//! - bare wgpu: `record` (encoder, pass, bind groups set, dispatches or copies,
//!   `finish`), `submit` (`queue.submit`), `wait` (`map_async` and the poll until the map
//!   callback ran), `touch`.

use crate::support_median::median;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The stage times of one side's runs; the first run (the warm-up) is left out of the
/// medians.
#[derive(Debug)]
pub struct Stages {
    names: &'static [&'static str],
    runs: RefCell<Vec<Vec<Duration>>>,
}

impl Stages {
    /// A log for stages named `names`, in the order each run records them.
    pub fn new(names: &'static [&'static str]) -> Rc<Self> {
        Rc::new(Self {
            names,
            runs: RefCell::new(Vec::new()),
        })
    }

    /// Records one run's stage times, one per name.
    pub fn record(&self, times: &[Duration]) {
        debug_assert_eq!(times.len(), self.names.len());
        self.runs.borrow_mut().push(times.to_vec());
    }

    /// Each stage's name and median seconds over the timed runs.
    pub fn medians(&self) -> Vec<(&'static str, f64)> {
        let runs = self.runs.borrow();
        let timed = runs.get(1..).unwrap_or_default();
        self.names
            .iter()
            .enumerate()
            .map(|(i, &name)| {
                let samples = timed.iter().map(|run| run[i].as_secs_f64()).collect();
                (name, median(samples).unwrap_or(f64::NAN))
            })
            .collect()
    }
}

/// Prints the split of one workload: `per` divides each stage for the per-item column
/// (dispatches, reads), `item` names it.
pub fn print_split(case: &str, per: usize, item: &str, sides: &[(&str, &Stages)]) {
    println!("\n| {case}: stage | side | median ms | µs per {item} |");
    println!("|---|---|---:|---:|");
    for (side, stages) in sides {
        for (stage, seconds) in stages.medians() {
            println!(
                "| {stage} | {side} | {:.4} | {:.3} |",
                seconds * 1e3,
                seconds * 1e6 / per.max(1) as f64
            );
        }
    }
}
