//! The engine's per-operation errors as `std::io::Error` kinds (docs/STYLE.md §4.5), the
//! mapping std users expect from the kernel's errno values.

use std::io::{Error, ErrorKind};

use ulnet_stack::iface::ListenTcpError;
use ulnet_stack::socket::{AddError, InvalidHandle, SendError as UdpSendError};
use ulnet_stack::tcp::{ConnError, ConnectError, ListenError, RecvError, SendError, SocketError};

/// An `io::Error` of `kind` carrying `msg`.
pub(crate) fn err(kind: ErrorKind, msg: impl std::fmt::Display) -> Error {
    Error::new(kind, msg.to_string())
}

/// The stack's runtime has stopped: no operation can make progress any more.
pub(crate) fn stopped() -> Error {
    err(ErrorKind::NotConnected, "the ulnet stack has stopped")
}

/// The interface was built without a TCP layer.
pub(crate) fn no_tcp() -> Error {
    err(ErrorKind::Unsupported, "the ulnet stack has no TCP layer")
}

pub(crate) fn conn(e: ConnError) -> Error {
    let kind = match e {
        ConnError::Reset => ErrorKind::ConnectionReset,
        ConnError::Refused => ErrorKind::ConnectionRefused,
        ConnError::TimedOut => ErrorKind::TimedOut,
        ConnError::NetworkUnreachable => ErrorKind::NetworkUnreachable,
        ConnError::HostUnreachable => ErrorKind::HostUnreachable,
        // ENOPROTOOPT has no kind of its own; the connection was refused.
        ConnError::ProtocolUnreachable => ErrorKind::ConnectionRefused,
        _ => ErrorKind::ConnectionAborted,
    };
    err(kind, e)
}

pub(crate) fn connect(e: ConnectError) -> Error {
    let kind = match e {
        ConnectError::InvalidAddress => ErrorKind::InvalidInput,
        ConnectError::AddressInUse => ErrorKind::AddrInUse,
        ConnectError::NoPortsAvailable => ErrorKind::AddrNotAvailable,
        _ => ErrorKind::OutOfMemory,
    };
    err(kind, e)
}

pub(crate) fn listen(e: ListenError) -> Error {
    let kind = match e {
        ListenError::AddressInUse => ErrorKind::AddrInUse,
        _ => ErrorKind::InvalidInput,
    };
    err(kind, e)
}

pub(crate) fn listen_tcp(e: ListenTcpError) -> Error {
    match e {
        ListenTcpError::Listen(e) => listen(e),
        ListenTcpError::NoPorts => err(ErrorKind::AddrNotAvailable, e),
        ListenTcpError::NoTcp => err(ErrorKind::Unsupported, e),
        _ => err(ErrorKind::Other, e),
    }
}

pub(crate) fn send(e: SendError) -> Error {
    let kind = match e {
        SendError::Closed => ErrorKind::BrokenPipe,
        SendError::ConnectionReset => ErrorKind::ConnectionReset,
        SendError::TimedOut => ErrorKind::TimedOut,
        SendError::ConnectionRefused | SendError::ProtocolUnreachable => {
            ErrorKind::ConnectionRefused
        }
        SendError::NetworkUnreachable => ErrorKind::NetworkUnreachable,
        SendError::HostUnreachable => ErrorKind::HostUnreachable,
        _ => ErrorKind::NotConnected,
    };
    err(kind, e)
}

pub(crate) fn recv(e: RecvError) -> Error {
    let kind = match e {
        RecvError::WouldBlock => ErrorKind::WouldBlock,
        RecvError::ConnectionReset => ErrorKind::ConnectionReset,
        RecvError::TimedOut => ErrorKind::TimedOut,
        RecvError::ConnectionRefused | RecvError::ProtocolUnreachable => {
            ErrorKind::ConnectionRefused
        }
        RecvError::NetworkUnreachable => ErrorKind::NetworkUnreachable,
        RecvError::HostUnreachable => ErrorKind::HostUnreachable,
        _ => ErrorKind::NotConnected,
    };
    err(kind, e)
}

pub(crate) fn socket(e: SocketError) -> Error {
    let kind = match e {
        SocketError::InvalidState => ErrorKind::InvalidInput,
        _ => ErrorKind::NotConnected,
    };
    err(kind, e)
}

pub(crate) fn udp_add(e: AddError) -> Error {
    let kind = match e {
        AddError::AddrInUse => ErrorKind::AddrInUse,
        AddError::NoPorts => ErrorKind::AddrNotAvailable,
        _ => ErrorKind::OutOfMemory,
    };
    err(kind, e)
}

/// A socket's engine handle went stale: the socket is gone from the engine.
pub(crate) fn udp_handle(e: InvalidHandle) -> Error {
    err(ErrorKind::NotConnected, e)
}

pub(crate) fn udp_send(e: UdpSendError) -> Error {
    let kind = match e {
        UdpSendError::ConnectionRefused => ErrorKind::ConnectionRefused,
        UdpSendError::BufferFull => ErrorKind::WouldBlock,
        UdpSendError::TooLarge => ErrorKind::InvalidInput,
        _ => ErrorKind::InvalidInput,
    };
    err(kind, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_what_std_reports_for_the_errno() {
        assert_eq!(conn(ConnError::Reset).kind(), ErrorKind::ConnectionReset);
        assert_eq!(
            conn(ConnError::Refused).kind(),
            ErrorKind::ConnectionRefused
        );
        assert_eq!(conn(ConnError::TimedOut).kind(), ErrorKind::TimedOut);
        assert_eq!(
            listen(ListenError::AddressInUse).kind(),
            ErrorKind::AddrInUse
        );
        assert_eq!(send(SendError::Closed).kind(), ErrorKind::BrokenPipe);
        assert_eq!(recv(RecvError::WouldBlock).kind(), ErrorKind::WouldBlock);
        assert_eq!(udp_add(AddError::AddrInUse).kind(), ErrorKind::AddrInUse);
        assert_eq!(
            udp_send(UdpSendError::BufferFull).kind(),
            ErrorKind::WouldBlock
        );
        assert_eq!(
            connect(ConnectError::NoPortsAvailable).kind(),
            ErrorKind::AddrNotAvailable
        );
    }
}
