//! How a timeline spreads time over its width: to scale, except for quiet stretches.
//!
//! A run's history is bursts of work between stretches where nothing happens: warm-up
//! before the first step, pauses, the idle tail until the snapshot. To scale, those
//! stretches take most of the width and the work is squeezed into a few pixels. So a
//! stretch with no event that is both longer than [`QUIET_SHARE`] of the span and
//! [`QUIET_FACTOR`] times longer than the median gap between events is a *break*: it is
//! drawn as wide as [`BREAK_SHARE`] of the time drawn to scale, and everything else keeps
//! one scale. Positions still map to real times (ticks read real times), and each break
//! knows its real length, for the picture to say.
//!
//! Bounds: every break is longer than [`QUIET_SHARE`] of the span, so there are fewer than
//! 1 / [`QUIET_SHARE`] of them.

use serde::{Deserialize, Serialize};

/// A quiet stretch must be longer than this share of the span to be drawn short.
pub const QUIET_SHARE: f64 = 0.1;
/// ... and this many times longer than the median gap between events.
pub const QUIET_FACTOR: u64 = 10;
/// A break is drawn as long as this share of the time drawn to scale.
pub const BREAK_SHARE: f64 = 0.04;

/// One quiet stretch drawn short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AxisBreak {
    /// Where it starts (the event before it), in µs.
    pub from_us: u64,
    /// Where it ends (the event after it, or the snapshot), in µs.
    pub to_us: u64,
    /// How long it is drawn, in µs of the axis's scale (at least 1, less than
    /// `to_us - from_us`).
    pub drawn_us: u64,
}

impl AxisBreak {
    /// Its real length, in µs.
    pub fn length_us(&self) -> u64 {
        self.to_us - self.from_us
    }
}

/// The map from times to positions along a timeline (0 at `start_us`, 1 at `end_us`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeAxis {
    /// The first time drawn, in µs.
    pub start_us: u64,
    /// The last time drawn, in µs; greater than `start_us`.
    pub end_us: u64,
    /// The quiet stretches drawn short, in time order, disjoint.
    pub breaks: Vec<AxisBreak>,
    /// The length of the axis as drawn, in µs of its scale (at least 1).
    drawn_us: u64,
}

impl TimeAxis {
    /// An axis to scale from `start_us` to `end_us` (at least one µs past it).
    pub fn linear(start_us: u64, end_us: u64) -> Self {
        let end_us = end_us.max(start_us.saturating_add(1));
        TimeAxis {
            start_us,
            end_us,
            breaks: Vec::new(),
            drawn_us: end_us - start_us,
        }
    }

    /// An axis from `start_us` to `end_us` over events at `times` (in any order; those
    /// outside the span are ignored) whose quiet stretches (see the module doc) are
    /// drawn short.
    ///
    /// # Complexity
    /// O(n log n) for n times.
    pub fn compressing(times: &[u64], start_us: u64, end_us: u64) -> Self {
        let mut axis = TimeAxis::linear(start_us, end_us);
        let mut stops: Vec<u64> = times
            .iter()
            .copied()
            .filter(|t| (axis.start_us..=axis.end_us).contains(t))
            .chain([axis.start_us, axis.end_us])
            .collect();
        stops.sort_unstable();
        stops.dedup();
        let gaps: Vec<(u64, u64)> = stops.windows(2).map(|w| (w[0], w[1])).collect();
        let mut lengths: Vec<u64> = gaps.iter().map(|(a, b)| b - a).collect();
        lengths.sort_unstable();
        let Some(&median) = lengths.get(lengths.len() / 2) else {
            return axis;
        };
        let span = axis.end_us - axis.start_us;
        let quiet = |length: u64| {
            length as f64 > QUIET_SHARE * span as f64
                && length > median.saturating_mul(QUIET_FACTOR)
        };
        let to_scale: u64 = gaps
            .iter()
            .map(|(a, b)| b - a)
            .filter(|&length| !quiet(length))
            .sum();
        if to_scale == 0 {
            return axis;
        }
        let drawn = ((BREAK_SHARE * to_scale as f64).ceil() as u64).max(1);
        axis.breaks = gaps
            .iter()
            .filter(|(a, b)| quiet(b - a) && drawn < b - a)
            .map(|&(from_us, to_us)| AxisBreak {
                from_us,
                to_us,
                drawn_us: drawn,
            })
            .collect();
        let saved: u64 = axis.breaks.iter().map(|b| b.length_us() - b.drawn_us).sum();
        axis.drawn_us = span - saved;
        axis
    }

    /// Where `time_us` lies, from 0 (`start_us`) to 1 (`end_us`); times outside the span
    /// are clamped to its ends.
    ///
    /// # Complexity
    /// O(b) for b breaks (fewer than 1 / [`QUIET_SHARE`]).
    pub fn position(&self, time_us: u64) -> f64 {
        let time = time_us.clamp(self.start_us, self.end_us);
        let mut drawn = (time - self.start_us) as f64;
        for b in &self.breaks {
            if time <= b.from_us {
                break;
            }
            let inside = (time.min(b.to_us) - b.from_us) as f64;
            drawn -= inside - inside * b.drawn_us as f64 / b.length_us() as f64;
        }
        (drawn / self.drawn_us as f64).clamp(0.0, 1.0)
    }

    /// The time at `position` (0 ..= 1), in µs: the inverse of
    /// [`position`](Self::position), rounded.
    pub fn time_at(&self, position: f64) -> u64 {
        let mut left = position.clamp(0.0, 1.0) * self.drawn_us as f64;
        let mut at = self.start_us;
        for b in &self.breaks {
            let before = (b.from_us - at) as f64;
            if left <= before {
                break;
            }
            left -= before;
            let drawn = b.drawn_us as f64;
            if left <= drawn {
                let inside = left / drawn * b.length_us() as f64;
                return b.from_us + inside.round() as u64;
            }
            left -= drawn;
            at = b.to_us;
        }
        (at + left.round() as u64).min(self.end_us)
    }

    /// The stretches drawn to scale, in time order: `(from_us, to_us)` between the breaks.
    pub fn to_scale(&self) -> Vec<(u64, u64)> {
        let mut pieces = Vec::with_capacity(self.breaks.len() + 1);
        let mut at = self.start_us;
        for b in &self.breaks {
            pieces.push((at, b.from_us));
            at = b.to_us;
        }
        pieces.push((at, self.end_us));
        pieces.retain(|(a, b)| b > a);
        pieces
    }

    /// The length of the axis as drawn, in µs of its scale: the stretches to scale and
    /// the breaks' drawn lengths.
    pub fn drawn_us(&self) -> u64 {
        self.drawn_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page made at 0.1 ms, work from 500 to 520 ms, a snapshot at 1 s.
    fn release_run() -> Vec<u64> {
        let mut times = vec![100];
        times.extend((0..100).map(|i| 500_000 + i * 200));
        times.push(520_000);
        times
    }

    #[test]
    fn quiet_stretches_are_drawn_short_and_the_work_gets_the_width() {
        let axis = TimeAxis::compressing(&release_run(), 100, 1_000_000);
        assert_eq!(axis.breaks.len(), 2, "{:?}", axis.breaks);
        assert_eq!(
            (axis.breaks[0].from_us, axis.breaks[0].to_us),
            (100, 500_000)
        );
        assert_eq!(
            (axis.breaks[1].from_us, axis.breaks[1].to_us),
            (520_000, 1_000_000)
        );
        let work = axis.position(520_000) - axis.position(500_000);
        assert!(
            work > 0.9,
            "the work gets {:.0} % of the width",
            work * 100.0
        );
        // Positions grow with time, and map back.
        let mut last = -1.0;
        for t in (100..1_000_000).step_by(9_973) {
            let p = axis.position(t);
            assert!(p >= last, "{t}");
            last = p;
            assert!(
                axis.time_at(p).abs_diff(t) <= 200,
                "{t} back as {}",
                axis.time_at(p)
            );
        }
        assert_eq!(axis.position(100), 0.0);
        assert_eq!(axis.position(1_000_000), 1.0);
    }

    #[test]
    fn evenly_spread_events_keep_one_scale() {
        let times: Vec<u64> = (0..10).map(|i| i * 1_000).collect();
        let axis = TimeAxis::compressing(&times, 0, 11_000);
        assert!(axis.breaks.is_empty(), "{:?}", axis.breaks);
        assert!((axis.position(5_500) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn an_axis_of_one_event_is_to_scale() {
        let axis = TimeAxis::compressing(&[5], 5, 5);
        assert!(axis.breaks.is_empty());
        assert_eq!(axis.end_us, 6);
        assert_eq!(axis.position(6), 1.0);
    }
}
