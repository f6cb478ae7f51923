//! Reads larger than the room the budget leaves: streamed through one bounded staging
//! slice, piece set by piece set, into host memory.
//!
//! A read needs staging for all its bytes at once (one slice, one map). When the budget
//! refuses that even after every free page went back, the read is streamed instead: one
//! staging slice of at most the room left (at least [`MIN_STREAMED_PART`]) is reserved,
//! and the parts, cut into sets that fit it, are copied through it one set at a time
//! (record, submit, map, copy out, unmap). Each part's bytes are assembled in host
//! memory of its own, and the read still answers one `ReadBytes` per part. A streamed
//! read costs a round trip to the device per set and a host copy of every byte.

use super::Client;
use crate::server::{
    ClientError, Handle, ReadBytes, ReadFuture, Server, piece_sets, streamed_slice,
};

/// The smallest staging slice a streamed read takes, in bytes: 64 KiB. A read that the
/// budget refuses while less than this is left under it fails with
/// [`ClientError::OutOfMemory`] instead of streaming (it would take a round trip to the
/// device per 64 KiB).
pub const MIN_STREAMED_PART: u64 = 64 << 10;

/// What a streamed read may assemble: each part's bytes in 4-byte words (so they are
/// 4-byte aligned), filled piece by piece.
struct Assembly {
    words: Vec<Vec<u32>>,
    lens: Vec<u64>,
}

impl Assembly {
    fn new(lens: Vec<u64>) -> Self {
        Self {
            words: lens
                .iter()
                .map(|&len| vec![0u32; len.div_ceil(4) as usize])
                .collect(),
            lens,
        }
    }

    /// Copies `bytes` to byte `offset` of part `part`.
    fn fill(&mut self, part: usize, offset: u64, bytes: &[u8]) {
        let target: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words[part]);
        target[offset as usize..][..bytes.len()].copy_from_slice(bytes);
    }

    fn finish(self) -> Vec<ReadBytes> {
        self.words
            .into_iter()
            .zip(self.lens)
            .map(|(words, len)| match len {
                0 => ReadBytes::empty(),
                len => ReadBytes::host(words.into_boxed_slice(), len as usize),
            })
            .collect()
    }
}

impl Client {
    /// A read of `parts` (handle, offset, length; offsets multiples of 4) that the budget
    /// refused whole, streamed through one staging slice of at most the room the budget
    /// leaves; `None` when less than [`MIN_STREAMED_PART`] is left (the refusal stands).
    ///
    /// Blocks the calling thread until every set is copied out (native only: the web
    /// awaits [`stream_read_async`](Self::stream_read_async)). Holds no lock of ours
    /// while it waits: work other threads record meanwhile on the same handles may land
    /// between two sets.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn stream_read(
        &self,
        parts: &[(&Handle, u64, u64)],
    ) -> Option<Result<Vec<ReadBytes>, ClientError>> {
        pollster::block_on(self.stream_read_async(parts))
    }

    /// [`stream_read`](Self::stream_read) as a future: each set's map is awaited in
    /// turn, and nothing else is. Work recorded meanwhile on the same handles, on any
    /// thread or task, may land between two sets.
    pub(super) async fn stream_read_async(
        &self,
        parts: &[(&Handle, u64, u64)],
    ) -> Option<Result<Vec<ReadBytes>, ClientError>> {
        let lens: Vec<u64> = parts.iter().map(|(_, _, len)| *len).collect();
        let unit = wgpu::MAP_ALIGNMENT;
        let mut room = self.budget().left()?;
        let (staging, slice) = loop {
            let slice = streamed_slice(&lens, room / unit * unit, unit);
            if slice < MIN_STREAMED_PART {
                return None;
            }
            let (reserved, refusal) = self.retry_over_budget(
                || self.shared.server.lock().reserve_readback(slice),
                || true,
            );
            match reserved {
                Ok(staging) => break (staging, slice),
                // Another thread took some of the room meanwhile: half as much.
                Err(ClientError::Reserve(error)) if error.is_out_of_room() && refusal.is_some() => {
                    room = slice / 2;
                }
                Err(error) => return Some(self.explain_budget(Err(error), refusal)),
            }
        };
        tracing::debug!(
            bytes = lens.iter().sum::<u64>(),
            slice,
            "a read over the room the budget leaves, streamed"
        );
        let mut assembly = Assembly::new(lens);
        for set in piece_sets(&assembly.lens, slice) {
            let pieces: Vec<(&Handle, u64, u64)> = set
                .iter()
                .map(|piece| {
                    let (handle, offset, _) = parts[piece.part];
                    (handle, offset + piece.offset, piece.len)
                })
                .collect();
            let started = self.record_and_submit(&pieces, |server: &mut Server| {
                server.start_read_into(&pieces, &staging).map(Some)
            });
            let read = ReadFuture::new(
                started,
                pieces.len(),
                self.shared.poller.clone(),
                self.shared.device.clone(),
                self.shared.lost.clone(),
            )
            .await;
            let views = match read {
                Ok(views) => views,
                Err(error) => return Some(Err(error)),
            };
            for (piece, view) in set.iter().zip(&views) {
                assembly.fill(piece.part, piece.offset, view);
            }
            // The views go here: the staging slice is unmapped before the next set's
            // copies are recorded into it.
        }
        drop(staging);
        Some(Ok(assembly.finish()))
    }
}
