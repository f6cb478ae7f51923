//! Laying out the parts of a read in one staging range with as few copies as possible.
//!
//! Parts that lie close together in one page (the slices of many small handles, packed
//! by the pools) are copied as one run: one `copy_buffer_to_buffer` covers the run from
//! its first byte to its last, gaps included, and each part is viewed at its own place
//! in the run. A read of 1000 handles of 4 KiB in eight pages is then eight copies, not
//! 1000, which is most of such a read's cost on the GPU.

use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;
use cubecl_runtime::storage::StorageId;

/// Parts at most this many bytes apart in one page share a copy (the gap is copied too).
pub const MAX_COPIED_GAP: u64 = 4096;

/// One part to read: `len` bytes at byte `start` of the page `page`. Pages are named by
/// their storage id, not their buffer: sorting and joining a thousand parts compares
/// integers, and only each run's buffer is looked up afterwards.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source {
    pub(crate) page: StorageId,
    pub(crate) start: u64,
    pub(crate) len: u64,
}

/// One copy: `len` bytes from `start` of the source buffer to `at` in the staging range.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) source: usize,
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) at: u64,
}

/// The copies, each part's (offset in the staging range, length), and the range's bytes.
pub(crate) struct Layout {
    pub(crate) runs: Vec<Run>,
    pub(crate) parts: Vec<(u64, u64)>,
    pub(crate) total: u64,
}

/// Lays out `sources` (in the read's order) in one staging range. `runs[i].source`
/// names the part whose page the run copies from. Zero-size parts take no bytes and
/// no copy.
pub(crate) fn layout(sources: &[Source]) -> Layout {
    layout_with_gap(sources, MAX_COPIED_GAP)
}

/// [`layout`], joining parts of one page into a run only when at most `max_gap` bytes
/// lie between them. With 0, only touching or overlapping parts join, so the range
/// holds at most the parts' lengths rounded up to 4 bytes, summed: a streamed read
/// lays its parts out so to stay within the staging it holds.
pub(crate) fn layout_with_gap(sources: &[Source], max_gap: u64) -> Layout {
    // Sorted by (page, start, read order): the keys sit in the vector itself, and a
    // read whose parts come in page order (the usual case) is one pass over it.
    let mut order: Vec<(StorageId, u64, usize)> = sources
        .iter()
        .enumerate()
        .filter(|(_, source)| source.len > 0)
        .map(|(index, source)| (source.page, source.start, index))
        .collect();
    order.sort_unstable();
    let mut runs: Vec<Run> = Vec::new();
    let mut parts = vec![(0, 0); sources.len()];
    let mut total = 0u64;
    for (_, _, index) in order {
        let source = &sources[index];
        let end = source.start + source.len.next_multiple_of(COPY_ALIGNMENT);
        let joins = runs.last().is_some_and(|run| {
            sources[run.source].page == source.page && source.start <= run.start + run.len + max_gap
        });
        if !joins {
            runs.push(Run {
                source: index,
                start: source.start,
                len: 0,
                at: total,
            });
        }
        let run = runs.last_mut().expect("pushed above when empty");
        let grown = end.max(run.start + run.len) - run.start;
        total += grown - run.len;
        run.len = grown;
        parts[index] = (run.at + (source.start - run.start), source.len);
    }
    Layout { runs, parts, total }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_parts_of_one_page_share_a_copy_and_keep_their_places() {
        let (a, b) = (StorageId::new(), StorageId::new());
        let sources = [
            Source {
                page: a,
                start: 512,
                len: 10,
            },
            Source {
                page: b,
                start: 0,
                len: 8,
            },
            Source {
                page: a,
                start: 0,
                len: 256,
            },
            Source {
                page: a,
                start: 20_000,
                len: 4,
            },
            Source {
                page: a,
                start: 256,
                len: 0,
            },
        ];
        let layout = layout(&sources);
        // Page a: [0, 524) in one run, 20_000 in another; page b: one run.
        assert_eq!(layout.runs.len(), 3);
        let a_run = layout
            .runs
            .iter()
            .find(|run| run.start == 0 && sources[run.source].page == a)
            .unwrap();
        assert_eq!(a_run.len, 524);
        assert_eq!(layout.parts[2], (a_run.at, 256));
        assert_eq!(layout.parts[0], (a_run.at + 512, 10));
        assert_eq!(layout.parts[4].1, 0);
        assert_eq!(layout.total, 524 + 4 + 8);
        // Every part's bytes lie inside the staging range and inside its run.
        for (index, &(at, len)) in layout.parts.iter().enumerate() {
            assert!(at + len <= layout.total, "part {index}");
        }
    }

    #[test]
    fn without_a_gap_only_touching_parts_share_a_copy() {
        let page = StorageId::new();
        let part = |start, len| Source { page, start, len };
        let sources = [part(0, 6), part(8, 4), part(100, 4)];
        let joined = layout(&sources);
        assert_eq!((joined.runs.len(), joined.total), (1, 104));
        let apart = layout_with_gap(&sources, 0);
        assert_eq!(apart.runs.len(), 2, "0..8 and 8..12 touch; 100 is apart");
        assert_eq!(
            apart.total, 16,
            "the parts' lengths rounded up to 4, summed"
        );
        assert_eq!(apart.parts, vec![(0, 6), (8, 4), (12, 4)]);
    }

    #[test]
    fn overlapping_parts_are_copied_once() {
        let page = StorageId::new();
        let sources = [
            Source {
                page,
                start: 0,
                len: 64,
            },
            Source {
                page,
                start: 0,
                len: 64,
            },
            Source {
                page,
                start: 32,
                len: 8,
            },
        ];
        let layout = layout(&sources);
        assert_eq!(layout.runs.len(), 1);
        assert_eq!(layout.total, 64);
        assert_eq!(layout.parts, vec![(0, 64), (0, 64), (32, 8)]);
    }
}
