//! Legends laid out so that no two entries overlap: a column (one entry per row) or a flow
//! (entries left to right, wrapping to a new row when the next would not fit).

use crate::style::{self, INK};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// What stands before an entry's text.
#[derive(Clone, Copy)]
pub enum Swatch {
    /// A filled square.
    Fill(RGBColor),
    /// A short line.
    Line(RGBColor),
    /// A short dashed line.
    Dashed(RGBColor),
    /// A triangle pointing up.
    Up(RGBColor),
    /// A triangle pointing down.
    Down(RGBColor),
    /// Nothing (a note rather than a key).
    Blank,
}

/// One legend entry.
pub struct Entry {
    /// Its swatch.
    pub swatch: Swatch,
    /// Its text (wrapped onto more rows in a column, cut to fit in a flow).
    pub text: String,
}

/// Text size of legend entries (plotters size).
pub const SIZE: f64 = 16.0;
/// Height of one legend row, in pixels.
pub const ROW: i32 = 22;
/// Width of a swatch plus the gap before the text, in pixels.
const SWATCH: i32 = 24;
/// Gap between entries of one flow row, in pixels.
const GAP: i32 = 18;

/// A triangle of about 10 px pointing up, around (0, 0), for `EmptyElement::at(..) + ...`.
pub fn up(color: RGBColor) -> Polygon<(i32, i32)> {
    Polygon::new(vec![(-5, 4), (5, 4), (0, -5)], color.filled())
}

/// A triangle of about 10 px pointing down, around (0, 0).
pub fn down(color: RGBColor) -> Polygon<(i32, i32)> {
    Polygon::new(vec![(-5, -4), (5, -4), (0, 5)], color.filled())
}

fn draw_swatch(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    swatch: Swatch,
    (x, y): (i32, i32),
) -> Result<(), Box<dyn std::error::Error>> {
    match swatch {
        Swatch::Fill(color) => area.draw(&Rectangle::new(
            [(x, y - 6), (x + 14, y + 7)],
            color.filled(),
        ))?,
        Swatch::Line(color) => area.draw(&PathElement::new(
            vec![(x, y), (x + 16, y)],
            color.stroke_width(2),
        ))?,
        Swatch::Dashed(color) => area.draw(&DashedPathElement::new(
            vec![(x, y), (x + 16, y)],
            4,
            3,
            color.stroke_width(2),
        ))?,
        Swatch::Up(color) => area.draw(&(EmptyElement::at((x + 7, y)) + up(color)))?,
        Swatch::Down(color) => area.draw(&(EmptyElement::at((x + 7, y)) + down(color)))?,
        Swatch::Blank => {}
    }
    Ok(())
}

/// The lines of each entry of a column `width` pixels wide (swatch included): its text
/// wrapped so that no line is wider than the room beside the swatch.
pub fn column_lines(entries: &[Entry], width: i32) -> Vec<Vec<String>> {
    entries
        .iter()
        .map(|entry| style::wrap(&entry.text, SIZE, f64::from(width - SWATCH)))
        .collect()
}

/// The rows a column of `entries` `width` pixels wide takes.
pub fn column_rows(entries: &[Entry], width: i32) -> i32 {
    column_lines(entries, width)
        .iter()
        .map(|lines| lines.len() as i32)
        .sum()
}

/// Draws `entries` one per row from `(x, y)` (the first row's centre line) within `width`
/// pixels, a text too long for one row wrapped onto more rows (nothing is cut); returns the
/// y of the next free row.
pub fn draw_column(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[Entry],
    (x, y): (i32, i32),
    width: i32,
) -> Result<i32, Box<dyn std::error::Error>> {
    let mut row_y = y;
    for (entry, lines) in entries.iter().zip(column_lines(entries, width)) {
        draw_swatch(area, entry.swatch, (x, row_y))?;
        for line in lines {
            area.draw(&Text::new(
                line,
                (x + SWATCH, row_y),
                style::text(SIZE, &INK),
            ))?;
            row_y += ROW;
        }
    }
    Ok(row_y)
}

/// Where each entry of the given text widths goes in a flow of at most `width` pixels:
/// `(x offset, row)` per entry. An entry wider than the flow gets a row of its own.
pub fn flow_layout(widths: &[i32], width: i32) -> Vec<(i32, i32)> {
    let mut places = Vec::with_capacity(widths.len());
    let (mut x, mut row) = (0, 0);
    for &w in widths {
        let needed = SWATCH + w;
        if x > 0 && x + needed > width {
            x = 0;
            row += 1;
        }
        places.push((x, row));
        x += needed + GAP;
    }
    places
}

/// Draws `entries` as a flow from `(x, y)` (the first row's centre line) within `width`
/// pixels; returns the y of the next free row.
pub fn draw_flow(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[Entry],
    (x, y): (i32, i32),
    width: i32,
) -> Result<i32, Box<dyn std::error::Error>> {
    let texts: Vec<String> = entries
        .iter()
        .map(|entry| style::fit(&entry.text, SIZE, f64::from(width - SWATCH)))
        .collect();
    let widths: Vec<i32> = texts
        .iter()
        .map(|text| style::text_width(text, SIZE).ceil() as i32)
        .collect();
    let places = flow_layout(&widths, width);
    let mut rows = 0;
    for ((entry, text), &(dx, row)) in entries.iter().zip(texts).zip(&places) {
        let at = (x + dx, y + row * ROW);
        draw_swatch(area, entry.swatch, at)?;
        area.draw(&Text::new(
            text,
            (at.0 + SWATCH, at.1),
            style::text(SIZE, &INK),
        ))?;
        rows = rows.max(row + 1);
    }
    Ok(y + rows * ROW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_entries_never_overlap_and_stay_within_the_width() {
        let widths = [120, 40, 300, 80, 500, 10, 10, 700];
        let places = flow_layout(&widths, 600);
        for (i, (&(x, row), &w)) in places.iter().zip(&widths).enumerate() {
            let end = x + SWATCH + w;
            assert!(end <= 600 || x == 0, "entry {i} overflows");
            for &(x2, row2) in places.iter().skip(i + 1) {
                if row2 == row {
                    assert!(x2 >= end, "entries overlap");
                }
            }
        }
        assert_eq!(places[0], (0, 0));
    }
}
