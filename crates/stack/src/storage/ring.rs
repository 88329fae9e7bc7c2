//! A bounded FIFO of items: packet queues (frames waiting for neighbour resolution,
//! a listener's accept queue). It never grows past the capacity given at creation: a push
//! into a full ring is refused and hands the item back, so the caller drops and counts it.

use alloc::collections::VecDeque;

/// A bounded first-in first-out queue; storage for `capacity` items is reserved at
/// creation and never reallocated.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    /// An empty ring holding at most `capacity` items.
    pub fn new(capacity: usize) -> Self {
        Ring {
            items: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// The maximum number of items.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Items held.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No items.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// No room for another item.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.items.len() >= self.capacity
    }

    /// Appends `item` at the back.
    ///
    /// # Errors
    /// Gives `item` back when the ring is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        self.items.push_back(item);
        Ok(())
    }

    /// Removes and returns the front item.
    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    /// The front item.
    pub fn peek(&self) -> Option<&T> {
        self.items.front()
    }

    /// The front item, mutably.
    pub fn peek_mut(&mut self) -> Option<&mut T> {
        self.items.front_mut()
    }

    /// Items front to back.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.items.iter()
    }

    /// Keeps only the items for which `keep` returns true, in order.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.items.retain(keep);
    }

    /// Removes all items; the storage is kept.
    pub fn clear(&mut self) {
        self.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_fifo() {
        let mut r = Ring::new(2);
        assert_eq!(r.push(1), Ok(()));
        assert_eq!(r.push(2), Ok(()));
        assert!(r.is_full());
        assert_eq!(r.push(3), Err(3));
        assert_eq!(r.peek(), Some(&1));
        assert_eq!(r.pop(), Some(1));
        assert_eq!(r.push(4), Ok(()));
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 4]);
        r.retain(|&x| x != 2);
        assert_eq!(r.len(), 1);
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn never_reallocates() {
        let mut r = Ring::new(5);
        let cap = r.items.capacity();
        for round in 0..100 {
            while r.push(round).is_ok() {}
            while r.pop().is_some() {}
        }
        assert_eq!(r.items.capacity(), cap);
    }

    #[test]
    fn zero_capacity_refuses() {
        let mut r = Ring::new(0);
        assert!(r.is_full());
        assert_eq!(r.push("x"), Err("x"));
    }
}
