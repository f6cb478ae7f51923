//! The tables the exclusive bench prints: memory and buffers per trace and side, then
//! the replay times, then the traces where ours is behind the bucket cache.

use wgpu_memory::memory_management::format_bytes;

use crate::measure::Accounting;
use crate::traces::Trace;

/// One trace's results: ours, the bucket cache, the exact-size cache.
pub struct Row {
    pub trace: Trace,
    pub ours: Accounting,
    pub bucket: Accounting,
    pub exact: Accounting,
}

impl Row {
    fn sides(&self) -> [&Accounting; 3] {
        [&self.ours, &self.bucket, &self.exact]
    }

    /// Why ours is behind the bucket cache on this trace, if it is.
    fn behind(&self) -> Vec<String> {
        let (ours, bucket) = (&self.ours, &self.bucket);
        let mut why = Vec::new();
        if let Some(failure) = &ours.failure {
            why.push(format!("failed: {failure}"));
            return why;
        }
        if bucket.failure.is_some() {
            return why;
        }
        if ours.peak > bucket.peak {
            why.push(format!(
                "peak reserved {} against {}",
                format_bytes(ours.peak),
                format_bytes(bucket.peak)
            ));
        }
        if ours.created[1] > bucket.created[1] {
            why.push(format!(
                "{} new buffers in the second pass against {}",
                ours.created[1], bucket.created[1]
            ));
        }
        why
    }
}

fn triple(values: [Option<String>; 3]) -> String {
    values
        .map(|v| v.unwrap_or_else(|| "failed".into()))
        .join(" / ")
}

fn ok(side: &Accounting) -> bool {
    side.failure.is_none()
}

fn ratio(ours: &Accounting, other: &Accounting, value: impl Fn(&Accounting) -> f64) -> String {
    if ok(ours) && ok(other) && value(other) > 0.0 {
        format!("{:.2}", value(ours) / value(other))
    } else {
        "-".into()
    }
}

pub fn print_report(rows: &[Row], runs: usize, test_mode: bool) {
    println!();
    println!("## Exclusive pages against a bucket cache (the web's memory)");
    println!();
    if test_mode {
        println!(
            "(test mode: reduced traces, one timed pass each; the times are not measurements)"
        );
        println!();
    }
    println!(
        "Sides: `ours` = wgpu-memory's MemoryManagement with MemoryConfiguration::ExclusivePages \
         (largest page 128 MiB, alignment 256: WebGPU's default limits); `bucket` = a model of \
         ONNX Runtime Web's buffer cache (sizes rounded up to its 26 buckets, free buffers \
         reused by the same bucket, at most the bucket's limit kept); `exact` = free buffers \
         reused only by the same size rounded up to 16 B. Every buffer is a host page; peak \
         reserved is the most bytes of buffers held at once over two identical passes on one \
         memory; peak in use is the most requested bytes live at once."
    );
    println!();
    println!(
        "| trace | peak in use | peak reserved: ours / bucket / exact | reserved ÷ in use: \
         ours / bucket / exact | peak reserved ours ÷ bucket | buffers made, 1st pass: \
         ours / bucket / exact | 2nd pass: ours / bucket / exact | 3rd pass: ours |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let in_use = row.trace.peak_live_bytes();
        let sides = row.sides();
        let peak = sides.map(|s| ok(s).then(|| format_bytes(s.peak)));
        let over = sides.map(|s| ok(s).then(|| format!("{:.2}", s.peak as f64 / in_use as f64)));
        let first = sides.map(|s| ok(s).then(|| s.created[0].to_string()));
        let second = sides.map(|s| ok(s).then(|| s.created[1].to_string()));
        let third = if ok(&row.ours) {
            row.ours.created[2].to_string()
        } else {
            "failed".into()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {third} |",
            row.trace.name,
            format_bytes(in_use),
            triple(peak),
            triple(over),
            ratio(&row.ours, &row.bucket, |s| s.peak as f64),
            triple(first),
            triple(second),
        );
    }
    println!();
    println!(
        "Replay time, ns per op (an op is one reservation or one release; median of {runs} \
         passes): cold = a fresh memory's first pass (buffers made included); warm = a pass \
         on a memory that replayed the trace twice. ours pays for minting the spec's \
         handle on every reservation; the caches hand out a bare page handle."
    );
    println!();
    println!(
        "| trace | ops | cold: ours / bucket / exact | warm: ours / bucket / exact | warm ours ÷ bucket |"
    );
    println!("|---|---:|---:|---:|---:|");
    for row in rows {
        let sides = row.sides();
        let cold = sides.map(|s| s.cold_ns.map(|ns| format!("{ns:.0}")));
        let warm = sides.map(|s| s.warm_ns.map(|ns| format!("{ns:.0}")));
        let warm_ratio = match (row.ours.warm_ns, row.bucket.warm_ns) {
            (Some(ours), Some(bucket)) if bucket > 0.0 => format!("{:.2}", ours / bucket),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {warm_ratio} |",
            row.trace.name,
            row.trace.ops.len(),
            triple(cold),
            triple(warm),
        );
    }
    println!();
    let behind: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let why = row.behind();
            (!why.is_empty()).then(|| format!("- {}: {}", row.trace.name, why.join("; ")))
        })
        .collect();
    if behind.is_empty() {
        println!(
            "Ours is at least as good as the bucket cache on every trace (peak reserved, and \
             buffers made in the second pass)."
        );
    } else {
        println!("Ours is behind the bucket cache on:");
        for line in &behind {
            println!("{line}");
        }
    }
    let failures: Vec<String> = rows
        .iter()
        .flat_map(|row| {
            [
                ("ours", &row.ours),
                ("bucket", &row.bucket),
                ("exact", &row.exact),
            ]
            .into_iter()
            .filter_map(|(side, a)| {
                a.failure
                    .as_ref()
                    .map(|f| format!("- {} / {side}: {f}", row.trace.name))
            })
        })
        .collect();
    if !failures.is_empty() {
        println!();
        println!("Failures:");
        for line in &failures {
            println!("{line}");
        }
    }
    println!();
    println!("Traces:");
    for row in rows {
        println!("- `{}`: {}", row.trace.name, row.trace.description);
    }
}

/// Whether ours is behind the bucket cache anywhere (test mode fails on it only when
/// ours failed outright; the figures of reduced traces are not the bench's verdict).
pub fn ours_failed(rows: &[Row]) -> bool {
    rows.iter().any(|row| row.ours.failure.is_some())
}
