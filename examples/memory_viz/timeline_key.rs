//! The key under timeline.svg: the series (each with its own peak), the bands of reserved
//! (each with the pools whose pages it held), the reserved line and the markers that occur.

use crate::legend::{self, Entry, Swatch};
use crate::style::{self, BODY_SIZE, INK, counted};
use crate::svg::{Anchor, Svg, Weight};
use crate::timeline_svg::{Layer, MARGIN, WIDTH};
use wgpu_memory::report::{EventKind, Timeline};

/// The legend: the series (with each one's own peak), the bands, the line and the markers
/// that occur; returns the y below.
pub fn draw_legend(svg: &mut Svg, timeline: &Timeline, layers: &[Layer], y: f64) -> f64 {
    let mut entries: Vec<Entry> = layers
        .iter()
        .map(|layer| {
            let peak = layer.values.iter().copied().max().unwrap_or(0);
            let text = match layer.class {
                "series" => format!("{} · own peak {}", layer.name, style::bytes(peak)),
                _ if layer.pools.is_empty() => layer.name.clone(),
                // Pool names may hold commas ("sliced, 4 MiB pages").
                _ => format!("{} · in {}", layer.name, layer.pools.join("; ")),
            };
            Entry {
                swatch: Swatch::Fill(layer.fill),
                text,
                title: Some(match layer.pools.as_slice() {
                    [] => format!("{}: up to {peak} bytes", layer.name),
                    pools => format!(
                        "{}: up to {peak} bytes, in the pages of {}",
                        layer.name,
                        pools.join("; ")
                    ),
                }),
            }
        })
        .collect();
    entries.push(Entry::new(
        Swatch::Line(style::RESERVED),
        format!("reserved (peak {})", style::bytes(timeline.peak_reserved)),
    ));
    let total = |kind: EventKind| -> (u64, u64) {
        timeline
            .markers
            .iter()
            .filter(|m| m.kind == kind)
            .fold((0, 0), |(n, b), m| (n + u64::from(m.count), b + m.bytes))
    };
    let kinds = [
        (EventKind::PageMade, Swatch::Up(style::PAGE_MADE)),
        (EventKind::PageReleased, Swatch::Down(style::PAGE_RELEASED)),
        (EventKind::Cleanup, Swatch::Dashed(style::CLEANUP)),
        (EventKind::OutOfMemory, Swatch::Line(style::OUT_OF_MEMORY)),
    ];
    for (kind, swatch) in kinds {
        let (n, bytes) = total(kind);
        if n == 0 {
            continue;
        }
        let bytes = style::bytes(bytes);
        let text = match kind {
            EventKind::PageMade => format!("{} made ({bytes})", counted(n, "page", "pages")),
            EventKind::PageReleased => {
                format!("{} given back ({bytes})", counted(n, "page", "pages"))
            }
            EventKind::Cleanup => {
                format!("{} ({bytes} released)", counted(n, "cleanup", "cleanups"))
            }
            _ => format!(
                "{} ({bytes} asked)",
                counted(n, "out-of-memory failure", "out-of-memory failures")
            ),
        };
        entries.push(Entry::new(swatch, text));
    }
    svg.text(
        (MARGIN, y),
        BODY_SIZE,
        Weight::Bold,
        Anchor::Start,
        INK,
        "Key",
        "",
    );
    legend::draw_flow(
        svg,
        &entries,
        (MARGIN, y + legend::ROW),
        WIDTH - 2.0 * MARGIN,
    )
}
