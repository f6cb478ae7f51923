//! Writes handed to the queue (`queue.write_buffer`) instead of upload staging: how every
//! write goes on the web.
//!
//! On the web, upload staging cannot come back while the program runs: a staging page is
//! mapped again only in a `map_async` callback, which the browser runs from its event
//! loop, and the client cannot wait for it. A program that writes without yielding would
//! hold one staging page per batch, and never get one back. So there the client holds
//! no upload staging at all: the bytes go to the browser with `queue.write_buffer`, which
//! copies them at once into staging of its own and frees it once the GPU has copied them.
//!
//! The rule that keeps the order: **a write handed to the queue never jumps ahead of
//! recorded work that uses its page.** The queue runs a `write_buffer` before the next
//! submission, so before any work recorded in the open batch, which is submitted later.
//! A write into a page that work recorded in the open batch uses (a launch reading the
//! old bytes of a reused slice, an earlier copy into it) therefore first has the client
//! submit that batch; pages are stamped with the batch they are handed out for (see
//! `storage::wgpu_storage::fences`), so this costs no walk. A stream of writes with no
//! launch between them submits nothing; writes handed to the queue keep their order
//! among themselves.
//!
//! A write covers whole 4-byte words (`COPY_BUFFER_ALIGNMENT`): the aligned middle is one
//! `write_buffer`, and the at most two edge words it covers only in part are merged on
//! the GPU by the edge-merge kernel of [`transfer`](super::transfer), whose records
//! (with the new value of each edge word, read from the caller's bytes on the host) go
//! to a small main-memory slice by `write_buffer` too; the merge itself is recorded in
//! the open batch.
//!
//! The caller's bytes are copied once into host memory of the write's size (freed before
//! the write returns), then handed to the browser, which copies them again.

use super::transfer::{Edge, EdgeRecord, VALUE_OFFSET, edges};
use crate::server::faults::error::ClientError;
use crate::server::launches::launch::PreparedDispatch;
use crate::server::memory::handle::Handle;
use crate::server::{HandleResource, Server, wgpu_error};
use crate::storage::wgpu_storage::error::capture;
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;

/// A write handed to the queue, its one reservation made (see [`Server::queued_write`]).
pub(crate) struct QueuedWrite {
    offset: u64,
    len: u64,
    edges: Vec<Edge>,
    /// The slice the edge records go to, when the write has edge words.
    params: Option<Handle>,
}

/// An edge merge ready to record: nothing of it can fail any more.
struct Merge {
    params: HandleResource,
    dispatch: PreparedDispatch,
}

impl Server {
    /// Whether writes go to the queue (`queue.write_buffer`) rather than through upload
    /// staging: on the web (see the module doc).
    pub(crate) fn queues_writes(&self) -> bool {
        self.web
    }

    /// Checks a write of `len` bytes at byte `offset` of `handle` and makes its one
    /// reservation (the edge records' slice, for a write with edge words); `None` for an
    /// empty write, which writes nothing.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`]; [`ClientError::ForeignHandle`];
    /// [`ClientError::OutOfBounds`] when the range leaves the handle;
    /// [`ClientError::Reserve`] / [`ClientError::Memory`] when the records' slice cannot
    /// be had.
    pub(crate) fn queued_write(
        &mut self,
        handle: &Handle,
        offset: u64,
        len: u64,
    ) -> Result<Option<QueuedWrite>, ClientError> {
        self.begin_write(handle, offset, len)?;
        if len == 0 {
            return Ok(None);
        }
        let edges = edges(offset, len);
        let params = match edges.is_empty() {
            true => None,
            false => Some(self.empty((edges.len() * size_of::<EdgeRecord>()) as u64)?),
        };
        Ok(Some(QueuedWrite {
            offset,
            len,
            edges,
            params,
        }))
    }

    /// Whether work recorded in the open batch uses a page `write` writes (the target's
    /// or the edge records'): the client submits that batch first (see the module doc).
    ///
    /// # Errors
    /// [`ClientError::Memory`] for a stale handle.
    pub(crate) fn queued_write_waits(
        &self,
        handle: &Handle,
        write: &QueuedWrite,
    ) -> Result<bool, ClientError> {
        if !self.pending.records_commands() {
            return Ok(false);
        }
        let storage = self.main.storage_ref();
        for handle in std::iter::once(handle).chain(&write.params) {
            let page = self.main.get_storage(&handle.binding())?.id;
            if storage.in_open_batch(&page) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Fills `write`'s bytes with `fill` into host memory and hands them to `queue`
    /// (the edge merge, if any, joins the open batch). Call it once
    /// [`queued_write_waits`](Self::queued_write_waits) says no, with no reservation
    /// between.
    ///
    /// # Errors
    /// [`ClientError::Memory`] for a stale handle; [`ClientError::PageDestroyed`] for a
    /// page the application destroyed; [`ClientError::Wgpu`] when wgpu refuses the edge
    /// merge. Nothing is written then, and `fill` has not run.
    pub(crate) fn finish_queued_write(
        &mut self,
        queue: &wgpu::Queue,
        handle: &Handle,
        write: QueuedWrite,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<(), ClientError> {
        let QueuedWrite {
            offset,
            len,
            edges,
            params,
        } = write;
        // Everything that can fail comes first: nothing is written on an error.
        let merge = match &params {
            Some(params) => Some(self.prepare_queued_merge(handle, params)?),
            None => None,
        };
        let target = self.resource(handle)?;
        // The write's words as the target's: byte 0 is the first byte of the word that
        // holds the write's first byte.
        let shift = offset % COPY_ALIGNMENT;
        let mut words = vec![0u8; (shift + len).next_multiple_of(COPY_ALIGNMENT) as usize];
        fill(wgpu::WriteOnly::from_mut(
            &mut words[shift as usize..(shift + len) as usize],
        ));
        let (base, end) = (offset - shift, offset + len);
        let (first, last) = (
            offset.next_multiple_of(COPY_ALIGNMENT),
            end / COPY_ALIGNMENT * COPY_ALIGNMENT,
        );
        // Each edge record with its word's new value, read from the host bytes.
        let records: Vec<EdgeRecord> = edges
            .iter()
            .map(|&(mut record, source)| {
                let at = source as usize;
                record[(VALUE_OFFSET / COPY_ALIGNMENT) as usize] =
                    u32::from_le_bytes(words[at..at + 4].try_into().expect("a word"));
                record
            })
            .collect();
        let ((), error) = capture(&self.device, || {
            if first < last {
                queue.write_buffer(
                    &target.buffer,
                    target.offset + first,
                    &words[(first - base) as usize..(last - base) as usize],
                );
            }
            if let Some(merge) = &merge {
                queue.write_buffer(
                    &merge.params.buffer,
                    merge.params.offset,
                    bytemuck::cast_slice(&records),
                );
            }
        });
        if let Some(error) = error {
            return Err(wgpu_error("write", error));
        }
        let binding = handle.binding();
        if let Some(Merge {
            params: _,
            dispatch,
        }) = merge
        {
            self.pending.count_commands(edges.len());
            self.record_dispatch(dispatch, [1, 1, 1]);
            // The merge runs in the batch: its failure claims the write.
            self.pending.output(&binding, offset..end);
        }
        self.pending.queued_write();
        self.main.written(&binding, offset..end);
        tracing::debug!(
            bytes = len,
            offset,
            merged_edges = edges.len(),
            "queued upload"
        );
        Ok(())
    }

    /// The edge merge's pipeline and bind group over `handle` and the records' slice
    /// `params`, and where that slice is; records nothing.
    fn prepare_queued_merge(
        &mut self,
        handle: &Handle,
        params: &Handle,
    ) -> Result<Merge, ClientError> {
        let kernel = self.merge_kernel.clone();
        let dispatch = self
            .prepare_dispatch(&kernel, &[handle, params])
            .map_err(|error| match error {
                ClientError::Wgpu { message, .. } => wgpu_error("write (edge merge)", message),
                other => other,
            })?;
        Ok(Merge {
            params: self.resource(params)?,
            dispatch,
        })
    }
}
