//! A small SVG writer: rectangles, paths, lines and texts, each with an optional `<title>`
//! (the hover text a browser shows without any script), and hatch patterns.

use std::fmt::Write;

/// An sRGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// "#RRGGBB".
    pub fn hex(self) -> String {
        format!("#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// How a shape is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// One colour.
    Solid(Rgb),
    /// Diagonal hatching in `ink` over `base` (a pattern, for series whose colours alone
    /// would be too close); `angle` in degrees tells two hatchings apart.
    Hatch { base: Rgb, ink: Rgb, angle: i32 },
}

/// Text weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    Normal,
    Bold,
}

/// Where a text's x is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// The font family of every text.
pub const FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// `text` with `&`, `<`, `>` and `"` escaped for XML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // Control characters are not allowed in XML 1.0.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Rounds a coordinate to 0.01 px, dropping trailing zeros (smaller files).
pub fn num(value: f64) -> String {
    let rounded = (value * 100.0).round() / 100.0;
    let text = format!("{rounded:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// An SVG picture being written.
pub struct Svg {
    width: f64,
    height: f64,
    defs: String,
    body: String,
    patterns: Vec<(Rgb, Rgb, i32)>,
}

impl Svg {
    /// An empty picture `width` × `height` pixels, on white.
    pub fn new(width: f64, height: f64) -> Self {
        Svg {
            width,
            height,
            defs: String::new(),
            body: String::new(),
            patterns: Vec::new(),
        }
    }

    /// The fill attribute value for `fill`, defining its pattern on first use.
    fn paint(&mut self, fill: Fill) -> String {
        match fill {
            Fill::Solid(color) => color.hex(),
            Fill::Hatch { base, ink, angle } => {
                let key = (base, ink, angle);
                let index = match self.patterns.iter().position(|p| *p == key) {
                    Some(index) => index,
                    None => {
                        let index = self.patterns.len();
                        self.patterns.push(key);
                        let _ = write!(
                            self.defs,
                            r#"<pattern id="hatch{index}" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate({angle})"><rect width="6" height="6" fill="{}"/><rect width="2" height="6" fill="{}"/></pattern>"#,
                            base.hex(),
                            ink.hex()
                        );
                        index
                    }
                };
                format!("url(#hatch{index})")
            }
        }
    }

    fn title(title: Option<&str>) -> String {
        match title {
            Some(title) => format!("<title>{}</title>", escape(title)),
            None => String::new(),
        }
    }

    /// Appends `element` (an opening tag without its `>`, e.g. `<rect x="1"`), closed with its
    /// title inside when there is one.
    fn element(&mut self, open: &str, tag: &str, title: Option<&str>) {
        match title {
            Some(_) => {
                let _ = write!(self.body, "{open}>{}</{tag}>", Self::title(title));
            }
            None => {
                let _ = write!(self.body, "{open}/>");
            }
        }
        self.body.push('\n');
    }

    /// A rectangle; `attrs` are extra attributes (`class="..."`, `data-...`), written as given.
    #[allow(clippy::too_many_arguments)]
    pub fn rect(
        &mut self,
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        fill: Fill,
        attrs: &str,
        title: Option<&str>,
    ) {
        let paint = self.paint(fill);
        let open = format!(
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{paint}"{}{attrs}"#,
            num(x),
            num(y),
            num(width.max(0.0)),
            num(height.max(0.0)),
            if attrs.is_empty() { "" } else { " " }
        );
        self.element(&open, "rect", title);
    }

    /// A rectangle outline of `stroke` `width` px.
    pub fn frame(&mut self, x: f64, y: f64, w: f64, h: f64, stroke: Rgb, attrs: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{}" stroke-width="1" {attrs}/>"#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            stroke.hex()
        );
    }

    /// A filled closed path through `points`.
    pub fn area(&mut self, points: &[(f64, f64)], fill: Fill, attrs: &str, title: Option<&str>) {
        if points.is_empty() {
            return;
        }
        let paint = self.paint(fill);
        let open = format!(r#"<path d="{}Z" fill="{paint}" {attrs}"#, path_data(points));
        self.element(&open, "path", title);
    }

    /// An open line through `points`, `width` px wide, dashed when `dash` is given.
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: Rgb,
        width: f64,
        dash: Option<&str>,
        attrs: &str,
        title: Option<&str>,
    ) {
        if points.is_empty() {
            return;
        }
        let dash = dash
            .map(|d| format!(r#" stroke-dasharray="{d}""#))
            .unwrap_or_default();
        let open = format!(
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="{}"{dash} {attrs}"#,
            path_data(points),
            stroke.hex(),
            num(width)
        );
        self.element(&open, "path", title);
    }

    /// A filled polygon of `points` relative to `(x, y)`, placed with a translation (so a
    /// reader of the SVG finds its centre in `transform`).
    pub fn marker(
        &mut self,
        (x, y): (f64, f64),
        points: &[(f64, f64)],
        fill: Rgb,
        attrs: &str,
        title: Option<&str>,
    ) {
        let shape: Vec<String> = points
            .iter()
            .map(|(px, py)| format!("{},{}", num(*px), num(*py)))
            .collect();
        let open = format!(
            r#"<polygon points="{}" transform="translate({},{})" fill="{}" stroke="white" stroke-width="0.8" {attrs}"#,
            shape.join(" "),
            num(x),
            num(y),
            fill.hex()
        );
        self.element(&open, "polygon", title);
    }

    /// A text of `size` px.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        (x, y): (f64, f64),
        size: f64,
        weight: Weight,
        anchor: Anchor,
        color: Rgb,
        text: &str,
        attrs: &str,
    ) {
        let anchor = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let weight = match weight {
            Weight::Normal => "",
            Weight::Bold => r#" font-weight="bold""#,
        };
        let _ = writeln!(
            self.body,
            r#"<text x="{}" y="{}" font-size="{}" font-family="{FAMILY}" text-anchor="{anchor}" dominant-baseline="middle" fill="{}"{weight} {attrs}>{}</text>"#,
            num(x),
            num(y),
            num(size),
            color.hex(),
            escape(text)
        );
    }

    /// Opens a group with a title (what hovering any of its shapes shows).
    pub fn open_group(&mut self, attrs: &str, title: Option<&str>) {
        let _ = writeln!(self.body, "<g {attrs}>{}", Self::title(title));
    }

    /// Closes the group opened last.
    pub fn close_group(&mut self) {
        self.body.push_str("</g>\n");
    }

    /// Sets the height (the picture grows as rows are laid out).
    pub fn set_height(&mut self, height: f64) {
        self.height = height;
    }

    /// The SVG document, on a white background.
    pub fn finish(self) -> String {
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><defs>{}</defs>
<rect x="0" y="0" width="{w}" height="{h}" fill="#FFFFFF"/>
{}</svg>
"##,
            self.defs,
            self.body,
            w = num(self.width),
            h = num(self.height),
        )
    }
}

/// "M x y L x y ..." through `points`.
fn path_data(points: &[(f64, f64)]) -> String {
    let mut d = String::with_capacity(points.len() * 12);
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{} {}",
            if i == 0 { "M" } else { " L" },
            num(*x),
            num(*y)
        );
    }
    d
}
