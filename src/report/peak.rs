//! What held the memory at one moment: each whole label's bytes in use, so that a picture
//! can say which layer's weights or activations made the peak.

use super::levels::{clamp, deltas, initial_levels, ordered};
use super::snapshot::MemorySnapshot;

/// Each whole label's bytes in use in the main memory just after every event at `time_us`
/// (unlabelled reservations as [`NO_LABEL`](super::NO_LABEL)), labels holding nothing left
/// out, largest first, ties by label.
///
/// The levels are rebuilt as the timeline's are (anchored at the snapshot's live slices),
/// so at [`Timeline::peak_in_use_us`](super::Timeline::peak_in_use_us) they add up to
/// [`Timeline::peak_in_use`](super::Timeline::peak_in_use) exactly when the history agrees
/// with the slices (a label whose level dips below zero is counted as 0).
///
/// # Complexity
/// O(e log e + e log l) for e events and l labels.
pub fn peak_holders(snapshot: &MemorySnapshot, time_us: u64) -> Vec<(String, u64)> {
    let events = ordered(snapshot);
    let (mut levels, _) = initial_levels(snapshot, &events, None);
    for event in events.iter().take_while(|event| event.time_us <= time_us) {
        let (in_use, _) = deltas(event);
        if in_use != 0 {
            let label = super::label_group(event.label.as_deref(), None);
            *levels.entry(label.to_string()).or_default() += in_use;
        }
    }
    let mut holders: Vec<(String, u64)> = levels
        .into_iter()
        .map(|(label, level)| (label, clamp(level)))
        .filter(|(_, bytes)| *bytes > 0)
        .collect();
    holders.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    holders
}
