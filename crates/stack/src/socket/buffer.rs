//! A bounded queue of datagrams: the receive and transmit buffers of UDP and ICMP
//! sockets.
//!
//! Payload bytes live in one byte ring allocated at creation; each datagram's metadata
//! (its length and the caller's `M`, e.g. the peer address) in a bounded item ring.
//! Invariants: at most `datagram_count` datagrams and `capacity` payload bytes; a
//! datagram is stored whole or not at all; nothing allocates after creation.

use crate::storage::{Ring, RingBuffer};

/// A bounded queue of datagrams with metadata `M`.
#[derive(Debug, Clone)]
pub struct PacketBuffer<M> {
    meta: Ring<(M, usize)>,
    data: RingBuffer,
}

impl<M> PacketBuffer<M> {
    /// A buffer of at most `datagram_count` datagrams and `capacity` payload bytes.
    pub fn new(datagram_count: usize, capacity: usize) -> Self {
        PacketBuffer {
            meta: Ring::new(datagram_count),
            data: RingBuffer::new(capacity),
        }
    }

    /// Datagrams queued.
    pub fn datagram_count(&self) -> usize {
        self.meta.len()
    }

    /// Payload bytes queued.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// No datagram queued.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// The payload byte capacity.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// The datagram capacity.
    pub fn datagram_capacity(&self) -> usize {
        self.meta.capacity()
    }

    /// Whether a `len`-byte datagram fits now.
    pub fn fits(&self, len: usize) -> bool {
        !self.meta.is_full() && len <= self.data.window()
    }

    /// Queues `payload` with `meta`; returns false (storing nothing) when it does not fit.
    pub fn push(&mut self, meta: M, payload: &[u8]) -> bool {
        if !self.fits(payload.len()) {
            return false;
        }
        self.data.enqueue_slice(payload);
        // Cannot fail: checked by `fits`.
        self.meta.push((meta, payload.len())).is_ok()
    }

    /// The oldest datagram's metadata and length.
    pub fn peek(&self) -> Option<(&M, usize)> {
        self.meta.peek().map(|(m, n)| (m, *n))
    }

    /// Copies the oldest datagram's payload into `buf` (its first
    /// `min(len, buf.len())` bytes) without removing it; returns the bytes copied.
    pub fn peek_payload(&self, buf: &mut [u8]) -> usize {
        match self.meta.peek() {
            Some(&(_, n)) => {
                let take = n.min(buf.len());
                self.data.read_allocated(0, &mut buf[..take])
            }
            None => 0,
        }
    }

    /// Removes the oldest datagram, copying as much of its payload as fits into `buf`;
    /// returns its metadata, its full length and the bytes copied.
    pub fn pop(&mut self, buf: &mut [u8]) -> Option<(M, usize, usize)> {
        let (meta, n) = self.meta.pop()?;
        let take = n.min(buf.len());
        let copied = self.data.read_allocated(0, &mut buf[..take]);
        self.data.dequeue_allocated(n);
        Some((meta, n, copied))
    }

    /// Removes the oldest datagram without reading it.
    pub fn discard(&mut self) -> Option<M> {
        let (meta, n) = self.meta.pop()?;
        self.data.dequeue_allocated(n);
        Some(meta)
    }

    /// Drops every datagram.
    pub fn clear(&mut self) {
        self.meta.clear();
        self.data.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_datagrams_or_nothing() {
        let mut b = PacketBuffer::new(3, 10);
        assert!(b.push(1, b"abcd"));
        assert!(b.push(2, b"efgh"));
        assert!(!b.push(3, b"ijk"), "only 2 bytes free");
        assert!(b.push(3, b"ij"));
        assert!(!b.push(4, b""), "datagram count reached");
        let mut buf = [0u8; 2];
        assert_eq!(b.pop(&mut buf), Some((1, 4, 2)));
        assert_eq!(&buf, b"ab");
        // Wraps around the byte ring.
        assert!(b.push(5, b"klmn"));
        let mut buf = [0u8; 8];
        assert_eq!(b.pop(&mut buf), Some((2, 4, 4)));
        assert_eq!(b.pop(&mut buf), Some((3, 2, 2)));
        assert_eq!(b.peek(), Some((&5, 4)));
        assert_eq!(b.peek_payload(&mut buf), 4);
        assert_eq!(&buf[..4], b"klmn");
        assert_eq!(b.discard(), Some(5));
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
    }
}
