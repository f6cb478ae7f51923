//! Legends laid out so that no two entries overlap: a flow of entries left to right,
//! wrapping to a new row when the next would not fit.

use crate::style::{self, INK};
use crate::svg::{Anchor, Fill, Rgb, Svg, Weight};

/// What stands before an entry's text.
#[derive(Clone, Copy)]
pub enum Swatch {
    /// A filled square.
    Fill(Fill),
    /// A short line.
    Line(Rgb),
    /// A short dashed line.
    Dashed(Rgb),
    /// A triangle pointing up.
    Up(Rgb),
    /// A triangle pointing down.
    Down(Rgb),
}

/// One legend entry.
pub struct Entry {
    /// Its swatch.
    pub swatch: Swatch,
    /// Its text (cut with "…" only if wider than the whole legend).
    pub text: String,
    /// Its hover text, if any.
    pub title: Option<String>,
}

impl Entry {
    /// An entry without hover text.
    pub fn new(swatch: Swatch, text: impl Into<String>) -> Self {
        Entry {
            swatch,
            text: text.into(),
            title: None,
        }
    }
}

/// Text size of legend entries, in px.
pub const SIZE: f64 = style::BODY_SIZE;
/// Height of one legend row, in pixels.
pub const ROW: f64 = 18.0;
/// Width of a swatch plus the gap before the text, in pixels.
const SWATCH: f64 = 18.0;
/// Gap between entries of one row, in pixels.
const GAP: f64 = 14.0;

/// A triangle about 10 px wide pointing up, around (0, 0).
pub const UP: [(f64, f64); 3] = [(-5.0, 4.0), (5.0, 4.0), (0.0, -5.0)];
/// A triangle about 10 px wide pointing down, around (0, 0).
pub const DOWN: [(f64, f64); 3] = [(-5.0, -4.0), (5.0, -4.0), (0.0, 5.0)];

/// Draws a swatch whose left edge is `x`, centred on `y`.
pub fn draw_swatch(svg: &mut Svg, swatch: Swatch, (x, y): (f64, f64)) {
    match swatch {
        Swatch::Fill(fill) => svg.rect(
            x,
            y - 5.5,
            11.0,
            11.0,
            fill,
            r##"stroke="#808080" stroke-width="0.5""##,
            None,
        ),
        Swatch::Line(color) => svg.polyline(&[(x, y), (x + 12.0, y)], color, 2.0, None, "", None),
        Swatch::Dashed(color) => {
            svg.polyline(&[(x, y), (x + 12.0, y)], color, 2.0, Some("3 2"), "", None)
        }
        Swatch::Up(color) => svg.marker((x + 6.0, y), &UP, color, "", None),
        Swatch::Down(color) => svg.marker((x + 6.0, y), &DOWN, color, "", None),
    }
}

/// Where each entry of the given text widths goes in a flow of at most `width` pixels:
/// `(x offset, row)` per entry. An entry wider than the flow gets a row of its own.
pub fn flow_layout(widths: &[f64], width: f64) -> Vec<(f64, usize)> {
    let mut places = Vec::with_capacity(widths.len());
    let (mut x, mut row) = (0.0, 0);
    for &w in widths {
        let needed = SWATCH + w;
        if x > 0.0 && x + needed > width {
            x = 0.0;
            row += 1;
        }
        places.push((x, row));
        x += needed + GAP;
    }
    places
}

fn texts(entries: &[Entry], width: f64) -> Vec<String> {
    entries
        .iter()
        .map(|entry| style::fit(&entry.text, SIZE, width - SWATCH))
        .collect()
}

/// Draws `entries` as a flow from `(x, y)` (the first row's centre line) within `width`
/// pixels; returns the y of the next free row.
pub fn draw_flow(svg: &mut Svg, entries: &[Entry], (x, y): (f64, f64), width: f64) -> f64 {
    let texts = texts(entries, width);
    let widths: Vec<f64> = texts
        .iter()
        .map(|text| style::text_width(text, SIZE))
        .collect();
    let places = flow_layout(&widths, width);
    let mut rows = 0;
    for ((entry, text), &(dx, row)) in entries.iter().zip(texts).zip(&places) {
        let at = (x + dx, y + row as f64 * ROW);
        svg.open_group(r#"class="legend-entry""#, entry.title.as_deref());
        draw_swatch(svg, entry.swatch, at);
        svg.text(
            (at.0 + SWATCH, at.1),
            SIZE,
            Weight::Normal,
            Anchor::Start,
            INK,
            &text,
            "",
        );
        svg.close_group();
        rows = rows.max(row + 1);
    }
    y + rows as f64 * ROW
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_entries_never_overlap_and_stay_within_the_width() {
        let widths = [120.0, 40.0, 300.0, 80.0, 500.0, 10.0, 10.0, 700.0];
        let places = flow_layout(&widths, 600.0);
        for (i, (&(x, row), &w)) in places.iter().zip(&widths).enumerate() {
            let end = x + SWATCH + w;
            assert!(end <= 600.0 || x == 0.0, "entry {i} overflows");
            for &(x2, row2) in places.iter().skip(i + 1) {
                if row2 == row {
                    assert!(x2 >= end, "entries overlap");
                }
            }
        }
        assert_eq!(places[0], (0.0, 0));
    }
}
