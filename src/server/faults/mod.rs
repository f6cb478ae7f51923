//! What goes wrong, and how the client tells it: the errors a caller matches on, a lost
//! device, and main-memory pages the application destroyed.

pub(super) mod destroyed;
pub(super) mod error;
pub(super) mod lost;
