//! Generation-checked slots: the storage behind UDP and ICMP handles.
//!
//! A handle is a slot index plus the generation the slot had when the socket was put
//! there. Removing a socket bumps the slot's generation, so a handle kept past its
//! socket's removal never reaches the socket that reuses the slot: every lookup checks
//! the generation and a stale handle gets `None` (the caller's error), never a panic.
//! (TCP's `SocketHandle` follows the same scheme inside `tcp::layer`.)
//!
//! Invariants: at most `limit` sockets; `free` lists exactly the empty slots; each
//! slot's `queued` flag is set while its index waits in the owner's event queue, so a
//! socket is queued at most once.

use alloc::vec::Vec;

/// Index and generation of an occupied slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Handle {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

#[derive(Debug, Clone)]
struct Slot<T> {
    generation: u32,
    queued: bool,
    item: Option<T>,
}

/// Sockets of one kind, found by [`Handle`].
#[derive(Debug, Clone)]
pub(crate) struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    limit: usize,
}

impl<T> Slots<T> {
    /// Room for `limit` sockets, allocated now.
    pub(crate) fn new(limit: usize) -> Self {
        Slots {
            slots: Vec::with_capacity(limit),
            free: Vec::with_capacity(limit),
            limit,
        }
    }

    /// Whether another socket fits.
    pub(crate) fn has_room(&self) -> bool {
        !self.free.is_empty() || self.slots.len() < self.limit
    }

    /// Stores `item`; `None` when full. The lowest free slot is reused first.
    pub(crate) fn insert(&mut self, item: T) -> Option<Handle> {
        let index = match self.free.iter().enumerate().min_by_key(|(_, i)| **i) {
            Some((pos, _)) => self.free.swap_remove(pos),
            None if self.slots.len() < self.limit => {
                self.slots.push(Slot {
                    generation: 0,
                    queued: false,
                    item: None,
                });
                u32::try_from(self.slots.len() - 1).ok()?
            }
            None => return None,
        };
        let slot = &mut self.slots[index as usize];
        slot.item = Some(item);
        Some(Handle {
            index,
            generation: slot.generation,
        })
    }

    /// Takes the item of `h` out; its slot's generation moves on.
    pub(crate) fn remove(&mut self, h: Handle) -> Option<T> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let item = slot.item.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(h.index);
        Some(item)
    }

    pub(crate) fn get(&self, h: Handle) -> Option<&T> {
        let slot = self.slots.get(h.index as usize)?;
        (slot.generation == h.generation)
            .then_some(slot.item.as_ref())
            .flatten()
    }

    pub(crate) fn get_mut(&mut self, h: Handle) -> Option<&mut T> {
        let slot = self.slots.get_mut(h.index as usize)?;
        (slot.generation == h.generation)
            .then_some(slot.item.as_mut())
            .flatten()
    }

    /// The item in slot `index`, shared (as [`Slots::at_mut`]).
    pub(crate) fn at(&self, index: u32) -> Option<&T> {
        self.slots.get(index as usize)?.item.as_ref()
    }

    /// The item in slot `index`, whatever its generation (the demux maps hold indices
    /// of live sockets only).
    pub(crate) fn at_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots.get_mut(index as usize)?.item.as_mut()
    }

    /// The handle of the live item in slot `index`.
    pub(crate) fn handle_at(&self, index: u32) -> Option<Handle> {
        let slot = self.slots.get(index as usize)?;
        slot.item.as_ref().map(|_| Handle {
            index,
            generation: slot.generation,
        })
    }

    /// Number of slots ever used (occupied or free).
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Marks slot `index` queued; false if it was already.
    pub(crate) fn mark_queued(&mut self, index: u32) -> bool {
        match self.slots.get_mut(index as usize) {
            Some(s) if !s.queued => {
                s.queued = true;
                true
            }
            _ => false,
        }
    }

    /// Clears slot `index`'s queued flag.
    pub(crate) fn unmark_queued(&mut self, index: u32) {
        if let Some(s) = self.slots.get_mut(index as usize) {
            s.queued = false;
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().filter_map(|s| s.item.as_ref())
    }

    /// Sockets with their handles.
    pub(crate) fn iter_handles(&self) -> impl Iterator<Item = (Handle, &T)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.item.as_ref().map(|t| {
                (
                    Handle {
                        index: i as u32,
                        generation: s.generation,
                    },
                    t,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handle_misses_the_reused_slot() {
        let mut s = Slots::new(2);
        let a = s.insert('a').unwrap();
        let b = s.insert('b').unwrap();
        assert!(s.insert('x').is_none());
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None);
        let c = s.insert('c').unwrap();
        assert_eq!(c.index, a.index);
        assert_ne!(c, a);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get_mut(a), None);
        assert_eq!(s.get(c), Some(&'c'));
        assert_eq!(s.get(b), Some(&'b'));
        assert_eq!(
            s.get(Handle {
                index: 9,
                generation: 0
            }),
            None
        );
    }
}
