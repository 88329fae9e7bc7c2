//! Big-endian field accessors shared by the packet views, and the length checks their
//! `check_len` is made of. The accessors index directly: callers only use them after
//! `check_len` proved the field is inside the buffer.

use crate::{Error, Result};

/// A buffer of `len` bytes holds the `needed` bytes a header requires.
///
/// # Errors
/// [`Error::Truncated`] when it does not.
#[inline]
pub(crate) fn ensure_len(len: usize, needed: usize) -> Result<()> {
    if len < needed {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// A length the header declares (of itself, or of the whole datagram) covers at least
/// the `min` bytes the format requires, and a buffer of `len` bytes holds all of it.
///
/// # Errors
/// [`Error::Malformed`] when `declared < min`; [`Error::Truncated`] when the buffer is
/// shorter than `declared`.
#[inline]
pub(crate) fn check_declared(len: usize, min: usize, declared: usize) -> Result<()> {
    if declared < min {
        return Err(Error::Malformed);
    }
    ensure_len(len, declared)
}

#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
