//! Ping: ICMP echo requests (RFC 792) at an interval, replies reported with their
//! round-trip times, and a ping(8)-style summary.

use std::net::IpAddr;

use ulnet_stack::iface::Interface;
use ulnet_stack::socket::{IcmpHandle, IcmpSocket};
use ulnet_stack::tcp::Event;
use ulnet_stack::time::{Duration, Instant};

use super::echo::AppError;
use ulnet::runtime::App;

/// What a [`Ping`] reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PingEvent {
    /// An echo reply.
    Reply {
        /// Who answered.
        from: IpAddr,
        /// The echoed sequence number.
        seq: u16,
        /// ICMP payload length.
        len: usize,
        /// Round-trip time, if the request was still remembered.
        rtt: Option<Duration>,
    },
    /// A request could not be queued (send buffer full).
    SendFailed {
        /// Its sequence number.
        seq: u16,
    },
}

/// Settings of a [`Ping`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingConfig {
    /// Whom to ping.
    pub target: IpAddr,
    /// Requests to send.
    pub count: u16,
    /// Time between requests.
    pub interval: Duration,
    /// How long to wait for replies after the last request.
    pub timeout: Duration,
    /// ICMP payload bytes per request.
    pub payload_len: usize,
    /// Echo identifier.
    pub ident: u16,
}

impl PingConfig {
    /// `count` pings to `target`, 1 s apart, 56 payload bytes (like ping(8)), 1 s
    /// timeout after the last.
    pub fn new(target: IpAddr, count: u16) -> Self {
        PingConfig {
            target,
            count,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            payload_len: 56,
            ident: 0x554c,
        }
    }
}

/// Totals, ping(8)'s summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PingSummary {
    /// Requests sent.
    pub transmitted: u32,
    /// Replies received.
    pub received: u32,
    /// Smallest, mean, largest RTT and the mean deviation, in milliseconds.
    pub rtt_ms: Option<(f64, f64, f64, f64)>,
}

/// The ping app; finished after `count` requests and the timeout.
pub struct Ping {
    cfg: PingConfig,
    socket: IcmpHandle,
    next_seq: u16,
    next_at: Option<Instant>,
    end_at: Option<Instant>,
    received: u32,
    rtts_us: Vec<u64>,
    payload: Vec<u8>,
    buf: Vec<u8>,
    on_event: Box<dyn FnMut(PingEvent) + Send>,
    done: bool,
}

impl std::fmt::Debug for Ping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ping")
            .field("cfg", &self.cfg)
            .field("next_seq", &self.next_seq)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl Ping {
    /// Adds the echo socket; `on_event` hears each reply as it arrives.
    ///
    /// # Errors
    /// The identifier is in use or the socket set is full.
    pub fn new(
        iface: &mut Interface,
        cfg: PingConfig,
        on_event: Box<dyn FnMut(PingEvent) + Send>,
    ) -> Result<Ping, AppError> {
        let socket = iface.sockets_mut().add_icmp(IcmpSocket::new(
            cfg.ident,
            16,
            16 * (cfg.payload_len + 64),
        ))?;
        let payload = (0..cfg.payload_len).map(|i| i as u8).collect();
        Ok(Ping {
            cfg,
            socket,
            next_seq: 1,
            next_at: Some(Instant::ZERO),
            end_at: None,
            received: 0,
            rtts_us: Vec::new(),
            payload,
            buf: vec![0; cfg.payload_len + 64],
            on_event,
            done: cfg.count == 0,
        })
    }

    /// The totals so far.
    pub fn summary(&self) -> PingSummary {
        let rtt_ms = (!self.rtts_us.is_empty()).then(|| {
            let ms: Vec<f64> = self.rtts_us.iter().map(|&u| u as f64 / 1000.0).collect();
            let n = ms.len() as f64;
            let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
            let max = ms.iter().copied().fold(0.0, f64::max);
            let avg = ms.iter().sum::<f64>() / n;
            let mdev = (ms.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n).sqrt();
            (min, avg, max, mdev)
        });
        PingSummary {
            transmitted: u32::from(self.next_seq - 1),
            received: self.received,
            rtt_ms,
        }
    }
}

impl App for Ping {
    fn poll(&mut self, now: Instant, iface: &mut Interface, _events: &[Event]) {
        let s = iface
            .sockets_mut()
            .icmp_mut(self.socket)
            .expect("the app never removes its socket");
        while let Ok(r) = s.recv_reply(&mut self.buf) {
            self.received += 1;
            if let Some(rtt) = r.rtt {
                self.rtts_us
                    .push(u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX));
            }
            (self.on_event)(PingEvent::Reply {
                from: r.src,
                seq: r.seq_no,
                len: r.len,
                rtt: r.rtt,
            });
        }
        if let Some(at) = self.next_at {
            if now >= at {
                let seq = self.next_seq;
                if s.send_echo(self.cfg.target, seq, &self.payload).is_err() {
                    (self.on_event)(PingEvent::SendFailed { seq });
                }
                self.next_seq += 1;
                if self.next_seq > self.cfg.count {
                    self.next_at = None;
                    self.end_at = Some(now + self.cfg.timeout);
                } else {
                    self.next_at = Some(now + self.cfg.interval);
                }
            }
        }
        let all_in = self.received >= u32::from(self.cfg.count);
        if self.end_at.is_some_and(|end| now >= end || all_in) {
            self.done = true;
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.next_at.or(self.end_at)
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
