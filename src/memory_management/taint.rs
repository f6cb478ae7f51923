//! [`Taint`]: which bytes of one allocation hold no valid data, and which failure says so.

use super::error_graph::{ErrorGraph, FailureId};
use std::ops::Range;

/// Per failure, the byte ranges of one allocation it marks (offsets from the start of
/// the allocation; sorted, disjoint, never empty). Each failure present counts as one
/// carrier in the [`ErrorGraph`] (one tag per failure per allocation, however many
/// ranges).
///
/// Marking overwrites: bytes marked again belong to the newest failure only. A clean
/// allocation holds no heap memory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Taint {
    entries: Vec<(FailureId, Vec<Range<u64>>)>,
}

/// `ranges` minus `cut`, keeping order.
fn subtract(ranges: &mut Vec<Range<u64>>, cut: &Range<u64>) {
    let mut kept = Vec::with_capacity(ranges.len() + 1);
    for range in ranges.drain(..) {
        if range.end <= cut.start || range.start >= cut.end {
            kept.push(range);
            continue;
        }
        if range.start < cut.start {
            kept.push(range.start..cut.start);
        }
        if range.end > cut.end {
            kept.push(cut.end..range.end);
        }
    }
    *ranges = kept;
}

/// `ranges` plus `add`, fusing overlapping or touching ranges, keeping order.
fn unite(ranges: &mut Vec<Range<u64>>, add: Range<u64>) {
    let mut merged = add;
    let mut kept = Vec::with_capacity(ranges.len() + 1);
    for range in ranges.drain(..) {
        if range.end < merged.start || range.start > merged.end {
            kept.push(range);
        } else {
            merged = merged.start.min(range.start)..merged.end.max(range.end);
        }
    }
    let at = kept.partition_point(|range| range.start < merged.start);
    kept.insert(at, merged);
    *ranges = kept;
}

impl Taint {
    /// Claims `range` for `failure`: those bytes leave any other failure (a failure left
    /// with no bytes is uncounted in `graph`) and join `failure`'s (counted once).
    /// An empty range claims nothing.
    pub fn taint(&mut self, range: Range<u64>, failure: FailureId, graph: &mut ErrorGraph) {
        if range.is_empty() {
            return;
        }
        self.release(&range, Some(failure), graph);
        match self.entries.iter_mut().find(|(id, _)| *id == failure) {
            Some((_, ranges)) => unite(ranges, range),
            None => {
                graph.tag(failure);
                self.entries.push((failure, vec![range]));
            }
        }
    }

    /// `range` was written by work that succeeded: those bytes are claimed no more.
    pub fn written(&mut self, range: Range<u64>, graph: &mut ErrorGraph) {
        if !range.is_empty() {
            self.release(&range, None, graph);
        }
    }

    /// Removes `range` from every failure but `keep`; uncounts failures left empty.
    fn release(&mut self, range: &Range<u64>, keep: Option<FailureId>, graph: &mut ErrorGraph) {
        self.entries.retain_mut(|(id, ranges)| {
            if Some(*id) == keep {
                return true;
            }
            subtract(ranges, range);
            if ranges.is_empty() {
                graph.untag(*id);
                return false;
            }
            true
        });
    }

    /// A failure marking at least one byte of `range`; `None` when every byte is clean.
    pub fn failure(&self, range: &Range<u64>) -> Option<FailureId> {
        self.entries.iter().find_map(|(id, ranges)| {
            ranges
                .iter()
                .any(|r| r.start < range.end && range.start < r.end)
                .then_some(*id)
        })
    }

    /// The failures this allocation carries (one per failure).
    pub fn failures(&self) -> impl Iterator<Item = FailureId> + '_ {
        self.entries.iter().map(|(id, _)| *id)
    }

    /// Uncounts every failure and becomes clean (the allocation stops existing).
    pub fn clear(&mut self, graph: &mut ErrorGraph) {
        for (id, _) in self.entries.drain(..) {
            graph.untag(id);
        }
    }

    /// Whether no byte is claimed.
    pub fn is_clean(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_inside_a_marked_range_clears_just_those_bytes() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("boom");
        let mut taint = Taint::default();
        taint.taint(0..100, failure, &mut graph);
        taint.written(20..30, &mut graph);
        assert_eq!(taint.failure(&(20..30)), None);
        assert_eq!(taint.failure(&(0..20)), Some(failure));
        assert_eq!(taint.failure(&(29..31)), Some(failure));
        taint.written(0..100, &mut graph);
        assert!(taint.is_clean());
        assert!(graph.is_empty());
    }

    #[test]
    fn later_failure_replaces_the_earlier_one_on_shared_bytes() {
        let mut graph = ErrorGraph::default();
        let (old, new) = (graph.insert("old"), graph.insert("new"));
        let mut taint = Taint::default();
        taint.taint(0..10, old, &mut graph);
        taint.taint(0..10, new, &mut graph);
        assert_eq!(taint.failure(&(0..10)), Some(new));
        assert_eq!(graph.carriers(old), 0);
        assert_eq!(graph.len(), 1);
    }

    #[test]
    fn marking_twice_counts_one_carrier_and_adjacent_ranges_merge() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("a");
        let mut taint = Taint::default();
        taint.taint(0..10, failure, &mut graph);
        taint.taint(0..10, failure, &mut graph);
        taint.taint(10..20, failure, &mut graph);
        assert_eq!(graph.carriers(failure), 1);
        assert_eq!(taint.entries.len(), 1);
        assert_eq!(taint.entries[0].1.len(), 1);
        assert_eq!(taint.entries[0].1[0], 0..20);
    }

    #[test]
    fn separate_ranges_answer_with_their_own_failure_until_cleared() {
        let mut graph = ErrorGraph::default();
        let (a, b) = (graph.insert("a"), graph.insert("b"));
        let mut taint = Taint::default();
        taint.taint(0..10, a, &mut graph);
        taint.taint(20..30, b, &mut graph);
        assert_eq!(taint.failure(&(5..6)), Some(a));
        assert_eq!(taint.failure(&(25..26)), Some(b));
        assert_eq!(taint.failure(&(10..20)), None);
        taint.clear(&mut graph);
        assert!(graph.is_empty());
    }

    #[test]
    fn zero_length_range_marks_no_byte() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("a");
        let mut taint = Taint::default();
        taint.taint(5..5, failure, &mut graph);
        assert!(taint.is_clean());
        assert_eq!(taint.failure(&(0..0)), None);
    }
}
