//! The timeline's time axis: ticks at round real times on the stretches drawn to scale,
//! and a mark on each quiet stretch drawn short (see `wgpu_memory::report::TimeAxis`).

use crate::axis;
use crate::style::{self, MUTED, SMALL_SIZE};
use crate::svg::{Anchor, Fill, Rgb, Svg, Weight};
use crate::timeline_svg::{PLOT_WIDTH, Scale, WIDTH, ms};

/// Labels closer than this, in pixels, would touch: the later one is left out.
const LABEL_GAP: f64 = 44.0;

/// Time ticks under the plot (whose bottom is at `bottom`): one round step (about eight
/// ticks over the time drawn to scale), on each stretch drawn to scale, real times.
pub fn draw_time_ticks(svg: &mut Svg, scale: &Scale, bottom: f64) {
    let pieces = scale.axis.to_scale();
    let scaled_ms: f64 = pieces.iter().map(|(a, b)| (b - a) as f64 / 1000.0).sum();
    let step = axis::nice_step(scaled_ms, 8);
    let mut last_x = f64::MIN;
    for (from, to) in pieces {
        for (time_ms, label) in
            axis::time_ticks_every(from as f64 / 1000.0, to as f64 / 1000.0, step)
        {
            let x = scale.x((time_ms * 1000.0).round() as u64);
            if x - last_x < LABEL_GAP {
                continue;
            }
            last_x = x;
            svg.polyline(
                &[(x, bottom), (x, bottom + 4.0)],
                MUTED,
                1.0,
                None,
                "",
                None,
            );
            // A label at the right edge ends there rather than running off the picture.
            let anchor = if x + style::text_width(&label, SMALL_SIZE) / 2.0 > WIDTH - 4.0 {
                Anchor::End
            } else {
                Anchor::Middle
            };
            svg.text(
                (x, bottom + 13.0),
                SMALL_SIZE,
                Weight::Normal,
                anchor,
                MUTED,
                &label,
                "",
            );
        }
    }
}

/// Each quiet stretch drawn short: a white gap in the axis line with two slanted strokes
/// ("≈"), whose hover text gives its real length.
pub fn draw_breaks(svg: &mut Svg, scale: &Scale, bottom: f64) {
    for b in &scale.axis.breaks {
        let (x0, x1) = (scale.x(b.from_us), scale.x(b.to_us));
        let middle = (x0 + x1) / 2.0;
        let title = format!(
            "quiet for {}: no event from {} to {}; drawn {:.0}x shorter",
            ms(b.length_us()),
            ms(b.from_us),
            ms(b.to_us),
            b.length_us() as f64 / b.drawn_us as f64
        );
        let width = (x1 - x0).clamp(6.0, PLOT_WIDTH);
        svg.rect(
            middle - width / 2.0,
            bottom - 4.0,
            width,
            8.0,
            Fill::Solid(Rgb(0xFF, 0xFF, 0xFF)),
            &format!(
                r#"class="axis-break" data-from-us="{}" data-to-us="{}""#,
                b.from_us, b.to_us
            ),
            Some(&title),
        );
        for dx in [-2.5, 2.5] {
            svg.polyline(
                &[
                    (middle + dx - 2.0, bottom + 4.0),
                    (middle + dx + 2.0, bottom - 4.0),
                ],
                MUTED,
                1.0,
                None,
                "",
                None,
            );
        }
    }
}
