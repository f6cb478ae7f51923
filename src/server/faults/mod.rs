//! What goes wrong, and how the client tells it: the errors a caller matches on, a lost
//! device, main-memory pages the application destroyed, and errors the browser reports
//! after the operation returned.

pub(super) mod destroyed;
pub(super) mod error;
pub(super) mod late;
pub(super) mod lost;
