//! The labels a picture names one by one; the rest are drawn together as "other".

use super::history::EventKind;
use super::levels::{label_group, label_peaks};
use super::snapshot::MemorySnapshot;
use std::collections::BTreeMap;

/// What the labels outside the top ones are drawn as, together.
pub const OTHER_LABELS: &str = "other";

/// The top label groups, ranked, and the series index of any label.
///
/// Series `0 .. names().len()` are the top groups, largest peak first; series
/// [`other`](Self::other) (the last, `names().len()`) gathers every other label. Both
/// pictures colour a series the same way, so a label keeps its colour from one to the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopLabels {
    names: Vec<String>,
    has_other: bool,
    depth: Option<usize>,
}

/// Sorts `(name, bytes)` by bytes, largest first, ties by name.
fn by_bytes(mut list: Vec<(String, u64)>) -> Vec<(String, u64)> {
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list.dedup_by(|a, b| a.0 == b.0);
    list
}

impl TopLabels {
    /// Keeps the `top` labels with the largest bytes, ties broken by name; `ranked` gives each
    /// label (unlabelled as [`NO_LABEL`](super::NO_LABEL)) with its bytes. Labels are not grouped.
    pub fn rank(ranked: impl IntoIterator<Item = (String, u64)>, top: usize) -> TopLabels {
        let mut all = by_bytes(ranked.into_iter().collect());
        let has_other = all.len() > top;
        all.truncate(top);
        TopLabels {
            names: all.into_iter().map(|(name, _)| name).collect(),
            has_other,
            depth: None,
        }
    }

    /// The `top` label groups of a snapshot (labels grouped as [`label_group`] does at
    /// `depth`), chosen so that every pool's main labels are named, not only the largest
    /// overall:
    ///
    /// 1. One list ranks the groups by peak bytes in use ([`label_peaks`]); one list per pool
    ///    ranks them by live bytes in that pool.
    /// 2. Round `r` takes the `r`-th group of each list in turn (the peak list first, then
    ///    the pools in snapshot order), unless it is already chosen, until `top` are chosen
    ///    or the lists run out.
    /// 3. The chosen groups are ordered by peak, largest first: series 0 is the largest.
    pub fn from_snapshot(snapshot: &MemorySnapshot, top: usize, depth: Option<usize>) -> Self {
        let peaks = by_bytes(label_peaks(snapshot, depth));
        let mut lists: Vec<Vec<String>> = vec![peaks.iter().map(|(n, _)| n.clone()).collect()];
        for memory in &snapshot.memories {
            for pool in &memory.pools {
                let mut live: BTreeMap<&str, u64> = BTreeMap::new();
                for page in &pool.pages {
                    for slice in page.slices.iter().filter(|s| s.live) {
                        let bytes = live
                            .entry(label_group(slice.label.as_deref(), depth))
                            .or_default();
                        *bytes = bytes.saturating_add(slice.size);
                    }
                }
                let ranked = by_bytes(live.into_iter().map(|(n, b)| (n.to_string(), b)).collect());
                lists.push(ranked.into_iter().map(|(name, _)| name).collect());
            }
        }
        let mut chosen: Vec<String> = Vec::new();
        let rounds = lists.iter().map(Vec::len).max().unwrap_or(0);
        'rounds: for round in 0..rounds {
            for list in &lists {
                if chosen.len() == top {
                    break 'rounds;
                }
                if let Some(name) = list.get(round)
                    && !chosen.contains(name)
                {
                    chosen.push(name.clone());
                }
            }
        }
        let rank = |name: &String| peaks.iter().position(|(n, _)| n == name);
        chosen.sort_by_key(|name| (rank(name).unwrap_or(usize::MAX), name.clone()));
        let known = lists
            .iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>();
        TopLabels {
            has_other: known.len() > chosen.len(),
            names: chosen,
            depth,
        }
    }

    /// The deepest grouping at which a snapshot's labels (of its history and its live slices)
    /// form at most `top` groups, so that every group can be named: `None` when the whole
    /// labels already fit, `Some(1)` (first scopes only) when even those are more than `top`.
    ///
    /// # Complexity
    /// O(l · d) for l labels of at most d scopes.
    pub fn fitting_depth(snapshot: &MemorySnapshot, top: usize) -> Option<usize> {
        let mut labels: std::collections::BTreeSet<Option<&str>> = snapshot
            .history
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Reserve | EventKind::Free))
            .map(|e| e.label.as_deref())
            .collect();
        for memory in &snapshot.memories {
            for pool in &memory.pools {
                for page in &pool.pages {
                    labels.extend(
                        page.slices
                            .iter()
                            .filter(|s| s.live)
                            .map(|s| s.label.as_deref()),
                    );
                }
            }
        }
        if labels.len() <= top {
            return None;
        }
        let deepest = labels
            .iter()
            .map(|label| label.map_or(1, |l| l.matches('/').count() + 1))
            .max()
            .unwrap_or(1);
        (1..deepest)
            .rev()
            .find(|&depth| {
                let groups: std::collections::BTreeSet<&str> = labels
                    .iter()
                    .map(|&l| label_group(l, Some(depth)))
                    .collect();
                groups.len() <= top
            })
            .or(Some(1))
    }

    /// The top label groups, largest first (series `0 .. len`).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The depth labels are grouped at (`None`: not grouped).
    pub fn depth(&self) -> Option<usize> {
        self.depth
    }

    /// The series index that gathers every label outside the top: `names().len()`.
    pub fn other(&self) -> usize {
        self.names.len()
    }

    /// Whether some label is outside the top (so the "other" series can hold bytes).
    pub fn has_other(&self) -> bool {
        self.has_other
    }

    /// The number of series: the top groups and "other".
    pub fn series_count(&self) -> usize {
        self.names.len() + 1
    }

    /// The series a label is drawn in; `None` means unlabelled ([`NO_LABEL`](super::NO_LABEL)).
    ///
    /// # Complexity
    /// O(top · label length): the list is short.
    pub fn series(&self, label: Option<&str>) -> usize {
        let group = label_group(label, self.depth);
        self.names
            .iter()
            .position(|name| name == group)
            .unwrap_or(self.other())
    }

    /// A series' name: the label group, or [`OTHER_LABELS`] for [`other`](Self::other) and
    /// beyond.
    pub fn name(&self, series: usize) -> &str {
        self.names
            .get(series)
            .map(String::as_str)
            .unwrap_or(OTHER_LABELS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_management::MemoryReport;
    use crate::report::levels::NO_LABEL;
    use crate::report::snapshot::{
        MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
    };

    #[test]
    fn the_largest_labels_are_kept_and_the_rest_are_other() {
        let labels = TopLabels::rank(
            [
                ("small".to_string(), 1),
                ("big".to_string(), 100),
                ("mid".to_string(), 10),
                (NO_LABEL.to_string(), 10),
            ],
            2,
        );
        assert_eq!(labels.names(), ["big", NO_LABEL]);
        assert!(labels.has_other());
        assert_eq!(labels.series(Some("big")), 0);
        assert_eq!(labels.series(None), 1);
        assert_eq!(labels.series(Some("mid")), labels.other());
        assert_eq!(labels.name(labels.other()), OTHER_LABELS);
        assert_eq!(labels.series_count(), 3);
    }

    #[test]
    fn no_other_when_every_label_fits() {
        let labels = TopLabels::rank([("a".to_string(), 1)], 8);
        assert!(!labels.has_other());
        assert_eq!(labels.names(), ["a"]);
    }

    #[test]
    fn groups_are_the_first_scopes() {
        assert_eq!(label_group(Some("a/b/c"), Some(1)), "a");
        assert_eq!(label_group(Some("a/b/c"), Some(2)), "a/b");
        assert_eq!(label_group(Some("a/b/c"), Some(3)), "a/b/c");
        assert_eq!(label_group(Some("a/b/c"), Some(0)), "a");
        assert_eq!(label_group(Some("a/b/c"), None), "a/b/c");
        assert_eq!(label_group(None, Some(1)), NO_LABEL);
    }

    fn pool(index: usize, slices: &[(&str, u64)]) -> PoolSnapshot {
        let mut offset = 0;
        let slices = slices
            .iter()
            .map(|&(label, size)| {
                offset += size;
                SliceSnapshot::live(offset - size, size, 0).labelled(label)
            })
            .collect();
        PoolSnapshot {
            pool: format!("pool {index}"),
            index,
            pages: vec![PageSnapshot {
                id: index as u64,
                size: offset,
                slices,
            }],
        }
    }

    #[test]
    fn every_pool_gets_its_largest_label_named() {
        let snapshot = MemorySnapshot {
            taken_us: 0,
            memories: vec![MemorySnapshotMemory {
                name: "main".to_string(),
                pools: vec![
                    pool(0, &[("big/a", 1000), ("big/b", 900), ("big/c", 800)]),
                    pool(1, &[("tiny/x", 3), ("tiny/y", 2)]),
                ],
            }],
            history: vec![],
            history_dropped: 0,
            started_unix_us: None,
            budget: None,
            report: MemoryReport { streams: vec![] },
        };
        let labels = TopLabels::from_snapshot(&snapshot, 2, None);
        // By bytes alone the top 2 would be big/a and big/b; pool 1's tiny/x is named.
        assert_eq!(labels.names(), ["big/a", "tiny/x"]);
        assert!(labels.has_other());
        assert_eq!(TopLabels::fitting_depth(&snapshot, 5), None);
        assert_eq!(TopLabels::fitting_depth(&snapshot, 2), Some(1));
        assert_eq!(TopLabels::fitting_depth(&snapshot, 1), Some(1));
        let grouped = TopLabels::from_snapshot(&snapshot, 2, Some(1));
        assert_eq!(grouped.names(), ["big", "tiny"]);
        assert!(!grouped.has_other());
        assert_eq!(grouped.series(Some("big/c")), 0);
    }
}
