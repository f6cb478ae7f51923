//! The peak of a timeline: its mark on the plot, and what held the memory then, label by
//! label, adding up to it.

use crate::legend::{self, Swatch};
use crate::style::{self, BODY_SIZE, INK};
use crate::svg::{Anchor, Fill, Svg, Weight};
use crate::timeline_svg::{Layer, MARGIN, PLOT_HEIGHT, Scale, WIDTH, ms};
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::report::Timeline;

/// How many holders of the peak are named one by one; the rest are summed in one entry.
const PEAK_NAMED: usize = 8;

/// A dashed line up to the peak of in use, a dot on it, and its text above the plot,
/// anchored at the peak's own x.
pub fn draw_peak(svg: &mut Svg, scale: &Scale, timeline: &Timeline) {
    if timeline.peak_in_use == 0 {
        return;
    }
    let x = scale.x(timeline.peak_in_use_us);
    let y = scale.y(timeline.peak_in_use as f64);
    svg.polyline(
        &[(x, scale.top - 6.0), (x, scale.top + PLOT_HEIGHT)],
        style::PEAK,
        1.0,
        Some("2 2"),
        "",
        None,
    );
    let dot = [(-4.0, 0.0), (0.0, -4.0), (4.0, 0.0), (0.0, 4.0)];
    svg.marker((x, y), &dot, style::PEAK, r#"class="peak-dot""#, None);
    let text = format!(
        "peak in use {} at {}",
        format_bytes(timeline.peak_in_use),
        ms(timeline.peak_in_use_us)
    );
    let width = style::text_width(&text, BODY_SIZE);
    let anchor = if x - width / 2.0 < MARGIN {
        Anchor::Start
    } else if x + width / 2.0 > WIDTH - MARGIN {
        Anchor::End
    } else {
        Anchor::Middle
    };
    svg.text(
        (x, scale.top - 12.0),
        BODY_SIZE,
        Weight::Bold,
        anchor,
        style::PEAK,
        &text,
        &format!(
            r#"class="peak" data-time-us="{}" data-bytes="{}""#,
            timeline.peak_in_use_us, timeline.peak_in_use
        ),
    );
}

/// The fill of the layer a whole label is drawn in.
fn fill_of(timeline: &Timeline, layers: &[Layer], label: &str) -> Fill {
    let name = timeline.labels.name(timeline.labels.series(Some(label)));
    layers
        .iter()
        .find(|layer| layer.class == "series" && layer.name == name)
        .map_or(Fill::Solid(style::OTHER), |layer| layer.fill)
}

/// "At the peak ... held by": the largest holders, then the rest summed, so the entries add
/// up to the peak exactly; returns the y below.
pub fn draw_holders(svg: &mut Svg, timeline: &Timeline, layers: &[Layer], y: f64) -> f64 {
    if timeline.peak_in_use == 0 {
        return y;
    }
    let sum: u64 = timeline.peak_holders.iter().map(|(_, b)| b).sum();
    let heading = format!(
        "At the peak ({}), the {} in use were held by{}:",
        ms(timeline.peak_in_use_us),
        format_bytes(timeline.peak_in_use),
        if sum == timeline.peak_in_use {
            ""
        } else {
            " (the history disagrees with the slices)"
        }
    );
    svg.text(
        (MARGIN, y),
        BODY_SIZE,
        Weight::Bold,
        Anchor::Start,
        INK,
        &heading,
        "",
    );
    let mut entries: Vec<(Fill, String, u64, String)> = timeline
        .peak_holders
        .iter()
        .take(PEAK_NAMED)
        .map(|(label, bytes)| {
            (
                fill_of(timeline, layers, label),
                format!("{label} {}", style::bytes(*bytes)),
                *bytes,
                format!("{label}: {bytes} bytes at the peak"),
            )
        })
        .collect();
    let rest = &timeline.peak_holders[timeline.peak_holders.len().min(PEAK_NAMED)..];
    if !rest.is_empty() {
        let bytes: u64 = rest.iter().map(|(_, b)| b).sum();
        let names: Vec<&str> = rest.iter().map(|(l, _)| l.as_str()).collect();
        entries.push((
            Fill::Solid(style::OTHER),
            format!(
                "{} more {} {}",
                rest.len(),
                if rest.len() == 1 { "label" } else { "labels" },
                style::bytes(bytes)
            ),
            bytes,
            format!("{}: {bytes} bytes together", names.join(", ")),
        ));
    }
    let width = WIDTH - 2.0 * MARGIN;
    let widths: Vec<f64> = entries
        .iter()
        .map(|(_, text, _, _)| style::text_width(text, BODY_SIZE))
        .collect();
    let places = legend::flow_layout(&widths, width);
    let first = y + legend::ROW;
    let mut rows = 0;
    for ((fill, text, bytes, title), &(dx, row)) in entries.iter().zip(&places) {
        let at = (MARGIN + dx, first + row as f64 * legend::ROW);
        svg.open_group(r#"class="holder""#, Some(title));
        legend::draw_swatch(svg, Swatch::Fill(*fill), at);
        svg.text(
            (at.0 + 18.0, at.1),
            BODY_SIZE,
            Weight::Normal,
            Anchor::Start,
            INK,
            text,
            &format!(r#"class="peak-entry" data-bytes="{bytes}""#),
        );
        svg.close_group();
        rows = rows.max(row + 1);
    }
    first + rows as f64 * legend::ROW
}
