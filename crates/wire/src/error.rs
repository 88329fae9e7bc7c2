//! The one error type of the wire crate: why a buffer could not be read as a packet.

use core::fmt;

/// Why a buffer was rejected. Small and `Copy` so the data path can count drops by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says it is.
    Truncated,
    /// A field holds a value the format forbids (bad length field, bad checksum, bad
    /// option length).
    Malformed,
    /// The packet is well formed but uses something we do not handle (another hardware
    /// type in ARP, an unknown ICMP type in a `Repr`, another IP version).
    Unsupported,
}

/// The result of parsing: a value or an [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Unsupported => "unsupported packet",
        })
    }
}

// `core::error::Error` is the same trait as `std::error::Error`, so this also serves
// std users (feature `std`) and keeps no_std builds able to use `?` into boxed errors.
impl core::error::Error for Error {}
