//! Running out of room: the budget over every memory of a client, what a reservation does
//! when it is refused, and what the server can give back then.

pub(super) mod budget;
pub(super) mod pending;
