//! Pictures of a memory snapshot: where the memory went.
//!
//! ```sh
//! cargo run --example memory_viz -- snapshot.json --out DIR [--top N] [--depth D] [--at T] [--from T] [--to T]
//! cargo run --example memory_viz -- snapshot.json --pytorch OUT.pickle
//! cargo run --example memory_viz -- --demo snapshot.json
//! ```
//!
//! The first form reads a snapshot (`MemorySnapshot` as JSON) and writes `DIR/timeline.svg`
//! (bytes in use of the main memory over time, stacked by label, and above them the rest of
//! reserved as bands: free bytes inside used pages, empty pages, readback and upload
//! staging; the peak marked with what held it; pages made and given back on the reserved
//! line, cleanups, out-of-memory; the legend listing only the kinds that occur; quiet
//! stretches with no event drawn short and marked, so the work gets the width; a snapshot
//! without history events says so, and how to turn history on, instead of a time axis) and
//! `DIR/pages.svg` (one bar per page, every bar on one byte scale with an offset axis, each
//! slice coloured by label, free space and padding visible, each pool's free bytes, free
//! ranges, largest free range and fragmentation, the most fragmented pool flagged; pools
//! without pages are counted in their memory's heading, not drawn). Both are 880 px wide (a
//! README column) and every slice, band and marker has a hover text (`<title>`).
//! `--at T` draws the page map at moment T of the history (ms since the client started;
//! `us`, `ms` or `s` may follow the number) instead of at the end. `--from T` and `--to T`
//! (the same units) draw the timeline over that part of the history only, at full width
//! (the steady steps of a run after its warm-up, say): its levels start where the events
//! before it left them, and its peaks, markers and pools are the window's; a window
//! outside the history is refused. `--pytorch OUT.pickle`
//! writes the snapshot in PyTorch's format, for `pytorch.org/memory_viz` (with or without
//! `--out`). `--top N` names N labels (default 12:
//! the largest, and each pool's largest) and draws the rest as "other". Labels are grouped by
//! their first scopes ("model/layer 3/attn" at depth 1 is "model") as deep as still fits in
//! N groups; `--depth D` picks the depth, `--depth all` keeps whole labels. The second form writes a synthetic snapshot
//! (3 pools, 20 pages, one of them with 1000 slices, and a history), no GPU needed.
//!
//! Exit status: 0 on success, 2 on bad arguments or an unreadable or invalid snapshot (with
//! a message on stderr), 1 when a file cannot be written.

mod axis;
mod cvd;
mod demo;
mod legend;
mod pages_svg;
mod peak_svg;
mod style;
mod svg;
mod time_axis_svg;
mod timeline_key;
mod timeline_svg;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wgpu_memory::report::{MemorySnapshot, Timeline, TopLabels};

/// The number of labels drawn one by one when `--top` is not given.
const DEFAULT_TOP: usize = 12;

const USAGE: &str = "usage: memory_viz SNAPSHOT.json [--out DIR] [--top N] [--depth D|all] [--at T[us|ms|s]] [--from T] [--to T] [--pytorch OUT.pickle]\n       memory_viz --demo OUT.json";

/// How labels are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// As deep as still fits in `--top` groups.
    Fitting,
    /// Whole labels.
    All,
    /// The first this many scopes.
    Scopes(usize),
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Draw {
        snapshot: PathBuf,
        /// Where the SVGs go, if they are asked for.
        out: Option<PathBuf>,
        top: usize,
        depth: Depth,
        /// The moment of the page map, in µs (`None`: the end).
        at: Option<u64>,
        /// The part of the history the timeline draws.
        window: Window,
        /// Where the PyTorch pickle goes, if it is asked for.
        pytorch: Option<PathBuf>,
    },
    Demo {
        out: PathBuf,
    },
}

/// The part of the history a timeline draws (`--from`, `--to`), in µs since the client
/// started; an end left out is the history's own.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Window {
    from_us: Option<u64>,
    to_us: Option<u64>,
}

/// A failure, with the exit status it maps to.
#[derive(Debug)]
enum Failure {
    /// Bad arguments or an unusable snapshot: status 2.
    Input(String),
    /// Writing an output failed: status 1.
    Output(String),
}

/// A moment: a number of ms, or of µs, ms or s with that suffix.
fn parse_time(value: &str) -> Option<u64> {
    let (number, scale) = if let Some(n) = value.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1e6)
    } else {
        (value, 1e3)
    };
    let number: f64 = number.trim().parse().ok()?;
    let us = number * scale;
    (us.is_finite() && us >= 0.0 && us < u64::MAX as f64).then(|| us.round() as u64)
}

fn parse_args(args: &[String]) -> Result<Command, Failure> {
    let usage = |why: &str| Failure::Input(format!("{why}\n{USAGE}"));
    let mut snapshot = None;
    let mut out = None;
    let mut top = DEFAULT_TOP;
    let mut depth = Depth::Fitting;
    let mut demo = None;
    let mut at = None;
    let mut pytorch = None;
    let mut window = Window::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--out" => {
                out = Some(
                    iter.next()
                        .ok_or_else(|| usage("--out needs a directory"))?,
                )
            }
            "--demo" => demo = Some(iter.next().ok_or_else(|| usage("--demo needs a file"))?),
            "--pytorch" => {
                pytorch = Some(PathBuf::from(
                    iter.next().ok_or_else(|| usage("--pytorch needs a file"))?,
                ))
            }
            "--at" => {
                let value = iter.next().ok_or_else(|| usage("--at needs a time"))?;
                at = Some(parse_time(value).ok_or_else(|| {
                    usage(&format!(
                        "--at: {value:?} is not a time (ms, or with us/ms/s)"
                    ))
                })?);
            }
            "--from" | "--to" => {
                let value = iter
                    .next()
                    .ok_or_else(|| usage(&format!("{arg} needs a time")))?;
                let time = parse_time(value).ok_or_else(|| {
                    usage(&format!(
                        "{arg}: {value:?} is not a time (ms, or with us/ms/s)"
                    ))
                })?;
                if arg == "--from" {
                    window.from_us = Some(time);
                } else {
                    window.to_us = Some(time);
                }
            }
            "--top" => {
                let value = iter.next().ok_or_else(|| usage("--top needs a number"))?;
                top = value
                    .parse()
                    .map_err(|_| usage(&format!("--top: {value:?} is not a number")))?;
            }
            "--depth" => {
                let value = iter
                    .next()
                    .ok_or_else(|| usage("--depth needs a number or all"))?;
                depth = match value.as_str() {
                    "all" => Depth::All,
                    number => match number.parse() {
                        Ok(scopes) if scopes > 0 => Depth::Scopes(scopes),
                        _ => {
                            return Err(usage(&format!(
                                "--depth: {value:?} is not a positive number or all"
                            )));
                        }
                    },
                };
            }
            "-h" | "--help" => return Err(usage("")),
            other if other.starts_with('-') => {
                return Err(usage(&format!("unknown option {other}")));
            }
            other if snapshot.is_none() => snapshot = Some(other),
            other => return Err(usage(&format!("unexpected argument {other:?}"))),
        }
    }
    if let (Some(from), Some(to)) = (window.from_us, window.to_us)
        && from >= to
    {
        return Err(usage(&format!(
            "--from ({from} us) must come before --to ({to} us)"
        )));
    }
    match (demo, snapshot, out) {
        (Some(demo), None, None) => Ok(Command::Demo {
            out: PathBuf::from(demo),
        }),
        (None, Some(_), None) if pytorch.is_none() => {
            Err(usage("--out DIR (or --pytorch FILE) is missing"))
        }
        (None, Some(snapshot), out) => Ok(Command::Draw {
            snapshot: PathBuf::from(snapshot),
            out: out.map(PathBuf::from),
            top,
            depth,
            at,
            window,
            pytorch,
        }),
        _ => Err(usage(
            "give a snapshot and --out or --pytorch, or --demo alone",
        )),
    }
}

/// Reads and parses a snapshot file.
fn read_snapshot(path: &Path) -> Result<MemorySnapshot, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))?;
    MemorySnapshot::from_json(&text)
        .map_err(|e| Failure::Input(format!("{}: not a memory snapshot: {e}", path.display())))
}

/// Writes `timeline.svg` and `pages.svg` for `snapshot` into `out`, naming `top` label
/// groups grouped as `depth` says, the page map at `at` (µs) when given; returns their
/// paths.
fn draw(
    snapshot: &MemorySnapshot,
    out: &Path,
    top: usize,
    depth: Depth,
    at: Option<u64>,
    window: Window,
) -> Result<[PathBuf; 2], Failure> {
    let depth = match depth {
        Depth::Fitting => TopLabels::fitting_depth(snapshot, top),
        Depth::All => None,
        Depth::Scopes(scopes) => Some(scopes),
    };
    let labels = TopLabels::from_snapshot(snapshot, top, depth);
    let timeline = timeline_svg::render(snapshot, &labels, window_of(snapshot, window)?);
    let pages = match at {
        Some(time_us) => {
            let then = snapshot
                .at(time_us)
                .map_err(|e| Failure::Input(format!("--at: {e}")))?;
            pages_svg::render(&then, &labels, Some(time_us))
        }
        None => pages_svg::render(snapshot, &labels, None),
    };
    std::fs::create_dir_all(out).map_err(|e| Failure::Output(format!("{}: {e}", out.display())))?;
    let paths = [out.join("timeline.svg"), out.join("pages.svg")];
    for (path, svg) in paths.iter().zip([timeline, pages]) {
        std::fs::write(path, svg)
            .map_err(|e| Failure::Output(format!("{}: {e}", path.display())))?;
    }
    Ok(paths)
}

/// The timeline's window for `window`, checked against the history of `snapshot`:
/// `None` for the whole history.
///
/// # Errors
/// [`Failure::Input`] for a window on a snapshot without history events, or one that
/// lies outside the history.
fn window_of(snapshot: &MemorySnapshot, window: Window) -> Result<Option<(u64, u64)>, Failure> {
    if window == Window::default() {
        return Ok(None);
    }
    if snapshot.history.is_empty() {
        return Err(Failure::Input(
            "--from/--to: the snapshot holds no history events to draw a window of".to_string(),
        ));
    }
    let (start, end) = Timeline::span_of(snapshot);
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let from = window.from_us.unwrap_or(start);
    let to = window.to_us.unwrap_or(end);
    if from >= end {
        return Err(Failure::Input(format!(
            "--from {} is past the history's end ({})",
            ms(from),
            ms(end)
        )));
    }
    if to <= start {
        return Err(Failure::Input(format!(
            "--to {} is before the history's start ({})",
            ms(to),
            ms(start)
        )));
    }
    if from >= to {
        return Err(Failure::Input(format!(
            "--from {} must come before --to {}",
            ms(from),
            ms(to)
        )));
    }
    Ok(Some((from.max(start), to.min(end))))
}

fn run(args: &[String]) -> Result<(), Failure> {
    match parse_args(args)? {
        Command::Demo { out } => {
            let json = demo::snapshot()
                .to_json()
                .map_err(|e| Failure::Output(format!("serializing the demo: {e}")))?;
            std::fs::write(&out, json)
                .map_err(|e| Failure::Output(format!("{}: {e}", out.display())))?;
            println!("wrote {}", out.display());
        }
        Command::Draw {
            snapshot,
            out,
            top,
            depth,
            at,
            window,
            pytorch,
        } => {
            let snap = read_snapshot(&snapshot)?;
            if let Err(problem) = snap.check() {
                eprintln!(
                    "warning: {}: {problem}; drawing it anyway",
                    snapshot.display()
                );
            }
            if let Some(out) = out {
                for path in draw(&snap, &out, top, depth, at, window)? {
                    println!("wrote {}", path.display());
                }
            }
            if let Some(path) = pytorch {
                let bytes = snap
                    .to_pytorch_pickle()
                    .map_err(|e| Failure::Output(format!("serializing {}: {e}", path.display())))?;
                std::fs::write(&path, bytes)
                    .map_err(|e| Failure::Output(format!("{}: {e}", path.display())))?;
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(message)) => {
            eprintln!("memory_viz: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Output(message)) => {
            eprintln!("memory_viz: {message}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod timeline_tests;
