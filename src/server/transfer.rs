//! Writes into handles: `COPY_BUFFER_ALIGNMENT` rounding without touching a neighbour's
//! bytes, and ordering against launches.

use super::fence::WgpuFence;
use super::{Server, wgpu_error};
use crate::client::{ClientError, Handle};
use crate::storage::wgpu_storage::error::capture;
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;

impl Server {
    /// Writes `data` at byte `offset` of `handle`.
    ///
    /// `queue.write_buffer` needs offsets and sizes in multiples of 4
    /// (`wgpu::COPY_BUFFER_ALIGNMENT`). The write is widened to whole 4-byte words; bytes
    /// of the handle that the widening covers but `data` does not are read back first and
    /// written unchanged, and bytes past the handle's size are its own slice's padding.
    /// Writes are staged by wgpu until the next submit, and every launch submits, so a
    /// write, a launch reading it, and a second write keep their order.
    pub(crate) fn write(
        &mut self,
        handle: &Handle,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        let len = data.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > handle.size) {
            return Err(ClientError::OutOfBounds {
                operation: "write",
                offset,
                len,
                size: handle.size,
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        let start = offset / COPY_ALIGNMENT * COPY_ALIGNMENT;
        let end = (offset + len).next_multiple_of(COPY_ALIGNMENT);
        let mut words = vec![0u8; (end - start) as usize];
        self.keep_edges(handle, offset, len, start, end, &mut words)?;
        words[(offset - start) as usize..(offset - start + len) as usize].copy_from_slice(data);
        let resource = self.resource(handle)?;
        let ((), error) = capture(&self.device, || {
            self.queue
                .write_buffer(&resource.buffer, resource.offset + start, &words);
        });
        // A write scope: written bytes are claimed by no failure any more; bytes a refused
        // write left unwritten are claimed by its error.
        let range = offset..offset + len;
        if let Some(error) = error {
            let error = wgpu_error("write", error);
            let graph = self.main.error_graph_mut();
            let failure = graph.insert(error.to_string());
            self.main.taint(&handle.binding(), range, failure);
            self.main.error_graph_mut().prune(failure);
            return Err(error);
        }
        self.main.written(&handle.binding(), range);
        self.hold_upload(words);
        Ok(())
    }

    /// Keeps an upload's bytes until the device consumed them, and bounds what is held:
    /// when the flushing policy says so (64 writes or 64 MiB by default), the writes wgpu
    /// staged are submitted, and the batch before them is waited for and released.
    fn hold_upload(&mut self, words: Vec<u8>) {
        let bytes = words.len() as u64;
        self.uploads.push(words, bytes);
        if self.uploads.should_flush() {
            let submission = self.queue.submit([]);
            let device = self.device.clone();
            self.uploads
                .flush(move || WgpuFence::new(device, submission));
        }
    }

    /// Fills the edge words of a widened write with the handle's current bytes where the
    /// widening covers bytes of the handle that the write does not.
    fn keep_edges(
        &mut self,
        handle: &Handle,
        offset: u64,
        len: u64,
        start: u64,
        end: u64,
        words: &mut [u8],
    ) -> Result<(), ClientError> {
        if offset > start {
            let head = self.read_range_blocking(handle, start, COPY_ALIGNMENT)?;
            words[..head.len()].copy_from_slice(&head);
        }
        let tail_start = end - COPY_ALIGNMENT;
        let tail_kept =
            !(offset + len).is_multiple_of(COPY_ALIGNMENT) && offset + len < handle.size;
        // When head and tail are one word and the head was read, that word is complete.
        let tail_read_already = tail_start == start && offset > start;
        if tail_kept && !tail_read_already {
            let tail = self.read_range_blocking(handle, tail_start, COPY_ALIGNMENT)?;
            let at = (tail_start - start) as usize;
            words[at..at + tail.len()].copy_from_slice(&tail);
        }
        Ok(())
    }
}
