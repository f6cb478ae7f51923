//! [`Ring`]: a list that keeps only its newest entries.

use std::collections::VecDeque;

/// The newest `capacity` entries pushed, oldest first; older ones are dropped.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    entries: VecDeque<T>,
    capacity: usize,
}

impl<T: Clone> Ring<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity,
        }
    }

    /// Appends `entry`, dropping the oldest entries beyond the capacity.
    pub(crate) fn push(&mut self, entry: T) {
        self.entries.push_back(entry);
        self.trim();
    }

    /// Changes the capacity (0 keeps nothing), dropping the oldest entries beyond it.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.trim();
    }

    fn trim(&mut self) {
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
    }

    /// The entries held, oldest first.
    pub(crate) fn to_vec(&self) -> Vec<T> {
        self.entries.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn a_ring_keeps_the_newest_entries() {
        let mut ring = Ring::new(3);
        (0..5).for_each(|i| ring.push(i));
        assert_eq!(ring.to_vec(), vec![2, 3, 4]);
        ring.set_capacity(1);
        assert_eq!(ring.to_vec(), vec![4]);
    }
}
