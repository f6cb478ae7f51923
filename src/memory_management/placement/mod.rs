//! Placement: byte ranges inside pages, and nothing else.
//!
//! Knows no storage and no handle: a pool hands it regions (its pages, by index) and asks
//! for offsets. [`Tlsf`] keeps the free space of every page of a pool in two-level
//! size-class bitmaps, so a reservation and a free cost O(1), free neighbours merge at
//! once, and a failed placement in a fragmented page looks at no slice.

mod size_class;
mod tlsf;

pub(crate) use tlsf::{BlockId, Tlsf};
