//! Colours, fonts and text fitting shared by both pictures, so a label keeps its colour
//! from the timeline to the page map, and from one run to the next.
//!
//! The label palette was chosen so that any two of its colours, and each of them against
//! the fixed colours ([`FREE`], [`PADDING`], [`OTHER`], white and [`INK`]), stay at least
//! ΔE2000 11 apart for normal vision and under deuteranopia and protanopia simulation
//! (greedy farthest-point search over an sRGB grid, see `cvd.rs` for the measure). A label
//! takes the palette colour its name hashes to (FNV-1a), or the next free one when a
//! larger label already took it, so its colour does not depend on its rank; past the
//! palette's 12 colours, labels get hatched variants, never a repeated fill.

use crate::cvd;
use crate::svg::{Fill, Rgb};
use wgpu_memory::report::TopLabels;

/// The label colours.
pub const PALETTE: [Rgb; 12] = [
    Rgb(0x55, 0x00, 0xFF),
    Rgb(0x44, 0x77, 0x00),
    Rgb(0xFF, 0xCC, 0x00),
    Rgb(0xAA, 0x99, 0xFF),
    Rgb(0x88, 0x55, 0x77),
    Rgb(0xBB, 0x99, 0x66),
    Rgb(0x11, 0x66, 0x44),
    Rgb(0xDD, 0xCC, 0xFF),
    Rgb(0xEE, 0xCC, 0xAA),
    Rgb(0xAA, 0x77, 0xAA),
    Rgb(0x99, 0x22, 0x99),
    Rgb(0x88, 0x66, 0xEE),
];

/// Readback staging pages (from the same search as the palette).
pub const STAGING: Rgb = Rgb(0x33, 0x88, 0x66);
/// Upload staging pages.
pub const UPLOAD: Rgb = Rgb(0xDD, 0x99, 0x11);
/// The "other labels" series.
pub const OTHER: Rgb = Rgb(0x9E, 0x9E, 0x9E);
/// Free bytes: of a page in the page map, inside used pages in the timeline.
pub const FREE: Rgb = Rgb(0xE6, 0xE6, 0xE6);
/// Empty main pages in the timeline: hatched, so they never rely on colour alone.
pub const EMPTY_PAGES: Fill = Fill::Hatch {
    base: Rgb(0xFF, 0xFF, 0xFF),
    ink: Rgb(0xB4, 0xB4, 0xB4),
    angle: 45,
};
/// Idle staging pages (holding no slice) of a staging memory drawn in `ink`: hatched on
/// white like [`EMPTY_PAGES`], in the memory's colour, so idle and in use never rely on
/// colour alone.
pub const fn idle(ink: Rgb) -> Fill {
    Fill::Hatch {
        base: Rgb(0xFF, 0xFF, 0xFF),
        ink,
        angle: 45,
    }
}
/// Padding of live slices.
pub const PADDING: Rgb = Rgb(0x30, 0x30, 0x30);
/// The outline of a page bar. Used by nothing else, so the bars can be counted in the SVG.
pub const PAGE_FRAME: Rgb = Rgb(0x11, 0x11, 0x11);
/// Text.
pub const INK: Rgb = Rgb(0x20, 0x20, 0x20);
/// Secondary text (still 7:1 against white).
pub const MUTED: Rgb = Rgb(0x50, 0x50, 0x50);
/// Grid lines.
pub const GRID: Rgb = Rgb(0xDD, 0xDD, 0xDD);
/// Bytes reserved.
pub const RESERVED: Rgb = Rgb(0x10, 0x10, 0x10);
/// Page made.
pub const PAGE_MADE: Rgb = Rgb(0x1B, 0x9E, 0x3E);
/// Page given back.
pub const PAGE_RELEASED: Rgb = Rgb(0xD9, 0x5F, 0x02);
/// Cleanup.
pub const CLEANUP: Rgb = Rgb(0x37, 0x5C, 0xC8);
/// Out of memory.
pub const OUT_OF_MEMORY: Rgb = Rgb(0xCC, 0x00, 0x00);
/// The peak mark.
pub const PEAK: Rgb = Rgb(0xC0, 0x00, 0x40);

/// Text sizes, in px at the pictures' 880 px width (so at least 10 px in an 880 px column).
pub const TITLE_SIZE: f64 = 16.0;
pub const BODY_SIZE: f64 = 12.0;
pub const SMALL_SIZE: f64 = 11.0;

/// FNV-1a of a label: the same on every run and platform.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Each series' fill (index as in [`TopLabels::series`]), "other" last.
pub fn series_fills(labels: &TopLabels) -> Vec<Fill> {
    let mut taken = [false; PALETTE.len()];
    let mut fills: Vec<Fill> = Vec::with_capacity(labels.series_count());
    let mut overflow = 0i32;
    for name in labels.names() {
        let preferred = (fnv1a(name) % PALETTE.len() as u64) as usize;
        let free = (0..PALETTE.len())
            .map(|step| (preferred + step) % PALETTE.len())
            .find(|&index| !taken[index]);
        fills.push(match free {
            Some(index) => {
                taken[index] = true;
                Fill::Solid(PALETTE[index])
            }
            None => {
                // Every colour is taken: a hatching of the preferred one, each at its own angle.
                overflow += 1;
                Fill::Hatch {
                    base: PALETTE[preferred],
                    ink: Rgb(0xFF, 0xFF, 0xFF),
                    angle: (overflow * 37) % 180,
                }
            }
        });
    }
    fills.push(Fill::Solid(OTHER));
    fills
}

/// Gives the upper of two touching solid fills a hatching when they are closer than
/// [`cvd::MIN_DELTA_E`] for some vision: `order` lists indices into `fills` bottom up.
pub fn keep_apart(fills: &mut [Fill], order: &[usize]) {
    for pair in order.windows(2) {
        let (lower, upper) = (fills[pair[0]], fills[pair[1]]);
        if let (Fill::Solid(a), Fill::Solid(b)) = (lower, upper)
            && cvd::min_delta_e(a, b) < cvd::MIN_DELTA_E
        {
            fills[pair[1]] = Fill::Hatch {
                base: b,
                ink: Rgb(0xFF, 0xFF, 0xFF),
                angle: 135,
            };
        }
    }
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

/// A generous estimate of the width in pixels of `text` at font size `size` px:
/// per-character advances of a wide sans-serif font, plus 5 %. Overestimating only wastes
/// room; underestimating overlaps.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().map(char_em).sum::<f64>() * size * 1.05
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_keeps_its_colour_whatever_its_rank_and_colours_never_repeat() {
        let alone = TopLabels::rank([("layer 3/weights".to_string(), 10)], 12);
        let crowd = TopLabels::rank(
            (0..6)
                .map(|i| (format!("layer {i}/activations"), 100 + i))
                .chain([("layer 3/weights".to_string(), 10)]),
            12,
        );
        let colour_of = |labels: &TopLabels| {
            let series = labels.series(Some("layer 3/weights"));
            series_fills(labels)[series]
        };
        // Placed after six larger labels, it keeps its colour unless one of them hashed to
        // it first (they do not, for these names).
        assert_eq!(colour_of(&alone), colour_of(&crowd));
        let many = TopLabels::rank((0..20).map(|i| (format!("l{i}"), i)), 20);
        let fills = series_fills(&many);
        for (i, a) in fills.iter().enumerate() {
            for b in &fills[i + 1..] {
                assert_ne!(a, b, "a fill repeats");
            }
        }
    }

    #[test]
    fn the_palette_is_apart_under_every_vision() {
        let fixed = [OTHER, FREE, PADDING, INK, Rgb(0xFF, 0xFF, 0xFF)];
        let all: Vec<Rgb> = PALETTE.iter().copied().chain([STAGING, UPLOAD]).collect();
        for (i, &a) in all.iter().enumerate() {
            for &b in all[i + 1..].iter().chain(&fixed) {
                let d = cvd::min_delta_e(a, b);
                assert!(d >= 11.0, "{} and {}: ΔE {d:.1}", a.hex(), b.hex());
            }
        }
    }

    #[test]
    fn keep_apart_hatches_the_upper_of_two_close_colours() {
        let mut fills = vec![
            Fill::Solid(Rgb(0xD0, 0x40, 0x30)),
            Fill::Solid(Rgb(0x60, 0x90, 0x30)),
            Fill::Solid(Rgb(0xFF, 0xFF, 0xFF)),
        ];
        keep_apart(&mut fills, &[0, 1, 2]);
        assert!(matches!(fills[1], Fill::Hatch { .. }));
        assert!(matches!(fills[0], Fill::Solid(_)));
    }

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
            wrap("model/layer 12/attention", 13.0, 130.0),
            ["model/layer 12/", "attention"]
        );
    }
}
