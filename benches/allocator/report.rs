//! The tables the allocator bench prints at the end: timing cold and warm with ratios,
//! memory (efficiency, device allocations), the targets met or missed, details
//! and problems.

use crate::accounting::Accounting;
use crate::replay::{Mode, median_ns_per_op};
use crate::sides::{ALIGNMENT, FLOOR, MAX_PAGE_SIZE, OURS, PEER};
use crate::support_median::median;
use crate::traces::{MIB, Trace};

/// What the bench measured: the traces and both sides' accounting of each.
pub struct Prepared {
    pub traces: Vec<Trace>,
    /// Per trace: (ours, peer).
    pub accounting: Vec<(Accounting, Accounting)>,
    /// The random trace drawn from other seeds: (ours, peer) per seed.
    pub random_spread: Vec<(Accounting, Accounting)>,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// One trace's timing in one mode: ours, peer and floor ns/op.
#[derive(Clone, Copy)]
struct Times {
    ours: Option<f64>,
    peer: Option<f64>,
    floor: Option<f64>,
}

impl Times {
    fn of(trace: &Trace, mode: Mode) -> Self {
        Self {
            ours: median_ns_per_op(trace.name, OURS, mode),
            peer: median_ns_per_op(trace.name, PEER, mode),
            floor: median_ns_per_op(trace.name, FLOOR, mode),
        }
    }

    /// peer / ours: above 1 when we are faster.
    fn speedup(self) -> Option<f64> {
        Some(self.peer? / self.ours?)
    }

    /// (ours - floor) / (peer - floor): our work beyond the handle over the peer's.
    /// `None` when the peer does no measurable work beyond the floor.
    fn own_work(self) -> Option<f64> {
        let (ours, peer, floor) = (self.ours?, self.peer?, self.floor?);
        (peer > floor).then(|| (ours - floor) / (peer - floor))
    }
}

fn fmt(value: Option<f64>, digits: usize, suffix: &str) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}{suffix}"))
}

pub fn print_report(prepared: &Prepared, test_mode: bool, quick: bool) {
    println!();
    println!("## Allocator benchmark: wgpu-memory vs cubecl-server 0.12.0-pre.1");
    println!();
    if test_mode {
        println!(
            "(test mode: reduced traces, one timed iteration each; the times are not \
             measurements)"
        );
        println!();
    } else if quick {
        println!("(BENCH_QUICK=1: short criterion measurement)");
        println!();
    }
    println!(
        "Both sides: BytesStorage, max_page_size {}, alignment {ALIGNMENT}, \
         MemoryConfiguration::default(). ns/op is the median over criterion's calls of \
         elapsed / (passes * ops); an op is one reserve or one drop. cold: a fresh memory \
         replays the trace once (page allocations included); warm: a memory that replayed \
         it twice replays it again. The handle floor only mints, keeps and drops the \
         handles. own work = (ours - floor) / (peer - floor).",
        mib(MAX_PAGE_SIZE)
    );
    print_timing(prepared);
    print_memory(prepared);
    print_targets(prepared);
    print_details(prepared);
    print_spread(&prepared.random_spread);
    print_traces(&prepared.traces);
    print_problems(prepared);
}

fn print_timing(prepared: &Prepared) {
    println!();
    println!("### Time per operation");
    println!();
    println!(
        "| trace | mode | ours ns/op | peer ns/op | floor ns/op | speedup (peer/ours) | \
         own work (ours-floor)/(peer-floor) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        for mode in [Mode::Cold, Mode::Warm] {
            let times = Times::of(trace, mode);
            let failed = |a: &Accounting, v: Option<f64>| {
                if a.failure.is_some() {
                    "FAILED".to_string()
                } else {
                    fmt(v, 1, "")
                }
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                trace.name,
                mode.name(),
                failed(ours, times.ours),
                failed(peer, times.peer),
                fmt(times.floor, 1, ""),
                fmt(times.speedup(), 2, "x"),
                fmt(times.own_work(), 2, ""),
            );
        }
    }
}

fn print_memory(prepared: &Prepared) {
    println!();
    println!("### Memory (accounting pass, fresh memory, first pass unless stated)");
    println!();
    println!(
        "| trace | peak live | ours efficiency | peer efficiency | ours/peer | ours \
         reserved/in use | ours allocs | peer allocs | ours allocs 2nd half | peer allocs \
         2nd half | ours allocs 3rd pass | peer allocs 3rd pass |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        let third = |a: &Accounting| a.allocs_third.map_or("-".to_string(), |n| n.to_string());
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {} | {} |",
            trace.name,
            mib(trace.peak_live_bytes()),
            ours.efficiency(),
            peer.efficiency(),
            ours.efficiency() / peer.efficiency(),
            1.0 / ours.efficiency(),
            ours.allocs_total,
            peer.allocs_total,
            ours.allocs_second_half,
            peer.allocs_second_half,
            third(ours),
            third(peer),
        );
    }
}

/// The targets, each met or missed with the figures.
fn print_targets(prepared: &Prepared) {
    println!();
    println!("### Targets");
    println!();
    let pairs = || prepared.traces.iter().zip(&prepared.accounting);
    for mode in [Mode::Cold, Mode::Warm] {
        let slower: Vec<String> = pairs()
            .filter_map(|(trace, _)| {
                let speedup = Times::of(trace, mode).speedup()?;
                (speedup < 1.0).then(|| format!("{} {speedup:.2}x", trace.name))
            })
            .collect();
        target(
            &format!("{}: at least 1.0x the peer on every trace", mode.name()),
            &slower,
        );
        let own: Vec<f64> = pairs()
            .filter_map(|(trace, _)| Times::of(trace, mode).own_work())
            .collect();
        let median_own = median(own);
        println!(
            "- {}: own work median over traces {} (target at most 0.50): {}",
            mode.name(),
            fmt(median_own, 2, ""),
            if median_own.is_some_and(|m| m <= 0.5) {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    let less_efficient: Vec<String> = pairs()
        .filter(|(_, (ours, peer))| ours.efficiency() < peer.efficiency())
        .map(|(trace, (ours, peer))| {
            format!(
                "{} {:.4} vs {:.4} (peak reserved {} vs {} bytes)",
                trace.name,
                ours.efficiency(),
                peer.efficiency(),
                ours.peak_reserved,
                peer.peak_reserved
            )
        })
        .collect();
    target("efficiency at least the peer's", &less_efficient);
    let over_quarter: Vec<String> = pairs()
        .filter(|(_, (ours, _))| 1.0 / ours.efficiency() > 1.25)
        .map(|(trace, (ours, _))| format!("{} {:.3}x", trace.name, 1.0 / ours.efficiency()))
        .collect();
    target("reserved at most 1.25x peak in use", &over_quarter);
    println!("\nAfter a cleanup at the end of each trace (live allocations held):\n");
    println!("| trace | ours in use | ours reserved | peer in use | peer reserved |");
    println!("|---|---:|---:|---:|---:|");
    for (trace, (ours, peer)) in pairs() {
        let cell = |side: &Accounting| match side.after_cleanup {
            Some((in_use, reserved, _)) => format!("{in_use} | {reserved}"),
            None => "- | -".to_string(),
        };
        println!("| {} | {} | {} |", trace.name, cell(ours), cell(peer));
    }
    let over_cleanup: Vec<String> = pairs()
        .filter_map(|(trace, (ours, _))| {
            let (in_use, reserved, page) = ours.after_cleanup?;
            let bound = in_use as f64 * 1.1 + page as f64;
            (reserved as f64 > bound).then(|| {
                format!(
                    "{} {reserved} B over {in_use} B in use (page {page} B)",
                    trace.name
                )
            })
        })
        .collect();
    target(
        "after a cleanup, reserved at most 1.1x in use plus one page",
        &over_cleanup,
    );
    let more_allocs: Vec<String> = pairs()
        .filter(|(_, (ours, peer))| ours.allocs_total > peer.allocs_total)
        .map(|(trace, (ours, peer))| {
            format!(
                "{} {} vs {}",
                trace.name, ours.allocs_total, peer.allocs_total
            )
        })
        .collect();
    target("device allocations at most the peer's", &more_allocs);
}

fn target(what: &str, misses: &[String]) {
    if misses.is_empty() {
        println!("- {what}: met");
    } else {
        println!("- {what}: MISSED on {}", misses.join(", "));
    }
}

fn print_details(prepared: &Prepared) {
    println!();
    println!("### Details (accounting pass, fresh memory, CountingStorage on both sides)");
    println!();
    println!(
        "| trace | side | ops | peak in use | peak reserved | storage peak | efficiency | \
         efficiency, all passes | allocs total | allocs 2nd pass | allocs 3rd pass | ids \
         minted per reserve, 3rd pass | reservations handing out a used id |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        for (side, a) in [(OURS, ours), (PEER, peer)] {
            println!(
                "| {} | {side} | {}{} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {} |",
                trace.name,
                a.ops_done,
                if a.ops_done < trace.ops.len() {
                    format!(" of {}", trace.ops.len())
                } else {
                    String::new()
                },
                mib(a.peak_in_use),
                mib(a.peak_reserved),
                mib(a.peak_storage),
                a.efficiency(),
                a.efficiency_all_passes(),
                a.allocs_total,
                opt(a.allocs_replay),
                opt(a.allocs_third),
                fmt(a.ids_per_reserve_third, 3, ""),
                a.ids_reused,
            );
        }
    }
}

/// Mean and least efficiency (first pass) of each side over the random trace's other
/// seeds.
fn print_spread(spread: &[(Accounting, Accounting)]) {
    if spread.is_empty() {
        return;
    }
    let summary = |side: &dyn Fn(&(Accounting, Accounting)) -> &Accounting| {
        if spread.iter().any(|pair| side(pair).failure.is_some()) {
            return "FAILED on a seed".to_string();
        }
        let effs: Vec<f64> = spread.iter().map(|pair| side(pair).efficiency()).collect();
        let mean = effs.iter().sum::<f64>() / effs.len() as f64;
        let least = effs.iter().copied().fold(f64::INFINITY, f64::min);
        format!("mean {mean:.3}, least {least:.3}")
    };
    println!();
    println!(
        "Random trace drawn from {} other seeds, efficiency (first pass): {OURS} {}; \
         {PEER} {}.",
        spread.len(),
        summary(&|pair| &pair.0),
        summary(&|pair| &pair.1),
    );
}

fn print_traces(traces: &[Trace]) {
    println!();
    println!("Traces:");
    for trace in traces {
        println!(
            "- `{}`: {} ({} ops, {} reservations, peak live {})",
            trace.name,
            trace.description,
            trace.ops.len(),
            trace.reserves(),
            mib(trace.peak_live_bytes())
        );
    }
}

fn print_problems(prepared: &Prepared) {
    let mut problems = Vec::new();
    for (trace, (ours, peer)) in prepared.traces.iter().zip(&prepared.accounting) {
        for (side, a) in [(OURS, ours), (PEER, peer)] {
            problems.extend(problems_of(side, trace, a));
        }
    }
    println!();
    if problems.is_empty() {
        println!("Problems: none.");
    } else {
        println!("Problems:");
        for problem in problems {
            println!("- {problem}");
        }
    }
}

fn problems_of(side: &str, trace: &Trace, a: &Accounting) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(failure) = &a.failure {
        problems.push(format!("{side} on `{}`: {failure}", trace.name));
    }
    if a.in_use_mismatches > 0 {
        problems.push(format!(
            "{side} on `{}`: memory_usage().bytes_in_use differed from the sum of live \
             requested sizes after {} ops (largest difference {} B)",
            trace.name, a.in_use_mismatches, a.in_use_max_diff
        ));
    }
    if a.ids_reused > 0 {
        problems.push(format!(
            "{side} on `{}`: {} reservations handed out an id an earlier allocation \
             already had (a weak binding of that allocation now reaches this one)",
            trace.name, a.ids_reused
        ));
    }
    if let Some((own, counted)) = a.own_count_mismatch {
        problems.push(format!(
            "{side} on `{}`: BytesStorage::allocations_made() = {own} but the counting \
             wrapper saw {counted} allocs",
            trace.name
        ));
    }
    problems
}
