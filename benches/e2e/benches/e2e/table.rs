//! The markdown tables.

use crate::common::ModelMemory;
use wgpu_memory::memory_management::format_bytes;

/// Which way a figure is better.
#[derive(Debug, Clone, Copy)]
pub enum Better {
    /// A rate (dispatches/s, GB/s).
    Higher,
    /// A time (ms per step, ms per batch).
    Lower,
}

/// One row of the main table: the medians of one case.
#[derive(Debug, Clone)]
pub struct Row {
    /// Workload letter and what the case does.
    pub case: String,
    /// Unit of the three figures.
    pub unit: &'static str,
    /// Which way is better.
    pub better: Better,
    /// Ours.
    pub ours: f64,
    /// cubecl-wgpu, when it runs this case.
    pub peer: Option<f64>,
    /// Bare wgpu, when it runs this case.
    pub bare: Option<f64>,
}

impl Row {
    /// How many times faster ours is than `other` (above 1: ours is faster).
    fn speedup(&self, other: Option<f64>) -> Option<f64> {
        let other = other?;
        Some(match self.better {
            Better::Higher => self.ours / other,
            Better::Lower => other / self.ours,
        })
    }
}

/// Prints the main table.
pub fn print_rows(rows: &[Row]) {
    println!("| case | unit | ours | cubecl-wgpu | bare wgpu | ours/peer | ours/bare |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for row in rows {
        let ratio = |other| {
            row.speedup(other)
                .map_or_else(|| "n/a".to_string(), |ratio| format!("{ratio:.2}x"))
        };
        let figure = |value: Option<f64>| value.map_or_else(|| "n/a".to_string(), figure);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.case,
            row.unit,
            figure(Some(row.ours)),
            figure(row.peer),
            figure(row.bare),
            ratio(row.peer),
            ratio(row.bare),
        );
    }
}

/// About three significant digits (whole numbers from 1000 up).
fn figure(value: f64) -> String {
    if value >= 1000.0 {
        format!("{:.0}", value)
    } else if value >= 100.0 {
        format!("{value:.1}")
    } else if value >= 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// Prints workload (b)'s memory table: `plan` names the plan.
pub fn print_model_memory(plan: &str, sides: &[(&str, ModelMemory)]) {
    println!(
        "| (b) memory, {plan} | device buffers after warm-up | device buffers created while timed | peak in use | peak reserved | efficiency | peak device memory (wgpu blocks) | peak device allocated | device / peak in use |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (side, memory) in sides {
        let count = |value: Option<u64>| value.map_or_else(|| "n/a".into(), |v| v.to_string());
        let efficiency = if memory.peak_reserved == 0 {
            "n/a".to_string()
        } else {
            format!(
                "{:.1}%",
                100.0 * memory.peak_in_use as f64 / memory.peak_reserved as f64
            )
        };
        let (device, allocated, over) = match memory.device {
            Some(device) => (
                format_bytes(device.reserved),
                format_bytes(device.allocated),
                format!(
                    "{:.2}x",
                    device.reserved as f64 / memory.peak_in_use.max(1) as f64
                ),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into()),
        };
        println!(
            "| {side} | {} | {} | {} | {} | {efficiency} | {device} | {allocated} | {over} |",
            count(memory.pages_after_warmup),
            count(memory.created),
            format_bytes(memory.peak_in_use),
            format_bytes(memory.peak_reserved),
        );
    }
}
