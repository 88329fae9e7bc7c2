//! A TCP bulk client: connects, sends N bytes of the [`pattern`]
//! and/or receives until the peer closes, checking every received byte against the
//! pattern, then closes. What interop tests and `ulnet` use against kernel servers.

use std::net::SocketAddr;

use ulnet_stack::iface::Interface;
use ulnet_stack::tcp::{ConnectError, Event, RecvError, Shutdown, SocketHandle, State};
use ulnet_stack::time::{Duration, Instant};

use super::pattern;
use ulnet::runtime::App;

/// How a [`BulkClient`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BulkResult {
    /// Bytes sent.
    pub sent: u64,
    /// Bytes received.
    pub received: u64,
    /// Every received byte matched the pattern.
    pub received_pattern_ok: bool,
    /// The peer closed its side (FIN) after what it sent (and acknowledged ours).
    pub peer_closed: bool,
    /// The connection failed (reset, refused, timed out), or the deadline passed.
    pub failed: bool,
    /// From connect to the end, in microseconds.
    pub elapsed_us: u64,
}

/// The client app.
#[derive(Debug)]
pub struct BulkClient {
    h: SocketHandle,
    send_len: u64,
    result: BulkResult,
    started: Option<Instant>,
    deadline: Duration,
    buf: Box<[u8]>,
    shut: bool,
    done: bool,
}

impl BulkClient {
    /// Connects from `local` (port 0: ephemeral) to `remote`; will send `send_len`
    /// pattern bytes, then shut down its sending side, and read until the peer closes.
    /// Gives up after `deadline`.
    ///
    /// # Errors
    /// As `Tcp::connect`; `InvalidAddress` when the interface has no TCP.
    pub fn connect(
        iface: &mut Interface,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        send_len: u64,
        deadline: Duration,
    ) -> Result<BulkClient, ConnectError> {
        let tcp = iface.tcp_mut().ok_or(ConnectError::InvalidAddress)?;
        let h = tcp.connect(now, local, remote)?;
        Ok(BulkClient {
            h,
            send_len,
            result: BulkResult {
                received_pattern_ok: true,
                ..BulkResult::default()
            },
            started: Some(now),
            deadline,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            shut: false,
            done: false,
        })
    }

    /// The result (final once the app is done).
    pub fn result(&self) -> BulkResult {
        self.result
    }

    fn finish(&mut self, now: Instant, failed: bool) {
        self.result.failed |= failed;
        if let Some(t) = self.started {
            self.result.elapsed_us = (now - t).as_micros() as u64;
        }
        self.done = true;
    }
}

impl App for BulkClient {
    fn poll(&mut self, now: Instant, iface: &mut Interface, _events: &[Event]) {
        if self.done {
            return;
        }
        let Some(tcp) = iface.tcp_mut() else {
            return self.finish(now, true);
        };
        if self.started.is_some_and(|t| now - t > self.deadline) {
            let _ = tcp.abort(now, self.h);
            return self.finish(now, true);
        }
        let Ok(r) = tcp.readiness(self.h) else {
            return self.finish(now, true);
        };
        if r.error.is_some() {
            let _ = tcp.abort(now, self.h);
            return self.finish(now, true);
        }
        while self.result.sent < self.send_len {
            let want = (self.send_len - self.result.sent).min(pattern::MAX_CHUNK as u64) as usize;
            match tcp.send(now, self.h, pattern::slice(self.result.sent, want)) {
                Ok(0) => break,
                Ok(n) => self.result.sent += n as u64,
                Err(_) => {
                    let _ = tcp.abort(now, self.h);
                    return self.finish(now, true);
                }
            }
        }
        if self.result.sent == self.send_len && !self.shut && r.writable {
            let _ = tcp.shutdown(now, self.h, Shutdown::Write);
            self.shut = true;
        }
        loop {
            match tcp.recv(now, self.h, &mut self.buf) {
                Ok(0) => {
                    self.result.peer_closed = true;
                    break;
                }
                Ok(n) => {
                    self.result.received_pattern_ok &=
                        pattern::matches(self.result.received, &self.buf[..n]);
                    self.result.received += n as u64;
                }
                Err(RecvError::WouldBlock) => break,
                Err(_) => {
                    let _ = tcp.abort(now, self.h);
                    return self.finish(now, true);
                }
            }
        }
        // Done once our FIN is acknowledged (so is every byte before it) and the peer's
        // has arrived: TIME-WAIT after an active close, CLOSED after a passive one.
        let state = tcp.state(self.h);
        if self.shut
            && self.result.peer_closed
            && matches!(state, Ok(State::TimeWait | State::Closed))
        {
            let _ = tcp.close(now, self.h);
            self.finish(now, false);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        // Wake for the deadline even when nothing arrives.
        self.started.map(|t| t + self.deadline)
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
