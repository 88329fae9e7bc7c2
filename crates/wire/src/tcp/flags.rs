//! The TCP control bits (RFC 9293 §3.1, RFC 3168 §6.1 for ECE/CWR, RFC 9768 for AE).

use core::fmt;
use core::ops;

/// A set of TCP control bits, in their on-the-wire positions (low 9 bits of the
/// data-offset/flags word). Any combination is representable, including hostile ones
/// such as SYN|FIN: judging them is the stack's job.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronise sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// The acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// The urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion window reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// Accurate ECN (RFC 9768; formerly NS, RFC 3540).
    pub const AE: TcpFlags = TcpFlags(0x100);

    /// Every bit this type carries.
    pub const ALL: TcpFlags = TcpFlags(0x1ff);

    /// The empty set.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// The flags from their wire bits; bits outside [`TcpFlags::ALL`] are dropped.
    pub const fn from_bits_truncate(bits: u16) -> TcpFlags {
        TcpFlags(bits & Self::ALL.0)
    }

    /// The wire bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag in `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets or clears the flags in `other`.
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on {
            self.0 |= other.0;
        } else {
            self.0 &= !other.0;
        }
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl ops::BitAndAssign for TcpFlags {
    fn bitand_assign(&mut self, rhs: TcpFlags) {
        self.0 &= rhs.0;
    }
}

impl ops::Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0 & Self::ALL.0)
    }
}

impl ops::Sub for TcpFlags {
    type Output = TcpFlags;
    fn sub(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !rhs.0)
    }
}

impl fmt::Display for TcpFlags {
    /// tcpdump's letters, in tcpdump's order: `F S R P . U E W` (`.` is ACK, `A` is AE),
    /// or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        const LETTERS: [(TcpFlags, char); 9] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::ACK, '.'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::AE, 'A'),
        ];
        for (flag, c) in LETTERS {
            if self.contains(flag) {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_algebra_and_display() {
        let sa = TcpFlags::SYN | TcpFlags::ACK;
        assert!(sa.contains(TcpFlags::SYN) && sa.contains(TcpFlags::ACK));
        assert!(!sa.contains(TcpFlags::SYN | TcpFlags::FIN));
        assert!(sa.intersects(TcpFlags::SYN | TcpFlags::FIN));
        assert_eq!(sa.to_string(), "S.");
        assert_eq!(
            (TcpFlags::FIN | TcpFlags::PSH | TcpFlags::ACK).to_string(),
            "FP."
        );
        assert_eq!(TcpFlags::empty().to_string(), "none");
        assert_eq!((sa - TcpFlags::SYN), TcpFlags::ACK);
        assert_eq!(TcpFlags::from_bits_truncate(0xffff), TcpFlags::ALL);
        let mut f = TcpFlags::empty();
        f.set(TcpFlags::RST, true);
        f.set(TcpFlags::RST, false);
        assert!(f.is_empty());
    }
}
