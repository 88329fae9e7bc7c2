//! The eleven connection states of RFC 9293 §3.3.2 and the predicates the rest of the
//! engine asks about them.
//!
//! Read first: RFC 9293 §3.3.2 (state diagram), §3.10.7 (segment arrival per state).

use core::fmt;

/// A TCP connection state (RFC 9293 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection; also the state of a socket that was reset or timed out.
    Closed,
    /// Waiting for a connection request (listening sockets only).
    Listen,
    /// SYN sent, waiting for a matching SYN (active open).
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the acknowledgement of our SYN.
    SynReceived,
    /// Open: data flows both ways.
    Established,
    /// We sent FIN; waiting for its ACK or the peer's FIN.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer sent FIN; waiting for the local user to close.
    CloseWait,
    /// Both sides sent FIN at the same time; waiting for the ACK of ours.
    Closing,
    /// The peer closed first and we sent our FIN; waiting for its ACK.
    LastAck,
    /// Both FINs are acknowledged; lingering 2*MSL so stray segments die out.
    TimeWait,
}

impl State {
    /// True once the SYNs are exchanged (RFC 9293 "synchronized states"): every state
    /// except CLOSED, LISTEN and SYN-SENT. SYN-RECEIVED counts, as in §3.10.7.4.
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent)
    }

    /// True when the peer may still send us data (we have not received its FIN).
    pub fn may_receive(self) -> bool {
        matches!(
            self,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2
        )
    }

    /// True when the application may still queue data (our FIN is not yet queued).
    pub fn may_send(self) -> bool {
        matches!(
            self,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        )
    }

    /// True while the connection has sent a FIN (or decided to), i.e. the send side is
    /// closed by the local user.
    pub fn fin_queued(self) -> bool {
        matches!(
            self,
            State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck | State::TimeWait
        )
    }

    /// True when the peer's FIN has been received.
    pub fn fin_received(self) -> bool {
        matches!(
            self,
            State::CloseWait | State::Closing | State::LastAck | State::TimeWait
        )
    }

    /// The name RFC 9293 uses for the state.
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates_match_rfc_9293() {
        assert!(!State::SynSent.is_synchronized());
        assert!(State::SynReceived.is_synchronized());
        assert!(State::TimeWait.is_synchronized());
        assert!(State::FinWait2.may_receive());
        assert!(!State::CloseWait.may_receive());
        assert!(State::CloseWait.may_send());
        assert!(!State::FinWait1.may_send());
        assert!(State::Closing.fin_received() && State::Closing.fin_queued());
        assert_eq!(State::SynReceived.to_string(), "SYN-RECEIVED");
    }
}
