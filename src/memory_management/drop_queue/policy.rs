//! When to flush the drop queue: two limits, and the running count checked against them.
//!
//! The policy only advises. It never flushes, never waits and never sees a fence; the
//! queue ([`PendingDropQueue`](super::PendingDropQueue)) asks it, and the caller decides
//! when to act on the answer.

/// When a [`PendingDropQueue`](super::PendingDropQueue) should be flushed: after
/// `max_entries` items **or** `max_bytes` bytes were staged since the last flush,
/// whichever comes first.
///
/// Lower limits free memory sooner but mint a fence (one more point on the queue timeline)
/// more often; higher limits hold more memory between flushes. A limit of `0` advises a
/// flush on every check; a limit of `u64::MAX` never triggers in practice (a count only
/// reaches it by saturating), so it disables that limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlushingPolicy {
    /// Staged items (a count, not bytes) at which a flush is advised. Default `64`.
    pub max_entries: u64,
    /// Staged bytes at which a flush is advised. Default `64 MiB` (`67_108_864`).
    pub max_bytes: u64,
}

impl FlushingPolicy {
    /// The default item limit: 64 staged items.
    pub const DEFAULT_MAX_ENTRIES: u64 = 64;
    /// The default byte limit: 64 MiB staged.
    pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

    /// A policy that advises a flush after `max_entries` staged items (a count) or
    /// `max_bytes` staged bytes, whichever comes first.
    ///
    /// # Panics
    ///
    /// Never: every pair of limits is valid (see the type's doc for `0` and `u64::MAX`).
    pub const fn new(max_entries: u64, max_bytes: u64) -> Self {
        Self {
            max_entries,
            max_bytes,
        }
    }

    /// Whether `entries` staged items holding `bytes` staged bytes reach either limit.
    ///
    /// # Panics
    ///
    /// Never.
    pub const fn should_flush(&self, entries: u64, bytes: u64) -> bool {
        entries >= self.max_entries || bytes >= self.max_bytes
    }
}

impl Default for FlushingPolicy {
    /// 64 items or 64 MiB, whichever comes first.
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_ENTRIES, Self::DEFAULT_MAX_BYTES)
    }
}

/// What was staged since the last flush, checked against a [`FlushingPolicy`].
///
/// Invariant: `entries` and `bytes` only grow between two [`reset`](Self::reset)s, and
/// saturate at `u64::MAX` instead of overflowing (upstream regression #1359 was an
/// overflow panic when nothing reset the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StagedCount {
    policy: FlushingPolicy,
    /// Items staged since the last reset (a count).
    entries: u64,
    /// Bytes staged since the last reset.
    bytes: u64,
}

impl StagedCount {
    /// An empty count checked against `policy`.
    pub(crate) const fn new(policy: FlushingPolicy) -> Self {
        Self {
            policy,
            entries: 0,
            bytes: 0,
        }
    }

    /// Counts one more staged item of `bytes` bytes, saturating.
    pub(crate) fn record(&mut self, bytes: u64) {
        self.entries = self.entries.saturating_add(1);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Whether the policy advises a flush now.
    pub(crate) const fn should_flush(&self) -> bool {
        self.policy.should_flush(self.entries, self.bytes)
    }

    /// Back to zero items and zero bytes; the policy is kept.
    pub(crate) fn reset(&mut self) {
        self.entries = 0;
        self.bytes = 0;
    }

    /// Items staged since the last reset.
    pub(crate) const fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes staged since the last reset.
    pub(crate) const fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The limits this count is checked against.
    pub(crate) const fn policy(&self) -> FlushingPolicy {
        self.policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn default_is_64_entries_or_64_mib() {
        let policy = FlushingPolicy::default();
        assert_eq!(policy, FlushingPolicy::new(64, 64 * MIB));
    }

    #[test]
    fn count_threshold_advises_a_flush() {
        let mut count = StagedCount::new(FlushingPolicy::new(3, u64::MAX));
        count.record(1);
        count.record(1);
        assert!(!count.should_flush(), "2 of 3 entries");
        count.record(1);
        assert!(count.should_flush(), "3 of 3 entries");
        assert_eq!((count.entries(), count.bytes()), (3, 3));
    }

    #[test]
    fn byte_threshold_advises_a_flush() {
        let mut count = StagedCount::new(FlushingPolicy::new(u64::MAX, 100));
        count.record(99);
        assert!(!count.should_flush(), "99 of 100 bytes");
        count.record(1);
        assert!(count.should_flush(), "100 of 100 bytes");
        assert_eq!(count.entries(), 2);
    }

    #[test]
    fn whichever_limit_comes_first_wins() {
        let policy = FlushingPolicy::new(4, 1000);

        // Bytes first: one large item.
        let mut by_bytes = StagedCount::new(policy);
        by_bytes.record(1000);
        assert!(by_bytes.should_flush());
        assert_eq!(by_bytes.entries(), 1);

        // Entries first: four tiny items.
        let mut by_entries = StagedCount::new(policy);
        for _ in 0..3 {
            by_entries.record(1);
            assert!(!by_entries.should_flush());
        }
        by_entries.record(1);
        assert!(by_entries.should_flush());
        assert_eq!(by_entries.bytes(), 4);
    }

    #[test]
    fn default_policy_flushes_after_64_entries_or_64_mib() {
        let mut entries = StagedCount::new(FlushingPolicy::default());
        for _ in 0..63 {
            entries.record(1024);
        }
        assert!(!entries.should_flush(), "63 entries of 1 KiB");
        entries.record(1024);
        assert!(entries.should_flush(), "64 entries");

        let mut bytes = StagedCount::new(FlushingPolicy::default());
        bytes.record(64 * MIB - 1);
        assert!(!bytes.should_flush(), "one byte under 64 MiB");
        bytes.record(1);
        assert!(bytes.should_flush(), "64 MiB in 2 entries");
    }

    #[test]
    fn counters_saturate_at_u64_max() {
        let mut count = StagedCount::new(FlushingPolicy::new(u64::MAX, u64::MAX));
        count.record(u64::MAX - 1);
        count.record(5);
        assert_eq!(count.bytes(), u64::MAX);
        count.record(u64::MAX);
        assert_eq!(count.bytes(), u64::MAX);
        assert_eq!(count.entries(), 3);

        let mut entries = StagedCount {
            entries: u64::MAX,
            ..StagedCount::new(FlushingPolicy::default())
        };
        entries.record(0);
        assert_eq!(entries.entries(), u64::MAX);
    }

    #[test]
    fn reset_clears_counts_and_keeps_the_policy() {
        let policy = FlushingPolicy::new(2, 10);
        let mut count = StagedCount::new(policy);
        count.record(7);
        count.record(7);
        assert!(count.should_flush());
        count.reset();
        assert_eq!((count.entries(), count.bytes()), (0, 0));
        assert!(!count.should_flush());
        assert_eq!(count.policy(), policy);
    }

    #[test]
    fn zero_limit_always_advises() {
        let count = StagedCount::new(FlushingPolicy::new(0, u64::MAX));
        assert!(count.should_flush());
    }
}
