//! Colours, fonts and text fitting shared by both pictures, so a label keeps its colour
//! from the timeline to the page map.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One colour per top label, in rank order (Tableau 10 without its grey, then three more);
/// labels past the palette reuse it from the start.
const PALETTE: [RGBColor; 12] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xED, 0xC9, 0x48),
    RGBColor(0xB0, 0x7A, 0xA1),
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0x9C, 0x75, 0x5F),
    RGBColor(0xBC, 0xBD, 0x22),
    RGBColor(0x17, 0xBE, 0xCF),
    RGBColor(0x7B, 0x4E, 0xA3),
];

/// The "other labels" series.
pub const OTHER: RGBColor = RGBColor(0xB8, 0xAE, 0xA8);
/// Free bytes of a page.
pub const FREE: RGBColor = RGBColor(0xEE, 0xEE, 0xEE);
/// Padding of live slices.
pub const PADDING: RGBColor = RGBColor(0x30, 0x30, 0x30);
/// The outline of a page bar. Used by nothing else, so the bars can be counted in the SVG
/// (`stroke="#111111"`).
pub const PAGE_FRAME: RGBColor = RGBColor(0x11, 0x11, 0x11);
/// Text.
pub const INK: RGBColor = RGBColor(0x20, 0x20, 0x20);
/// Secondary text.
pub const MUTED: RGBColor = RGBColor(0x60, 0x60, 0x60);
/// Bytes reserved.
pub const RESERVED: RGBColor = RGBColor(0x10, 0x10, 0x10);
/// Page made.
pub const PAGE_MADE: RGBColor = RGBColor(0x1B, 0x9E, 0x3E);
/// Page given back.
pub const PAGE_RELEASED: RGBColor = RGBColor(0xD9, 0x5F, 0x02);
/// Cleanup.
pub const CLEANUP: RGBColor = RGBColor(0x37, 0x5C, 0xC8);
/// Out of memory.
pub const OUT_OF_MEMORY: RGBColor = RGBColor(0xCC, 0x00, 0x00);

/// The font family of every text.
pub const FAMILY: &str = "sans-serif";

/// The colour of series `series` when `other` is the "other labels" series.
pub fn series_color(series: usize, other: usize) -> RGBColor {
    if series >= other {
        OTHER
    } else {
        PALETTE[series % PALETTE.len()]
    }
}

/// A text style of `size` pixels as plotters takes them (the SVG says `size / 1.24` px),
/// anchored at its left end, vertically centred.
pub fn text(size: f64, color: &RGBColor) -> TextStyle<'static> {
    (FAMILY, size)
        .into_font()
        .color(color)
        .pos(Pos::new(HPos::Left, VPos::Center))
}

/// Like [`text`], bold.
pub fn bold(size: f64, color: &RGBColor) -> TextStyle<'static> {
    (FAMILY, size, FontStyle::Bold)
        .into_font()
        .color(color)
        .pos(Pos::new(HPos::Left, VPos::Center))
}

/// A generous estimate of the width in pixels of `text` at plotters size `size`: 0.6 em per
/// character of the rendered size (sans-serif fonts average about 0.55 em; digits and
/// capitals are wider). Overestimating only wastes room; underestimating overlaps.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * 0.6 * size / 1.24
}

/// `text`, cut with "…" so that [`text_width`] stays within `width` pixels.
pub fn fit(text: &str, size: f64, width: f64) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let per_char = 0.6 * size / 1.24;
    let keep = ((width / per_char).floor() as usize).saturating_sub(1);
    let mut cut: String = text.chars().take(keep).collect();
    cut.push('…');
    cut
}

/// " · labels grouped by their first N scopes", for a subtitle.
pub fn grouping(depth: usize) -> String {
    if depth == 1 {
        " · labels grouped by their first scope".to_string()
    } else {
        format!(" · labels grouped by their first {depth} scopes")
    }
}

/// Bytes as MiB with enough decimals to tell ticks apart when `max_mib` is small.
pub fn mib_label(value: f64, max_mib: f64) -> String {
    let decimals = if max_mib >= 100.0 {
        0
    } else if max_mib >= 10.0 {
        1
    } else if max_mib >= 0.1 {
        2
    } else {
        4
    };
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_cuts_long_text_to_the_width() {
        let long = "model/layer 12/attention/query projection weights";
        let cut = fit(long, 15.0, 120.0);
        assert!(cut.ends_with('…'));
        assert!(text_width(&cut, 15.0) <= 120.0);
        assert_eq!(fit("short", 15.0, 120.0), "short");
    }
}
