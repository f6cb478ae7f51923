//! Axis ticks: round values of bytes and of milliseconds, each label with its unit.

/// A step of 1, 2 or 5 times a power of ten giving at most about `target` steps up to `max`.
pub fn nice_step(max: f64, target: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let rough = max / target.max(1) as f64;
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * power)
}

/// The decimals that tell ticks `step` apart.
fn decimals(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    }
}

/// Byte ticks from 0 to `max` bytes: `(bytes, label)` with a binary unit (B, KiB, MiB,
/// GiB) chosen by `max`, at most about `target` of them.
pub fn byte_ticks(max: u64, target: usize) -> Vec<(f64, String)> {
    let units = [
        ("B", 1u64),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
    ];
    let (name, unit) = units
        .iter()
        .rev()
        .find(|(_, unit)| max >= *unit)
        .copied()
        .unwrap_or(units[0]);
    let in_units = max as f64 / unit as f64;
    let step = nice_step(in_units, target);
    let places = decimals(step);
    let mut ticks = Vec::new();
    let mut value = 0.0;
    while value <= in_units + step * 1e-9 {
        ticks.push((value * unit as f64, format!("{value:.places$} {name}")));
        value += step;
    }
    ticks
}

/// Time ticks between `start_ms` and `end_ms`: `(ms, label)` at the multiples of `step`
/// ms (a round step: see [`nice_step`]), labelled "12 ms" with the decimals that tell
/// such ticks apart.
pub fn time_ticks_every(start_ms: f64, end_ms: f64, step: f64) -> Vec<(f64, String)> {
    let places = decimals(step);
    let mut ticks = Vec::new();
    let mut value = (start_ms / step).ceil() * step;
    while value <= end_ms + step * 1e-9 {
        ticks.push((value, format!("{value:.places$} ms")));
        value += step;
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_carry_units() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(0.7, 5), 0.2);
        let bytes = byte_ticks(3 << 20, 6);
        assert_eq!(bytes.first().unwrap().1, "0.0 MiB");
        assert!(
            bytes.iter().any(|(_, label)| label == "1.5 MiB"),
            "{bytes:?}"
        );
        assert!(bytes.last().unwrap().0 <= (3 << 20) as f64);
        let times = time_ticks_every(3.2, 47.0, nice_step(47.0 - 3.2, 8));
        assert_eq!(times.first().unwrap().1, "10 ms");
        assert!(times.iter().all(|(ms, _)| (3.2..=47.0).contains(ms)));
        assert_eq!(byte_ticks(0, 5)[0].1, "0 B");
    }
}
