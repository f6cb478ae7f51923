//! Reads streamed through one bounded staging slice: the parts of a read too large for
//! the room the budget leaves, cut into pieces that each fit the slice, and the
//! recording of one such piece set into the slice.
//!
//! The client reserves one staging slice of at most the room left, then for each piece
//! set records its copies into the start of that slice ([`Server::start_read_into`]),
//! submits, waits for the map, copies the bytes out to host memory and unmaps, before
//! the next (see `Client::read`). Pieces are cut at multiples of 4 bytes (wgpu copies
//! whole words) and laid out without gaps, so a piece set never needs more staging than
//! the slice holds.

use super::read_plan::{self, Layout};
use super::readback::ReadPlan;
use crate::server::Server;
use crate::server::faults::error::ClientError;
use crate::server::memory::handle::Handle;
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;
use cubecl_runtime::memory_management::ManagedMemoryHandle;

/// Bytes `[offset, offset + len)` of the `part`-th part of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) part: usize,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// The staging a piece of `len` bytes takes: `len` rounded up to 4.
fn staged(len: u64) -> u64 {
    len.next_multiple_of(COPY_ALIGNMENT)
}

/// The staging slice a streamed read of parts of `lens` bytes holds, given `room` bytes
/// (a multiple of `unit`, itself a multiple of 4): the parts' staged bytes cut into as
/// few sets as `room` allows, as even as `unit` allows, so every set (the last
/// included) takes a slice of about the same size.
pub(crate) fn streamed_slice(lens: &[u64], room: u64, unit: u64) -> u64 {
    let total: u64 = lens.iter().map(|&len| staged(len)).sum();
    let room = room.min(total.next_multiple_of(unit));
    if room == 0 {
        return 0;
    }
    let sets = total.div_ceil(room);
    total.div_ceil(sets).next_multiple_of(unit).min(room)
}

/// The pieces of parts of `lens` bytes, in order, in sets of at most `slice` staged
/// bytes (a multiple of 4, at least 4): every set but the last is filled exactly, a part
/// is cut at a multiple of 4 bytes where a set ends, and a zero-size part has no piece.
/// Holds one entry per piece: the parts plus one per set.
pub(crate) fn piece_sets(lens: &[u64], slice: u64) -> Vec<Vec<Piece>> {
    debug_assert!(slice >= COPY_ALIGNMENT && slice.is_multiple_of(COPY_ALIGNMENT));
    let mut sets: Vec<Vec<Piece>> = Vec::new();
    let mut left = 0u64;
    for (part, &len) in lens.iter().enumerate() {
        let mut offset = 0;
        while offset < len {
            if left == 0 {
                sets.push(Vec::new());
                left = slice;
            }
            let rest = len - offset;
            // The part's end fits when its staged bytes do (`left` is a multiple of 4).
            let take = if staged(rest) <= left { rest } else { left };
            sets.last_mut().expect("pushed above").push(Piece {
                part,
                offset,
                len: take,
            });
            offset += take;
            left -= staged(take);
        }
    }
    sets
}

impl Server {
    /// Records the copies of `parts` (handle, byte offset, byte length; offsets
    /// multiples of 4) into the start of the staging slice `staging`, laid out without
    /// gaps: a piece set of a streamed read. Reserves nothing.
    ///
    /// # Errors
    /// As [`start_read`](Self::start_read), but never out of room; an internal error
    /// (`ClientError::Map`) when the parts need more than the slice holds.
    pub(crate) fn start_read_into(
        &mut self,
        parts: &[(&Handle, u64, u64)],
        staging: &ManagedMemoryHandle,
    ) -> Result<ReadPlan, ClientError> {
        self.check_lost("read")?;
        let sources = self.read_sources(parts)?;
        let pins = self.pin_all(parts.iter().map(|(handle, _, _)| *handle));
        let layout: Layout = read_plan::layout_with_gap(&sources, 0);
        let held = self.staging.get_storage(&staging.clone().binding())?.size();
        if layout.total > held {
            return Err(ClientError::Map {
                size: layout.total,
                message: format!(
                    "a streamed read's pieces need {} bytes of staging; the slice holds {held}",
                    layout.total
                ),
            });
        }
        let buffers = self.run_pages(&sources, &layout.runs)?;
        self.idle.readback_used();
        self.record_read(layout, &buffers, staging.clone(), pins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte of every part is in exactly one piece, in order, and no set takes
    /// more staging than the slice.
    fn check(lens: &[u64], slice: u64) -> Vec<Vec<Piece>> {
        let sets = piece_sets(lens, slice);
        let mut next = vec![0u64; lens.len()];
        for set in &sets {
            assert!(!set.is_empty());
            let staged_bytes: u64 = set.iter().map(|piece| staged(piece.len)).sum();
            assert!(staged_bytes <= slice, "{staged_bytes} > {slice}");
            for piece in set {
                assert_eq!(piece.offset, next[piece.part], "{piece:?}");
                assert_eq!(piece.offset % 4, 0, "{piece:?}");
                next[piece.part] += piece.len;
            }
        }
        assert_eq!(next, lens);
        sets
    }

    #[test]
    fn parts_are_cut_at_words_into_full_sets() {
        let sets = check(&[10, 0, 7, 30], 16);
        // Staged: 12 + 8 + 32 = 52 bytes: three full sets of 16 and one of 4.
        assert_eq!(sets.len(), 4);
        assert_eq!(
            sets[0],
            vec![
                Piece {
                    part: 0,
                    offset: 0,
                    len: 10
                },
                Piece {
                    part: 2,
                    offset: 0,
                    len: 4
                },
            ]
        );
        assert_eq!(
            sets[1][0],
            Piece {
                part: 2,
                offset: 4,
                len: 3
            }
        );
        check(&[1 << 20, 3, (1 << 20) + 5], 64 << 10);
        check(&[4; 100], 8);
        assert!(piece_sets(&[0, 0], 8).is_empty());
    }

    #[test]
    fn the_slice_is_the_room_or_an_even_cut_below_it() {
        // 10 MiB in 4 MiB of room: three sets of about 3.34 MiB.
        let slice = streamed_slice(&[10 << 20], 4 << 20, 8);
        assert_eq!(slice, (10u64 << 20).div_ceil(3).next_multiple_of(8));
        assert_eq!(piece_sets(&[10 << 20], slice).len(), 3);
        // A read that fits takes no more than it needs.
        assert_eq!(streamed_slice(&[5, 6], 1 << 20, 8), 16);
        assert_eq!(streamed_slice(&[5], 0, 8), 0);
        assert_eq!(streamed_slice(&[0], 1 << 20, 8), 0);
    }
}
