//! Pictures of a memory snapshot: where the memory went.
//!
//! ```sh
//! cargo run --example memory_viz -- snapshot.json --out DIR [--top N] [--depth D]
//! cargo run --example memory_viz -- --demo snapshot.json
//! ```
//!
//! The first form reads a snapshot (`MemorySnapshot` as JSON) and writes `DIR/timeline.svg`
//! (bytes in use over time, stacked by label; bytes reserved; pages made and given back,
//! cleanups, out-of-memory, the legend listing only the kinds that occur) and `DIR/pages.svg`
//! (one bar per page, each slice to scale and coloured by label, free space and padding
//! visible; pools without pages are counted in their memory's heading, not drawn). Both are
//! 1400 px wide; a legend text too long for its column wraps onto more rows rather than
//! being cut. `--top N` names N labels (default 12:
//! the largest, and each pool's largest) and draws the rest as "other". Labels are grouped by
//! their first scopes ("model/layer 3/attn" at depth 1 is "model") as deep as still fits in
//! N groups; `--depth D` picks the depth, `--depth all` keeps whole labels. The second form writes a synthetic snapshot
//! (3 pools, 20 pages, one of them with 1000 slices, and a history), no GPU needed.
//!
//! Exit status: 0 on success, 2 on bad arguments or an unreadable or invalid snapshot (with
//! a message on stderr), 1 when a file cannot be written.

mod demo;
mod legend;
mod pages_svg;
mod style;
mod timeline_svg;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wgpu_memory::report::{MemorySnapshot, TopLabels};

/// The number of labels drawn one by one when `--top` is not given.
const DEFAULT_TOP: usize = 12;

const USAGE: &str = "usage: memory_viz SNAPSHOT.json --out DIR [--top N] [--depth D|all]\n       memory_viz --demo OUT.json";

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
        out: PathBuf,
        top: usize,
        depth: Depth,
    },
    Demo {
        out: PathBuf,
    },
}

/// A failure, with the exit status it maps to.
#[derive(Debug)]
enum Failure {
    /// Bad arguments or an unusable snapshot: status 2.
    Input(String),
    /// Writing an output failed: status 1.
    Output(String),
}

fn parse(args: &[String]) -> Result<Command, Failure> {
    let usage = |why: &str| Failure::Input(format!("{why}\n{USAGE}"));
    let mut snapshot = None;
    let mut out = None;
    let mut top = DEFAULT_TOP;
    let mut depth = Depth::Fitting;
    let mut demo = None;
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
    match (demo, snapshot, out) {
        (Some(demo), None, None) => Ok(Command::Demo {
            out: PathBuf::from(demo),
        }),
        (None, Some(snapshot), Some(out)) => Ok(Command::Draw {
            snapshot: PathBuf::from(snapshot),
            out: PathBuf::from(out),
            top,
            depth,
        }),
        (None, Some(_), None) => Err(usage("--out DIR is missing")),
        _ => Err(usage("give a snapshot and --out, or --demo alone")),
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
/// groups grouped as `depth` says; returns their paths.
fn draw(
    snapshot: &MemorySnapshot,
    out: &Path,
    top: usize,
    depth: Depth,
) -> Result<[PathBuf; 2], Failure> {
    let depth = match depth {
        Depth::Fitting => TopLabels::fitting_depth(snapshot, top),
        Depth::All => None,
        Depth::Scopes(scopes) => Some(scopes),
    };
    let labels = TopLabels::from_snapshot(snapshot, top, depth);
    let timeline = timeline_svg::render(snapshot, &labels)
        .map_err(|e| Failure::Output(format!("drawing timeline.svg: {e}")))?;
    let pages = pages_svg::render(snapshot, &labels)
        .map_err(|e| Failure::Output(format!("drawing pages.svg: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| Failure::Output(format!("{}: {e}", out.display())))?;
    let paths = [out.join("timeline.svg"), out.join("pages.svg")];
    for (path, svg) in paths.iter().zip([timeline, pages]) {
        std::fs::write(path, svg)
            .map_err(|e| Failure::Output(format!("{}: {e}", path.display())))?;
    }
    Ok(paths)
}

fn run(args: &[String]) -> Result<(), Failure> {
    match parse(args)? {
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
        } => {
            let snap = read_snapshot(&snapshot)?;
            if let Err(problem) = snap.check() {
                eprintln!(
                    "warning: {}: {problem}; drawing it anyway",
                    snapshot.display()
                );
            }
            for path in draw(&snap, &out, top, depth)? {
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
