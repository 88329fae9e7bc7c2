//! Per-operation error enums of the TCP socket API (docs/STYLE.md §4.5): each says exactly what
//! can go wrong with one call, implements `Display` and `std::error::Error`, and is
//! `#[non_exhaustive]` so new cases are not breaking changes.

use core::fmt;

macro_rules! error_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $msg:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $($name::$variant => $msg,)*
                })
            }
        }

        impl core::error::Error for $name {}
    };
}

error_enum! {
    /// Why [`Tcp::listen`](super::Tcp::listen) failed.
    ListenError {
        /// Another listener already owns this local address and port.
        AddressInUse => "address already in use",
        /// Port 0 cannot be listened on.
        InvalidPort => "cannot listen on port 0",
        /// The backlog is zero.
        InvalidBacklog => "backlog must be at least 1",
    }
}

error_enum! {
    /// Why [`Tcp::accept`](super::Tcp::accept) failed.
    AcceptError {
        /// The listener handle is stale or was never valid.
        InvalidHandle => "invalid listener handle",
    }
}

error_enum! {
    /// Why [`Tcp::connect`](super::Tcp::connect) failed.
    ConnectError {
        /// The remote address is unspecified, or port 0, or of another family than the
        /// local address.
        InvalidAddress => "invalid remote address",
        /// The exact 4-tuple is already in use.
        AddressInUse => "address already in use",
        /// No ephemeral port is free for this destination.
        NoPortsAvailable => "no ephemeral port available",
        /// The engine already holds its configured maximum of connections.
        TooManyConnections => "connection table full",
    }
}

error_enum! {
    /// Why [`Tcp::send`](super::Tcp::send) failed. A full send buffer is not an error:
    /// `send` returns `Ok(0)`.
    SendError {
        /// The socket handle is stale or was never valid.
        InvalidHandle => "invalid socket handle",
        /// The send side is shut down (by `shutdown`, `close`, or the peer's reset).
        Closed => "send side closed",
        /// The connection was reset by the peer.
        ConnectionReset => "connection reset by peer",
        /// The connection timed out.
        TimedOut => "connection timed out",
        /// The connection was refused (RST in reply to our SYN).
        ConnectionRefused => "connection refused",
        /// An ICMP error said the peer's network is unreachable (RFC 1122 §4.2.3.9).
        NetworkUnreachable => "network unreachable",
        /// An ICMP error said the peer is unreachable (RFC 1122 §4.2.3.9).
        HostUnreachable => "no route to host",
        /// An ICMP protocol-unreachable answered our SYN (RFC 5461).
        ProtocolUnreachable => "protocol not available",
    }
}

error_enum! {
    /// Why [`Tcp::recv`](super::Tcp::recv) failed. No data yet is not an error of this
    /// kind: `recv` returns [`RecvError::WouldBlock`] so that `Ok(0)` can mean EOF.
    RecvError {
        /// The socket handle is stale or was never valid.
        InvalidHandle => "invalid socket handle",
        /// No data is buffered and the peer has not closed.
        WouldBlock => "no data available",
        /// The connection was reset by the peer.
        ConnectionReset => "connection reset by peer",
        /// The connection timed out.
        TimedOut => "connection timed out",
        /// The connection was refused (RST in reply to our SYN).
        ConnectionRefused => "connection refused",
        /// The connection was aborted locally.
        Closed => "connection aborted",
        /// An ICMP error said the peer's network is unreachable (RFC 1122 §4.2.3.9).
        NetworkUnreachable => "network unreachable",
        /// An ICMP error said the peer is unreachable (RFC 1122 §4.2.3.9).
        HostUnreachable => "no route to host",
        /// An ICMP protocol-unreachable answered our SYN (RFC 5461).
        ProtocolUnreachable => "protocol not available",
    }
}

error_enum! {
    /// Why a control call (`shutdown`, `close`, `abort`, `set_option`, `state`, `info`)
    /// failed.
    SocketError {
        /// The socket handle is stale or was never valid.
        InvalidHandle => "invalid socket handle",
        /// The call makes no sense in the socket's state (e.g. shutdown before connect).
        InvalidState => "operation invalid in this state",
        /// The change would make the socket overlap another's address and port (a `[::]`
        /// listener leaving v6-only while a `0.0.0.0` one holds its port).
        AddressInUse => "address already in use",
    }
}

/// Why a connection ended abnormally; kept on the socket until the application reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnError {
    /// An acceptable RST arrived in a synchronized state.
    Reset,
    /// RST in reply to our SYN.
    Refused,
    /// Retransmissions, keepalives or the user timeout ran out.
    TimedOut,
    /// The local application aborted the connection.
    Aborted,
    /// ICMP net unreachable (codes 0, 6, 9, 11): Linux's `ENETUNREACH`. A soft error
    /// (RFC 1122 §4.2.3.9): reported, and what a later timeout reports.
    NetworkUnreachable,
    /// ICMP host unreachable and the other soft codes, or time exceeded: Linux's
    /// `EHOSTUNREACH`.
    HostUnreachable,
    /// ICMP protocol unreachable for our SYN (a hard error, RFC 5461): Linux's
    /// `ENOPROTOOPT`.
    ProtocolUnreachable,
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnError::Reset => "connection reset by peer",
            ConnError::Refused => "connection refused",
            ConnError::TimedOut => "connection timed out",
            ConnError::Aborted => "connection aborted",
            ConnError::NetworkUnreachable => "network unreachable",
            ConnError::HostUnreachable => "no route to host",
            ConnError::ProtocolUnreachable => "protocol not available",
        })
    }
}

impl core::error::Error for ConnError {}

impl From<ConnError> for SendError {
    fn from(e: ConnError) -> SendError {
        match e {
            ConnError::Reset => SendError::ConnectionReset,
            ConnError::Refused => SendError::ConnectionRefused,
            ConnError::TimedOut => SendError::TimedOut,
            ConnError::Aborted => SendError::Closed,
            ConnError::NetworkUnreachable => SendError::NetworkUnreachable,
            ConnError::HostUnreachable => SendError::HostUnreachable,
            ConnError::ProtocolUnreachable => SendError::ProtocolUnreachable,
        }
    }
}

impl From<ConnError> for RecvError {
    fn from(e: ConnError) -> RecvError {
        match e {
            ConnError::Reset => RecvError::ConnectionReset,
            ConnError::Refused => RecvError::ConnectionRefused,
            ConnError::TimedOut => RecvError::TimedOut,
            ConnError::Aborted => RecvError::Closed,
            ConnError::NetworkUnreachable => RecvError::NetworkUnreachable,
            ConnError::HostUnreachable => RecvError::HostUnreachable,
            ConnError::ProtocolUnreachable => RecvError::ProtocolUnreachable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_display_and_convert() {
        assert_eq!(
            ListenError::AddressInUse.to_string(),
            "address already in use"
        );
        assert_eq!(
            SendError::from(ConnError::Reset),
            SendError::ConnectionReset
        );
        assert_eq!(RecvError::from(ConnError::TimedOut), RecvError::TimedOut);
        let e: &dyn std::error::Error = &ConnectError::NoPortsAvailable;
        assert!(!e.to_string().is_empty());
    }
}
