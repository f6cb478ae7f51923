//! How far apart two colours look, for people with normal colour vision and with the two
//! common red-green deficiencies: the CIEDE2000 colour difference, computed after
//! simulating deuteranopia and protanopia with the matrices of Machado, Oliveira and
//! Fernandes (2009, severity 1.0, applied to linear RGB).

use crate::svg::Rgb;

/// A way of seeing colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vision {
    Normal,
    Deuteranopia,
    Protanopia,
}

/// Every vision the pictures are checked under.
pub const VISIONS: [Vision; 3] = [Vision::Normal, Vision::Deuteranopia, Vision::Protanopia];

/// The least ΔE2000 between two touching series, under every vision (issue 19).
pub const MIN_DELTA_E: f64 = 10.0;

// Machado et al. 2009, Table 1, severity 1.0.
const DEUTERANOPIA: [[f64; 3]; 3] = [
    [0.367322, 0.860646, -0.227968],
    [0.280085, 0.672501, 0.047413],
    [-0.011820, 0.042940, 0.968881],
];
const PROTANOPIA: [[f64; 3]; 3] = [
    [0.152286, 1.052583, -0.204868],
    [0.114503, 0.786281, 0.099216],
    [-0.003882, -0.048116, 1.051998],
];

/// sRGB (0-255) to linear RGB (0-1), IEC 61966-2-1.
fn linear(channel: u8) -> f64 {
    let c = f64::from(channel) / 255.0;
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// `color` as seen with `vision`, in linear RGB, clamped to 0..=1.
fn simulate(color: Rgb, vision: Vision) -> [f64; 3] {
    let rgb = [linear(color.0), linear(color.1), linear(color.2)];
    let matrix = match vision {
        Vision::Normal => return rgb,
        Vision::Deuteranopia => DEUTERANOPIA,
        Vision::Protanopia => PROTANOPIA,
    };
    let mut out = [0.0; 3];
    for (row, value) in matrix.iter().zip(&mut out) {
        *value = (row[0] * rgb[0] + row[1] * rgb[1] + row[2] * rgb[2]).clamp(0.0, 1.0);
    }
    out
}

/// Linear sRGB to CIE L*a*b* (D65 white).
fn lab([r, g, b]: [f64; 3]) -> [f64; 3] {
    let x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b;
    let y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
    let z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b;
    let f = |t: f64| {
        if t > 216.0 / 24389.0 {
            t.cbrt()
        } else {
            (24389.0 / 27.0 * t + 16.0) / 116.0
        }
    };
    let (fx, fy, fz) = (f(x / 0.95047), f(y), f(z / 1.08883));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// The CIEDE2000 difference of two L*a*b* colours (Sharma, Wu and Dalal 2005, kL = kC =
/// kH = 1).
pub fn ciede2000([l1, a1, b1]: [f64; 3], [l2, a2, b2]: [f64; 3]) -> f64 {
    let rad = f64::to_radians;
    let c_mean = (a1.hypot(b1) + a2.hypot(b2)) / 2.0;
    let c7 = c_mean.powi(7);
    let g = 0.5 * (1.0 - (c7 / (c7 + 25f64.powi(7))).sqrt());
    let (a1p, a2p) = ((1.0 + g) * a1, (1.0 + g) * a2);
    let (c1p, c2p) = (a1p.hypot(b1), a2p.hypot(b2));
    let hue = |b: f64, a: f64| {
        if b == 0.0 && a == 0.0 {
            0.0
        } else {
            b.atan2(a).to_degrees().rem_euclid(360.0)
        }
    };
    let (h1, h2) = (hue(b1, a1p), hue(b2, a2p));
    let dl = l2 - l1;
    let dc = c2p - c1p;
    let dh = if c1p * c2p == 0.0 {
        0.0
    } else if (h2 - h1).abs() <= 180.0 {
        h2 - h1
    } else if h2 - h1 > 180.0 {
        h2 - h1 - 360.0
    } else {
        h2 - h1 + 360.0
    };
    let dh_big = 2.0 * (c1p * c2p).sqrt() * rad(dh / 2.0).sin();
    let l_mean = (l1 + l2) / 2.0;
    let cp_mean = (c1p + c2p) / 2.0;
    let h_mean = if c1p * c2p == 0.0 {
        h1 + h2
    } else if (h1 - h2).abs() <= 180.0 {
        (h1 + h2) / 2.0
    } else if h1 + h2 < 360.0 {
        (h1 + h2 + 360.0) / 2.0
    } else {
        (h1 + h2 - 360.0) / 2.0
    };
    let t = 1.0 - 0.17 * rad(h_mean - 30.0).cos()
        + 0.24 * rad(2.0 * h_mean).cos()
        + 0.32 * rad(3.0 * h_mean + 6.0).cos()
        - 0.20 * rad(4.0 * h_mean - 63.0).cos();
    let d_theta = 30.0 * (-((h_mean - 275.0) / 25.0).powi(2)).exp();
    let cp7 = cp_mean.powi(7);
    let rc = 2.0 * (cp7 / (cp7 + 25f64.powi(7))).sqrt();
    let sl = 1.0 + 0.015 * (l_mean - 50.0).powi(2) / (20.0 + (l_mean - 50.0).powi(2)).sqrt();
    let sc = 1.0 + 0.045 * cp_mean;
    let sh = 1.0 + 0.015 * cp_mean * t;
    let rt = -rad(2.0 * d_theta).sin() * rc;
    ((dl / sl).powi(2) + (dc / sc).powi(2) + (dh_big / sh).powi(2) + rt * (dc / sc) * (dh_big / sh))
        .sqrt()
}

/// ΔE2000 between two sRGB colours as seen with `vision`.
pub fn delta_e(a: Rgb, b: Rgb, vision: Vision) -> f64 {
    ciede2000(lab(simulate(a, vision)), lab(simulate(b, vision)))
}

/// The least ΔE2000 between two colours over [`VISIONS`].
pub fn min_delta_e(a: Rgb, b: Rgb) -> f64 {
    VISIONS
        .iter()
        .map(|&vision| delta_e(a, b, vision))
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ciede2000_matches_sharmas_test_data() {
        // Pairs 1, 7, 17 and 24 of Sharma, Wu and Dalal's table (2005).
        let pairs = [
            ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
            ([50.0, 0.0, 0.0], [50.0, -1.0, 2.0], 2.3669),
            ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
            ([50.0, 2.5, 0.0], [50.0, 3.1736, 0.5854], 1.0000),
        ];
        for (a, b, want) in pairs {
            let got = ciede2000(a, b);
            assert!((got - want).abs() < 1e-4, "{a:?} {b:?}: {got} != {want}");
            assert!((ciede2000(b, a) - want).abs() < 1e-4);
        }
    }

    #[test]
    fn red_and_green_look_alike_to_a_deuteranope() {
        let (red, green) = (Rgb(0xD0, 0x40, 0x30), Rgb(0x60, 0x90, 0x30));
        assert!(delta_e(red, green, Vision::Normal) > 30.0);
        assert!(delta_e(red, green, Vision::Deuteranopia) < 15.0);
        // Greys do not change.
        let grey = Rgb(0x80, 0x80, 0x80);
        assert!(delta_e(grey, grey, Vision::Protanopia) < 1e-9);
        assert!(delta_e(Rgb(0, 0, 0), Rgb(255, 255, 255), Vision::Normal) > 99.0);
    }
}
