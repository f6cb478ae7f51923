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

/// The advance of `c` in em, about that of DejaVu Sans (what `sans-serif` is on most Linux
/// systems, and wider than Arial or Helvetica), rounded up.
fn char_em(c: char) -> f64 {
    match c {
        'i' | 'j' | 'l' | '\'' | '|' | '!' => 0.29,
        ' ' | '\u{a0}' | '.' | ',' | ':' | ';' | '·' | 'I' => 0.33,
        '/' | '\\' | '(' | ')' | '[' | ']' | '{' | '}' | '-' | 't' | 'f' | 'r' => 0.42,
        's' | 'z' | 'c' | '"' => 0.56,
        'm' | 'M' | 'W' | 'w' | '%' | '@' | '—' | '…' => 1.0,
        '0'..='9' | 'a'..='z' | '_' | '+' | '=' | '<' | '>' | '*' | '#' | '$' | '&' => 0.66,
        c if c.is_ascii_uppercase() => 0.8,
        // Anything else (other scripts, symbols): a full em, so it never overlaps.
        _ => 1.0,
    }
}

/// A generous estimate of the width in pixels of `text` at plotters size `size` (the SVG's
/// font size is `size / 1.24`): per-character advances of a wide sans-serif font, plus 5 %.
/// Overestimating only wastes room; underestimating overlaps.
pub fn text_width(text: &str, size: f64) -> f64 {
    let em = size / 1.24;
    text.chars().map(char_em).sum::<f64>() * em * 1.05
}

/// How much wider bold text is than [`text_width`] says (DejaVu Sans Bold is about 12 %
/// wider than the regular face): divide a width by it before fitting bold text.
pub const BOLD: f64 = 1.12;

/// `text`, cut with "…" so that [`text_width`] stays within `width` pixels.
pub fn fit(text: &str, size: f64, width: f64) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let mut cut = String::new();
    for c in text.chars() {
        cut.push(c);
        cut.push('…');
        let fits = text_width(&cut, size) <= width;
        cut.pop();
        if !fits {
            cut.pop();
            break;
        }
    }
    cut.push('…');
    cut
}

/// `text` broken into lines that each stay within `width` pixels by [`text_width`]: at
/// the last space or `/` (label scopes) that leaves the line within the width, else
/// anywhere. A no-break space (U+00A0) never breaks. Nothing is cut.
pub fn wrap(text: &str, size: f64, width: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if text_width(rest, size) <= width {
            lines.push(rest.to_string());
            break;
        }
        // The longest prefix (in chars) that fits; at least one char.
        let mut end = 0;
        for (i, c) in rest.char_indices() {
            if text_width(&rest[..i + c.len_utf8()], size) > width {
                break;
            }
            end = i + c.len_utf8();
        }
        if end == 0 {
            end = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        // Break at the last space, or just after the last '/', in that prefix.
        let head = &rest[..end];
        let space = head.rfind(' ').filter(|&at| at > 0);
        let slash = head.rfind('/').map(|at| at + 1).filter(|&at| at < end);
        let split = space.max(slash).unwrap_or(end);
        lines.push(rest[..split].trim_end().to_string());
        rest = rest[split..].trim_start();
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// Bytes as text for a wrapped legend: the number and its unit kept on one line.
pub fn bytes(bytes: u64) -> String {
    wgpu_memory::memory_management::format_bytes(bytes).replace(' ', "\u{a0}")
}

/// `count` and the noun, singular or plural: "1 page", "3 pages".
pub fn counted(count: impl Into<u64>, one: &str, many: &str) -> String {
    match count.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
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

    #[test]
    fn wide_characters_count_wider() {
        assert!(text_width("MMMM", 16.0) > text_width("iiii", 16.0) * 2.0);
        assert!(text_width("1.50 GiB", 16.0) > text_width("1.5", 16.0));
    }

    #[test]
    fn wrap_keeps_every_character_and_each_line_fits() {
        let long = "model/layer 12/attention/query projection weights (1.50 GiB)";
        for width in [60.0, 120.0, 200.0, 1000.0] {
            let lines = wrap(long, 16.0, width);
            for line in &lines {
                // A single character wider than the width still gets a line.
                assert!(
                    text_width(line, 16.0) <= width || line.chars().count() == 1,
                    "{line:?} is wider than {width}"
                );
            }
            let joined: String = lines.concat();
            let squeezed: String = long.chars().filter(|c| *c != ' ').collect();
            assert_eq!(joined.replace(' ', ""), squeezed, "width {width}");
        }
        assert_eq!(wrap("short", 16.0, 200.0), ["short"]);
        assert_eq!(
            wrap("model/layer 12/attention", 16.0, 130.0),
            ["model/layer 12/", "attention"]
        );
    }
}
