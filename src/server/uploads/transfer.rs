//! Writes into handles through upload staging, in queue order, with no GPU round trip.
//!
//! wgpu copies whole 4-byte words (`COPY_BUFFER_ALIGNMENT`) at 4-byte offsets. A write
//! is laid into its staging range so that staging words line up with target words; the
//! aligned middle is one buffer copy, and the at most two edge words the write covers
//! only in part are merged on the GPU by a one-invocation kernel
//! (`shaders/merge_edges.wgsl`): the bytes the write covers take the new value, the
//! others keep what the target held at that point of the queue. The new value of an edge
//! word is copied on the GPU from the staging word that holds it, so the host never
//! reads mapped staging memory (which wgpu's write-only views forbid, and which may be
//! write-combined). Nothing is read back, nothing waits.

use super::upload::Region;
use crate::server::faults::error::ClientError;
use crate::server::launches::kernel::Kernel;
use crate::server::memory::handle::Handle;
use crate::server::{Server, wgpu_error};
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;
use std::sync::Arc;

/// One edge word to merge: its index in the target binding, the mask of the bytes the
/// write covers, and the word as written. Laid out as the shader's `Edge`.
pub(super) type EdgeRecord = [u32; 4];

/// An edge to merge: its record (the value word left 0) and the offset, from the start
/// of the write's staging region, of the staging word that holds its new value.
pub(super) type Edge = (EdgeRecord, u64);

impl Server {
    /// The checks every write begins with, and the client operation it counts: the
    /// device is not lost, the handle is this client's, and `[offset, offset + len)`
    /// (bytes) lies inside it.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`]; [`ClientError::ForeignHandle`];
    /// [`ClientError::OutOfBounds`] when the range leaves the handle.
    pub(super) fn begin_write(
        &mut self,
        handle: &Handle,
        offset: u64,
        len: u64,
    ) -> Result<(), ClientError> {
        self.check_lost("write")?;
        self.check_owner(handle, "write")?;
        self.tick();
        if offset.checked_add(len).is_none_or(|end| end > handle.size) {
            return Err(ClientError::OutOfBounds {
                operation: "write",
                offset,
                len,
                size: handle.size,
            });
        }
        Ok(())
    }

    /// Writes `len` bytes at byte `offset` of `handle`, filled by `fill` straight into the
    /// mapped staging range; ordered after every launch and write recorded before and
    /// before every later one.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`]; [`ClientError::OutOfBounds`] when the range leaves
    /// the handle; [`ClientError::Memory`] for a stale handle; [`ClientError::Reserve`]
    /// when the staging memory cannot hold the bytes; [`ClientError::Map`] when the
    /// staging range is not mapped; [`ClientError::Wgpu`] when wgpu refuses the edge
    /// merge.
    pub(crate) fn write_with(
        &mut self,
        handle: &Handle,
        offset: u64,
        len: u64,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<(), ClientError> {
        self.begin_write(handle, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // Everything the write needs is reserved first: a reservation may compact and
        // move the target (or the merge's slice), and an error must leave every byte
        // as it was, so nothing is resolved or recorded before the last reservation.
        let shift = offset % COPY_ALIGNMENT;
        let region = self.upload_region(shift + len)?;
        let edges = edges(offset, len);
        let merge = match edges.is_empty() {
            true => None,
            false => Some(self.reserve_merge(&edges)?),
        };
        // From here on nothing is reserved: the locations resolved below stay true.
        let moves = self.pending.moves_recorded();
        let merge = match merge {
            Some(merge) => Some(self.prepare_merge(handle, merge)?),
            None => None,
        };
        let target = self.resource(handle)?;
        region.fill(shift, len, fill)?;
        self.check_unmoved(moves, "write")?;
        let end = offset + len;
        let (first, last) = (
            offset.next_multiple_of(COPY_ALIGNMENT),
            end / COPY_ALIGNMENT * COPY_ALIGNMENT,
        );
        if first < last {
            let encoder = self.pending.encoder(&self.device);
            encoder.copy_buffer_to_buffer(
                &region.buffer,
                region.offset + shift + (first - offset),
                &target.buffer,
                target.offset + first,
                last - first,
            );
        }
        if let Some(merge) = merge {
            self.record_merge(&region, &edges, merge);
        }
        let binding = handle.binding();
        self.main.written(&binding, offset..end);
        self.pending.output(&binding, offset..end);
        self.pending.count_bytes(len);
        tracing::debug!(bytes = len, offset, merged_edges = edges.len(), "upload");
        Ok(())
    }

    /// Reserves what an edge merge needs (see [`merge_edges`](Self::record_merge)): a
    /// small main-memory slice for the records, and upload staging holding them.
    fn reserve_merge(&mut self, edges: &[Edge]) -> Result<MergeSpace, ClientError> {
        let records: Vec<EdgeRecord> = edges.iter().map(|(record, _)| *record).collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&records).to_vec();
        let params = self.empty(bytes.len() as u64)?;
        let staging = self.upload_region(bytes.len() as u64)?;
        Ok(MergeSpace {
            params,
            staging,
            bytes,
        })
    }

    /// Makes the merge's pipeline and bind group (which can fail) and fills its records'
    /// staging, recording nothing.
    fn prepare_merge(
        &mut self,
        handle: &Handle,
        space: MergeSpace,
    ) -> Result<PreparedMerge, ClientError> {
        let kernel = self.merge_kernel.clone();
        let dispatch = self
            .prepare_dispatch(&kernel, &[handle, &space.params])
            .map_err(|error| match error {
                ClientError::Wgpu { message, .. } => wgpu_error("write (edge merge)", message),
                other => other,
            })?;
        let params = self.resource(&space.params)?;
        let len = space.bytes.len() as u64;
        space
            .staging
            .fill(0, len, |mut target| target.copy_from_slice(&space.bytes))?;
        Ok(PreparedMerge {
            _params: space.params,
            params,
            staging: space.staging,
            len,
            dispatch,
        })
    }

    /// Records the edge merge: the records go through staging into the small slice,
    /// each edge's new value is copied there from the write's staging `data` on the GPU,
    /// and the merge kernel reads the slice beside the target.
    fn record_merge(&mut self, data: &Region, edges: &[Edge], merge: PreparedMerge) {
        let PreparedMerge {
            _params,
            params,
            staging,
            len,
            dispatch,
        } = merge;
        let encoder = self.pending.encoder(&self.device);
        encoder.copy_buffer_to_buffer(
            &staging.buffer,
            staging.offset,
            &params.buffer,
            params.offset,
            len,
        );
        for (index, (_, source)) in edges.iter().enumerate() {
            encoder.copy_buffer_to_buffer(
                &data.buffer,
                data.offset + source,
                &params.buffer,
                params.offset + (index * size_of::<EdgeRecord>()) as u64 + VALUE_OFFSET,
                COPY_ALIGNMENT,
            );
        }
        self.pending.count_commands(edges.len());
        self.record_dispatch(dispatch, [1, 1, 1]);
    }

    /// Fails when a compaction was recorded since `moves`: a location resolved before it
    /// may be stale. Operations reserve everything before they resolve, so this never
    /// fails; it turns a broken order into an error instead of bytes written to the
    /// place a slice left.
    pub(crate) fn check_unmoved(&self, moves: u64, operation: &str) -> Result<(), ClientError> {
        if self.pending.moves_recorded() == moves {
            return Ok(());
        }
        debug_assert!(
            false,
            "{operation}: a slice moved after its location was resolved"
        );
        Err(wgpu_error(
            operation,
            "a slice moved after its location was resolved (a bug of wgpu-memory); nothing was recorded",
        ))
    }
}

/// What an edge merge reserved: the records' slice, their staging, and their bytes.
struct MergeSpace {
    params: Handle,
    staging: Region,
    bytes: Vec<u8>,
}

/// An edge merge ready to record: nothing of it can fail any more.
struct PreparedMerge {
    /// Keeps the records' slice alive until the batch is recorded (the batch's bind
    /// group holds it after).
    _params: Handle,
    params: crate::server::HandleResource,
    staging: Region,
    len: u64,
    dispatch: crate::server::launches::launch::PreparedDispatch,
}

impl Server {
    /// Records a copy within `handle`'s page whose source and destination overlap: valid
    /// to record, refused by wgpu when the batch is finished. Tests use it to fail a
    /// whole batch.
    #[cfg(test)]
    pub(crate) fn record_overlapping_copy(&mut self, handle: &Handle) -> Result<(), ClientError> {
        let target = self.resource(handle)?;
        self.pending.encoder(&self.device).copy_buffer_to_buffer(
            &target.buffer,
            target.offset,
            &target.buffer,
            target.offset + 4,
            8,
        );
        Ok(())
    }
}

/// The edge-merge kernel (`shaders/merge_edges.wgsl`).
pub(crate) fn merge_kernel() -> Kernel {
    Kernel::new(
        "wgpu-memory edge merge",
        Arc::<str>::from(include_str!("../../../shaders/merge_edges.wgsl")),
        "merge_edges",
    )
}

/// Byte offset of the value word in an [`EdgeRecord`].
pub(super) const VALUE_OFFSET: u64 = 8;

/// The edge words a write of `len` bytes at `offset` covers only in part, as merge
/// records with the staging word of each one's new value. The write's staging region
/// lines its words up with the target's: the target word of the write's first byte is
/// the region's first word.
pub(super) fn edges(offset: u64, len: u64) -> Vec<Edge> {
    let end = offset + len;
    let head_word = offset / COPY_ALIGNMENT;
    let tail_word = (end - 1) / COPY_ALIGNMENT;
    let staging_word = |word: u64| (word - head_word) * COPY_ALIGNMENT;
    let mut edges = Vec::with_capacity(2);
    let shift = offset % COPY_ALIGNMENT;
    if shift != 0 {
        let covered_end = if tail_word == head_word {
            end - head_word * COPY_ALIGNMENT
        } else {
            COPY_ALIGNMENT
        };
        edges.push((
            record(head_word, shift..covered_end),
            staging_word(head_word),
        ));
    }
    let tail_partial = !end.is_multiple_of(COPY_ALIGNMENT);
    if tail_partial && !(shift != 0 && tail_word == head_word) {
        edges.push((
            record(tail_word, 0..end % COPY_ALIGNMENT),
            staging_word(tail_word),
        ));
    }
    edges
}

/// A merge record for `word`, covering bytes `covered` of it (0..4, little-endian); its
/// value is copied in on the GPU.
fn record(word: u64, covered: std::ops::Range<u64>) -> EdgeRecord {
    let mask = covered.fold(0u32, |mask, byte| mask | (0xff << (8 * byte)));
    [word as u32, mask, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aligned_write_merges_nothing() {
        assert!(edges(8, 16).is_empty());
    }

    #[test]
    fn a_write_inside_one_word_merges_that_word_once() {
        assert_eq!(edges(5, 2), vec![([1, 0x00ff_ff00, 0, 0], 0)]);
    }

    #[test]
    fn an_unaligned_write_merges_its_head_and_tail_words() {
        // Bytes 3..10: head word 0 covers byte 3, tail word 2 covers bytes 8 and 9; the
        // tail's value is the region's third word.
        assert_eq!(
            edges(3, 7),
            vec![([0, 0xff00_0000, 0, 0], 0), ([2, 0x0000_ffff, 0, 0], 8)]
        );
    }

    #[test]
    fn a_write_ending_unaligned_merges_only_its_tail() {
        assert_eq!(edges(4, 5), vec![([2, 0xff, 0, 0], 4)]);
    }

    #[test]
    fn the_value_offset_is_the_shader_edge_value_field() {
        let shader = include_str!("../../../shaders/merge_edges.wgsl");
        let fields: Vec<&str> = shader
            .split("struct Edge {")
            .nth(1)
            .and_then(|rest| rest.split('}').next())
            .map(|body| body.split(',').map(str::trim).collect())
            .unwrap_or_default();
        assert_eq!(fields[(VALUE_OFFSET / 4) as usize], "value: u32");
    }
}
