//! The labels a picture names one by one; the rest are drawn together as "other".

use super::snapshot::MemorySnapshot;
use super::timeline::label_peaks;

/// What a reservation made outside every label scope is drawn as.
pub const NO_LABEL: &str = "(no label)";

/// What the labels outside the top ones are drawn as, together.
pub const OTHER_LABELS: &str = "other";

/// The top labels, ranked, and the series index of any label.
///
/// Series `0 .. names().len()` are the top labels, largest first; series
/// [`other`](Self::other) (the last, `names().len()`) gathers every other label. Both
/// pictures colour a series the same way, so a label keeps its colour from one to the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopLabels {
    names: Vec<String>,
    has_other: bool,
}

impl TopLabels {
    /// Keeps the `top` labels with the largest bytes, ties broken by name; `ranked` gives each
    /// label (`None` for unlabelled, drawn as [`NO_LABEL`]) with its bytes. Labels with 0 bytes
    /// are still ranked (after the others).
    pub fn rank(ranked: impl IntoIterator<Item = (String, u64)>, top: usize) -> TopLabels {
        let mut all: Vec<(String, u64)> = ranked.into_iter().collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.dedup_by(|a, b| a.0 == b.0);
        let has_other = all.len() > top;
        all.truncate(top);
        TopLabels {
            names: all.into_iter().map(|(name, _)| name).collect(),
            has_other,
        }
    }

    /// The `top` labels of a snapshot, ranked by their peak bytes in use over the history
    /// and the snapshot's live slices (see [`label_peaks`]).
    pub fn from_snapshot(snapshot: &MemorySnapshot, top: usize) -> TopLabels {
        TopLabels::rank(label_peaks(snapshot), top)
    }

    /// The top labels, largest first (series `0 .. len`).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The series index that gathers every label outside the top: `names().len()`.
    pub fn other(&self) -> usize {
        self.names.len()
    }

    /// Whether some label is outside the top (so the "other" series can hold bytes).
    pub fn has_other(&self) -> bool {
        self.has_other
    }

    /// The number of series: the top labels and "other".
    pub fn series_count(&self) -> usize {
        self.names.len() + 1
    }

    /// The series a label is drawn in; `None` means unlabelled ([`NO_LABEL`]).
    ///
    /// # Complexity
    /// O(top): the list is short.
    pub fn series(&self, label: Option<&str>) -> usize {
        let label = label.unwrap_or(NO_LABEL);
        self.names
            .iter()
            .position(|name| name == label)
            .unwrap_or(self.other())
    }

    /// A series' name: the label, or [`OTHER_LABELS`] for [`other`](Self::other) and beyond.
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
}
