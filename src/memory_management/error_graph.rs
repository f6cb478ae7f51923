//! [`ErrorGraph`]: the failures that still mark some allocation's bytes, with a count of
//! the allocations marked by each.
//!
//! The model: when work fails, the bytes it was meant to write are marked with that
//! failure, since nothing valid was written there. Allocations
//! are the nodes of the dataflow, launches its edges. A failure claims byte ranges of
//! allocations ([`Taint`](super::Taint)); a launch that would read claimed bytes is
//! skipped and its outputs take the same failure (a [`Skipped`] record); a write of the
//! bytes releases the claim. Lifecycle of a failure:
//!
//! 1. [`insert`](ErrorGraph::insert) mints a [`FailureId`] (never reused) with no carrier.
//! 2. Each allocation that takes it counts once ([`Taint::taint`](super::Taint::taint)).
//! 3. Rewrites, releases and frees of those allocations uncount it; at zero carriers the
//!    failure is gone. One that never found a carrier is removed by
//!    [`prune`](ErrorGraph::prune).
//!
//! So the graph holds only failures some live allocation still carries: with every
//! handle dropped (and the memory swept), it is empty.

use cubecl_runtime::memory_management::ManagedMemoryId;
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroU64;

/// The newest [`Skipped`] records kept per failure; older ones are counted, not kept.
pub const MAX_SKIPPED: usize = 16;

/// Names one failure: the value a [`Taint`](super::Taint) stores next to each byte range
/// it marks. Counted up from 1 and never handed out twice (a 64-bit counter outlives any
/// program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FailureId(NonZeroU64);

impl FailureId {
    /// The id's number.
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl core::fmt::Display for FailureId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A record that a kernel was not launched because of a failure: its name, the input
/// whose marked bytes blocked it, and the outputs it would have written (those outputs
/// now carry the same failure). Only ids are stored, so a record keeps no memory alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The kernel's name.
    pub kernel: String,
    /// The claimed input that stopped it.
    pub needed: ManagedMemoryId,
    /// The outputs that took the failure.
    pub produced: Vec<ManagedMemoryId>,
}

/// What a read learns about a buffer whose contents it must not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Some bytes of this allocation are marked with a failure.
    Failed(FailureId, ManagedMemoryId),
    /// The handle has no slice (its reservation failed), so it holds no bytes at all.
    Unallocated(ManagedMemoryId),
}

#[derive(Debug)]
struct Node {
    error: String,
    carriers: u64,
    skipped: VecDeque<Skipped>,
    skipped_total: u64,
}

/// What a read reports about one failure: the root error, how many allocations carry
/// it, and the skipped kernels from the read buffer back to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport {
    /// The failure.
    pub failure: FailureId,
    /// The root error's message (wgpu's own text for a wgpu error).
    pub error: String,
    /// Allocations that carry the failure.
    pub carriers: u64,
    /// One line per skipped kernel, newest first, from the read buffer back to the root;
    /// a last line says when older records were dropped.
    pub chain: Vec<String>,
}

impl core::fmt::Display for FailureReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "failure {} (carried by {} allocation{}): {}",
            self.failure,
            self.carriers,
            if self.carriers == 1 { "" } else { "s" },
            self.error
        )?;
        for hop in &self.chain {
            write!(f, "\n  {hop}")?;
        }
        Ok(())
    }
}

/// The live failures of one memory, each with a count of the allocations marked with it.
#[derive(Debug, Default)]
pub struct ErrorGraph {
    nodes: BTreeMap<FailureId, Node>,
    minted: u64,
}

impl ErrorGraph {
    /// Mints a failure with its error message and no carrier: taint something with it,
    /// or [`prune`](Self::prune) it.
    ///
    /// # Panics
    /// Never in practice: the 64-bit counter would need 2^64 failures.
    pub fn insert(&mut self, error: impl Into<String>) -> FailureId {
        self.minted += 1;
        let id = FailureId(NonZeroU64::new(self.minted).expect("minted from 1 upwards"));
        self.nodes.insert(
            id,
            Node {
                error: error.into(),
                carriers: 0,
                skipped: VecDeque::new(),
                skipped_total: 0,
            },
        );
        id
    }

    /// One more allocation carries `id` (unknown ids are ignored).
    pub(crate) fn tag(&mut self, id: FailureId) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.carriers += 1;
        }
    }

    /// One allocation fewer carries `id`; at zero the failure is gone.
    pub(crate) fn untag(&mut self, id: FailureId) {
        if let Some(node) = self.nodes.get_mut(&id) {
            debug_assert!(node.carriers > 0, "untag of a failure nothing carries");
            node.carriers = node.carriers.saturating_sub(1);
            if node.carriers == 0 {
                self.nodes.remove(&id);
            }
        }
    }

    /// Replaces a failure's error (a provisional one by the real wgpu error).
    pub fn replace(&mut self, id: FailureId, error: impl Into<String>) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.error = error.into();
        }
    }

    /// Removes `id` if nothing carries it.
    pub fn prune(&mut self, id: FailureId) {
        if self.nodes.get(&id).is_some_and(|node| node.carriers == 0) {
            self.nodes.remove(&id);
        }
    }

    /// The error of a failure still held.
    pub fn error(&self, id: FailureId) -> Option<&str> {
        self.nodes.get(&id).map(|node| node.error.as_str())
    }

    /// How many allocations carry `id` (0 when it is gone).
    pub fn carriers(&self, id: FailureId) -> u64 {
        self.nodes.get(&id).map_or(0, |node| node.carriers)
    }

    /// Failures held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no failure is held.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Records a launch `id` stopped, keeping the newest [`MAX_SKIPPED`].
    pub fn skipped(&mut self, id: FailureId, skipped: Skipped) {
        if let Some(node) = self.nodes.get_mut(&id) {
            if node.skipped.len() == MAX_SKIPPED {
                node.skipped.pop_front();
            }
            node.skipped.push_back(skipped);
            node.skipped_total += 1;
        }
    }

    /// The report a read of `memory` gives for failure `id`: the root error, its
    /// carriers, and the chain of skipped kernels from `memory` back towards the root
    /// (each hop found among older records than the one before).
    pub fn report(&self, id: FailureId, memory: ManagedMemoryId) -> Option<FailureReport> {
        let node = self.nodes.get(&id)?;
        let mut chain = Vec::new();
        let mut target = memory;
        let mut older_than = node.skipped.len();
        while let Some(index) = node
            .skipped
            .range(..older_than)
            .rposition(|s| s.produced.contains(&target))
        {
            let record = &node.skipped[index];
            chain.push(format!(
                "kernel `{}` was skipped: its input #{} carried the failure",
                record.kernel, record.needed.value
            ));
            target = record.needed;
            older_than = index;
        }
        let dropped = node.skipped_total - node.skipped.len() as u64;
        if !chain.is_empty() && dropped > 0 {
            chain.push(format!(
                "({dropped} older skipped launches were dropped; the chain may stop short)"
            ));
        }
        Some(FailureReport {
            failure: id,
            error: node.error.clone(),
            carriers: node.carriers,
            chain,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubecl_runtime::memory_management::ManagedMemoryHandle;

    fn id() -> ManagedMemoryId {
        ManagedMemoryHandle::new().binding().id()
    }

    #[test]
    fn failure_is_dropped_with_its_last_carrier() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("boom");
        graph.tag(failure);
        graph.tag(failure);
        graph.untag(failure);
        assert_eq!(graph.carriers(failure), 1);
        graph.untag(failure);
        assert!(graph.is_empty());
    }

    #[test]
    fn minted_ids_keep_counting_after_a_prune() {
        let mut graph = ErrorGraph::default();
        let first = graph.insert("a");
        graph.prune(first);
        let second = graph.insert("b");
        assert_ne!(first, second);
        assert_eq!(second.to_string(), "#2");
    }

    #[test]
    fn prune_keeps_a_failure_that_has_a_carrier() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("a");
        graph.tag(failure);
        graph.prune(failure);
        assert_eq!(graph.len(), 1);
        graph.replace(failure, "real");
        assert_eq!(graph.error(failure), Some("real"));
    }

    #[test]
    fn report_lists_skipped_kernels_from_the_read_buffer_back() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("validation error: binding 3 is missing");
        graph.tag(failure);
        let (a, b, c, unrelated) = (id(), id(), id(), id());
        graph.skipped(
            failure,
            Skipped {
                kernel: "second".into(),
                needed: a,
                produced: vec![b],
            },
        );
        graph.skipped(
            failure,
            Skipped {
                kernel: "third".into(),
                needed: b,
                produced: vec![c],
            },
        );
        let report = graph.report(failure, c).unwrap();
        assert_eq!(report.chain.len(), 2);
        assert!(report.chain[0].contains("third"), "{report}");
        assert!(report.chain[1].contains("second"), "{report}");
        assert!(report.to_string().contains("binding 3 is missing"));
        assert!(report.to_string().contains("#1"));
        assert!(graph.report(failure, unrelated).unwrap().chain.is_empty());
    }

    #[test]
    fn skipped_records_past_the_cap_drop_the_oldest() {
        let mut graph = ErrorGraph::default();
        let failure = graph.insert("root");
        graph.tag(failure);
        let ids: Vec<_> = (0..21).map(|_| id()).collect();
        for hop in 0..20 {
            graph.skipped(
                failure,
                Skipped {
                    kernel: format!("k{hop}"),
                    needed: ids[hop],
                    produced: vec![ids[hop + 1]],
                },
            );
        }
        let report = graph.report(failure, ids[20]).unwrap();
        assert_eq!(report.chain.len(), MAX_SKIPPED + 1);
        assert!(report.chain.last().unwrap().contains("4 older"), "{report}");
    }
}
