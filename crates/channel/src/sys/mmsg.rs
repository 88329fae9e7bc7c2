//! Batched datagram receive with `recvmmsg(2)`: many datagrams per system call from any
//! datagram socket. The kernel's own fast receive path for UDP, which the bench measures
//! the kernel with (rustix has no recvmmsg, and code outside `sys/` may not be unsafe).

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::Result;

/// The most datagrams one call takes.
pub const MAX_BATCH: usize = 64;

/// Receive buffers for [`RecvBatch::recv`]: up to [`MAX_BATCH`] datagrams of up to
/// `len` bytes each, reused call after call (no allocation per call).
#[derive(Debug)]
pub struct RecvBatch {
    buf: Vec<u8>,
    len: usize,
    count: usize,
    lens: [usize; MAX_BATCH],
}

impl RecvBatch {
    /// Buffers for `count` datagrams (at most [`MAX_BATCH`]) of up to `len` bytes.
    pub fn new(count: usize, len: usize) -> RecvBatch {
        let count = count.clamp(1, MAX_BATCH);
        RecvBatch {
            buf: vec![0; count * len],
            len,
            count,
            lens: [0; MAX_BATCH],
        }
    }

    /// Receives up to the batch's count of datagrams from `fd` without blocking
    /// (`MSG_DONTWAIT`); returns how many arrived, `Ok(0)` when none was waiting.
    /// A datagram longer than the buffer is truncated to it.
    ///
    /// # Errors
    /// `recvmmsg(2)` failed other than with `EAGAIN`.
    pub fn recv(&mut self, fd: BorrowedFd<'_>) -> Result<usize> {
        let base = self.buf.as_mut_ptr();
        let mut iov: [libc::iovec; MAX_BATCH] = std::array::from_fn(|i| libc::iovec {
            // In bounds: i < count whenever the kernel uses the entry (vlen = count), and
            // the entries past count are never read; wrapping_add keeps the unused ones
            // from being out-of-bounds pointer arithmetic.
            iov_base: base.wrapping_add(i * self.len).cast(),
            iov_len: self.len,
        });
        // SAFETY: all-zero is a valid `mmsghdr` (null name and control, no iovecs).
        let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for (h, v) in hdrs.iter_mut().zip(iov.iter_mut()) {
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `hdrs[..count]` each point at one iovec covering a distinct `len`-byte
        // slice of `self.buf`, which outlives the call; the kernel writes at most that
        // much into each and fills `msg_len`; no timeout pointer.
        let r = syscall!(
            "recvmmsg",
            recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                self.count as _,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            )
        );
        match r {
            Ok(n) => {
                let n = n as usize;
                for (l, h) in self.lens.iter_mut().zip(&hdrs[..n]) {
                    *l = (h.msg_len as usize).min(self.len);
                }
                Ok(n)
            }
            Err(e) if e.source.raw_os_error() == Some(libc::EAGAIN) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The `i`th datagram of the last [`RecvBatch::recv`].
    ///
    /// # Panics
    /// If `i` is not below what that call returned (or the batch's count).
    pub fn datagram(&self, i: usize) -> &[u8] {
        assert!(i < self.count, "datagram {i} of a batch of {}", self.count);
        &self.buf[i * self.len..i * self.len + self.lens[i]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_batch_takes_every_waiting_datagram_in_one_call() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = RecvBatch::new(8, 64);
        assert_eq!(
            b.recv(rx.as_fd()).unwrap(),
            0,
            "nothing waiting: no block, no error"
        );
        for i in 0..5u8 {
            tx.send_to(&[i; 10], rx.local_addr().unwrap()).unwrap();
        }
        tx.send_to(&[9; 100], rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(b.recv(rx.as_fd()).unwrap(), 6);
        for i in 0..5u8 {
            assert_eq!(b.datagram(usize::from(i)), &[i; 10]);
        }
        assert_eq!(b.datagram(5), &[9; 64], "truncated to the buffer");
    }
}
