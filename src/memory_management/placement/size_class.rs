//! Size classes of the two-level segregated fit index: byte size -> bin.
//!
//! A bin is a pair `(fl, sl)`:
//! - the first level `fl` is a power-of-two range (a shifted `log2`), one bit
//!   in a 64-bit first-level bitmap;
//! - the second level `sl` splits that range linearly into [`SL_COUNT`] equal
//!   sub-ranges, one bit in a 32-bit second-level bitmap per first level.
//!
//! Sizes below [`SL_COUNT`] bytes are mapped one size per bin (`fl == 0`,
//! `sl == size`), so small sizes are exact. For `size >= SL_COUNT`, with
//! `l = floor(log2(size))`:
//!
//! ```text
//! fl = l - SL_LOG2 + 1                       (1 ..= 59)
//! sl = (size >> (l - SL_LOG2)) - SL_COUNT    (0 ..= 31)
//! bin (fl, sl) holds sizes [(SL_COUNT + sl) << (fl - 1), next bin's min)
//! ```
//!
//! # Waste bound
//!
//! A bin with `fl >= 1` is `2^(fl-1)` bytes wide and its smallest size is at
//! least `SL_COUNT * 2^(fl-1)`, so a bin is at most `1/SL_COUNT` (= 1/32,
//! about 3.1 %) of any size it holds. A request searches from
//! [`size_class_ceil`], i.e. it is rounded up by less than one bin width:
//! less than `size / 32` bytes. That rounding only affects *which* free
//! block is chosen (a free block less than `size / 32` larger than the
//! request may be passed over); the block handed out is split to the exact
//! request, so no bytes are lost inside an allocation.

/// log2 of the number of second-level subdivisions per first level.
pub const SL_LOG2: u32 = 5;
/// Number of second-level subdivisions per first level (32).
pub const SL_COUNT: u32 = 1 << SL_LOG2;
/// Number of first levels in use: `fl` of `u64::MAX` is 59, plus one.
pub const FL_COUNT: u32 = 64 - SL_LOG2 + 1;

/// Smallest size (bytes) filed in bin `(fl, sl)`.
///
/// # Panics
/// Never for bins returned by this module (`fl < FL_COUNT`, `sl < SL_COUNT`).
pub fn bin_min(fl: u32, sl: u32) -> u64 {
    if fl == 0 {
        u64::from(sl)
    } else {
        u64::from(SL_COUNT + sl) << (fl - 1)
    }
}

/// The bin where a free block of `size` bytes is filed: every block in the
/// bin is at least the bin's minimum, which is `<= size` (never overstates).
///
/// # Panics
/// Never; `size == 0` maps to bin `(0, 0)`.
pub fn size_class_floor(size: u64) -> (u32, u32) {
    if size < u64::from(SL_COUNT) {
        return (0, size as u32);
    }
    let l = 63 - size.leading_zeros();
    let shift = l - SL_LOG2;
    let sl = (size >> shift) as u32 - SL_COUNT;
    (shift + 1, sl)
}

/// The first bin where every block is at least `size` bytes, i.e. where a
/// request of `size` bytes searches. `None` when no bin can guarantee it
/// (sizes above the minimum of the highest bin).
///
/// # Panics
/// Never.
pub fn size_class_ceil(size: u64) -> Option<(u32, u32)> {
    let (fl, sl) = size_class_floor(size);
    if bin_min(fl, sl) == size {
        return Some((fl, sl));
    }
    // The floor bin may hold smaller blocks: step to the next bin.
    let (fl, sl) = if sl + 1 < SL_COUNT {
        (fl, sl + 1)
    } else {
        (fl + 1, 0)
    };
    (fl < FL_COUNT).then_some((fl, sl))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Assumption: below SL_COUNT (32) bytes every size has its own bin
    // (fl 0, sl = size), so floor and ceil agree and are exact.
    const SMALL: &[(u64, (u32, u32))] = &[(0, (0, 0)), (1, (0, 1)), (4, (0, 4)), (31, (0, 31))];

    #[test]
    fn small_sizes_are_exact() {
        for &(size, bin) in SMALL {
            assert_eq!(size_class_floor(size), bin, "floor {size}");
            assert_eq!(size_class_ceil(size), Some(bin), "ceil {size}");
        }
    }

    // Assumption: from 32 bytes on, fl = log2(size) - 4 and each power-of-two
    // range is cut into 32 bins; [32, 64) has width 1, [64, 128) width 2,
    // [1024, 2048) width 32. Floor rounds down to the bin start.
    const FLOOR: &[(u64, (u32, u32))] = &[
        (32, (1, 0)),
        (63, (1, 31)),
        (64, (2, 0)),
        (65, (2, 0)),
        (66, (2, 1)),
        (127, (2, 31)),
        (1024, (6, 0)),
        (1055, (6, 0)),
        (1056, (6, 1)),
        (u64::MAX, (59, 31)),
    ];

    #[test]
    fn floor_table() {
        for &(size, bin) in FLOOR {
            assert_eq!(size_class_floor(size), bin, "floor {size}");
            assert!(bin_min(bin.0, bin.1) <= size, "floor overstates {size}");
        }
    }

    // Assumption: ceil equals floor on a bin's exact minimum, else it is the
    // next bin (carrying into the next first level after sl 31), and it is
    // None above the highest bin's minimum (63 << 58).
    const CEIL: &[(u64, Option<(u32, u32)>)] = &[
        (64, Some((2, 0))),
        (65, Some((2, 1))),
        (127, Some((3, 0))),
        (1025, Some((6, 1))),
        (2047, Some((7, 0))),
        (63 << 58, Some((59, 31))),
        ((63 << 58) + 1, None),
        (u64::MAX, None),
    ];

    #[test]
    fn ceil_table() {
        for &(size, bin) in CEIL {
            assert_eq!(size_class_ceil(size), bin, "ceil {size}");
            if let Some((fl, sl)) = bin {
                assert!(bin_min(fl, sl) >= size, "ceil understates {size}");
            }
        }
    }

    // Assumption (waste bound): for size >= 32, the ceil bin's minimum exceeds
    // the request by less than size / 32.
    const WASTE: &[u64] = &[33, 100, 1025, 4097, 1_000_001, 3 << 40];

    #[test]
    fn ceil_rounds_up_by_less_than_one_thirty_second() {
        for &size in WASTE {
            let (fl, sl) = size_class_ceil(size).expect("in range");
            let over = bin_min(fl, sl) - size;
            assert!(over * u64::from(SL_COUNT) < size, "waste {size}: {over}");
        }
    }
}
