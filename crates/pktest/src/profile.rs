//! Profiles: the platform defaults a script was written against (initial window, window
//! scale, timers, buffer sizes, option layout), expressed as a ulnet [`TcpConfig`] plus
//! the few runner policies that have no engine knob.
//!
//! A script written on Linux expects Linux's defaults; run with the `linux` profile the
//! engine is configured to match them where it can. What it cannot match (documented in
//! docs/pktest.md, "profile gaps") shows up as a mismatch whose hint names the policy.

use std::fmt;

use ulnet_stack::tcp::TcpConfig;
use ulnet_stack::time::Duration;

/// Which platform's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// ulnet's own defaults (`TcpConfig::default()`).
    Neutral,
    /// Linux 6.x: IW10, wscale 8, RTO 1 s / min 200 ms, quick ACKs, 60 s TIME-WAIT.
    Linux,
    /// FreeBSD 14: IW10, wscale 6, RTO 1 s / min 30 ms, 100 ms delayed ACK, 60 s TIME-WAIT.
    Freebsd,
}

impl ProfileKind {
    /// Every profile, for help texts.
    pub const ALL: [ProfileKind; 3] = [
        ProfileKind::Neutral,
        ProfileKind::Linux,
        ProfileKind::Freebsd,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::Neutral => "neutral",
            ProfileKind::Linux => "linux",
            ProfileKind::Freebsd => "freebsd",
        }
    }
}

impl fmt::Display for ProfileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ProfileKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "neutral" | "ulnet" => Ok(ProfileKind::Neutral),
            "linux" => Ok(ProfileKind::Linux),
            "freebsd" | "bsd" => Ok(ProfileKind::Freebsd),
            _ => Err(format!("unknown profile {s:?} (neutral, linux, freebsd)")),
        }
    }
}

/// The defaults one run uses.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Which profile this is.
    pub kind: ProfileKind,
    /// The engine configuration.
    pub config: TcpConfig,
    /// What `getsockopt(SO_RCVBUF)` reports before any `setsockopt`.
    pub rcvbuf_default: i64,
    /// What `getsockopt(SO_SNDBUF)` reports before any `setsockopt`.
    pub sndbuf_default: i64,
    /// `setsockopt(SO_RCVBUF/SO_SNDBUF, n)` reads back as `2n` (Linux's bookkeeping
    /// overhead allowance, socket(7)).
    pub doubles_buffer_sizes: bool,
    /// Once the connection is established, `SO_RCVBUF`/`SO_SNDBUF` read back rounded up
    /// to a multiple of the connection's maximum segment size (FreeBSD's `tcp_mss()`
    /// reserves `roundup(sb_hiwat, t_maxseg)` for both buffers).
    pub rounds_buffers_to_mss: bool,
    /// Compare outbound TCP options ignoring order and NOP/EOL padding: the platform's
    /// layout differs from ulnet's (Linux-like) one by design.
    pub unordered_options: bool,
}

impl Profile {
    /// The profile of `kind`.
    pub fn new(kind: ProfileKind) -> Profile {
        let mut config = TcpConfig::default();
        // packetdrill's tun device has an Ethernet MTU; the engine runs here without an
        // interface to lower its MTU to the link's.
        config.mtu = 1500;
        match kind {
            ProfileKind::Neutral => Profile {
                kind,
                // What a new socket starts with (issue 13: buffers grow with use towards
                // `*_buffer_len`).
                rcvbuf_default: config.recv_buffer_initial.min(config.recv_buffer_len) as i64,
                sndbuf_default: config.send_buffer_initial.min(config.send_buffer_len) as i64,
                config,
                doubles_buffer_sizes: false,
                rounds_buffers_to_mss: false,
                unordered_options: false,
            },
            ProfileKind::Linux => {
                // A receive space above 65535 << 7 makes the shift 8, as Linux derives it
                // from tcp_rmem[2] (RFC 7323 §2.3 allows up to 14).
                config.recv_buffer_len = 8 << 20;
                config.send_buffer_len = 4 << 20;
                // RFC 6928 IW10 (Linux's TCP_INIT_CWND).
                config.initial_window = 10;
                config.initial_rto = Duration::from_secs(1);
                config.min_rto = Duration::from_millis(200);
                config.max_rto = Duration::from_secs(120);
                // Linux starts in quick-ACK mode (tcp_enter_quickack_mode): the first
                // segments of a connection are acknowledged at once, which is what nearly
                // every Linux script encodes.
                config.delayed_ack = Duration::ZERO;
                config.msl = Duration::from_secs(30);
                config.fin_wait2_timeout = Duration::from_secs(60);
                config.syn_retries = 6;
                config.max_retransmits = 15;
                Profile {
                    kind,
                    config,
                    rcvbuf_default: 131_072,
                    sndbuf_default: 16_384,
                    doubles_buffer_sizes: true,
                    rounds_buffers_to_mss: false,
                    unordered_options: false,
                }
            }
            ProfileKind::Freebsd => {
                // sb_max 2 MiB gives FreeBSD's usual shift of 6.
                config.recv_buffer_len = 2 << 20;
                config.send_buffer_len = 2 << 20;
                // net.inet.tcp.initcwnd_segments = 10.
                config.initial_window = 10;
                config.initial_rto = Duration::from_secs(1);
                config.min_rto = Duration::from_millis(30);
                config.max_rto = Duration::from_secs(64);
                config.delayed_ack = Duration::from_millis(100);
                config.msl = Duration::from_secs(30);
                config.fin_wait2_timeout = Duration::from_secs(60);
                config.syn_retries = 6;
                config.max_retransmits = 12;
                Profile {
                    kind,
                    config,
                    rcvbuf_default: 65_536,
                    sndbuf_default: 32_768,
                    doubles_buffer_sizes: false,
                    rounds_buffers_to_mss: true,
                    unordered_options: true,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ProfileKind::ALL {
            assert_eq!(k.name().parse::<ProfileKind>(), Ok(k));
        }
        assert!("windows".parse::<ProfileKind>().is_err());
    }

    #[test]
    fn linux_profile_gives_wscale_8_and_quick_acks() {
        let p = Profile::new(ProfileKind::Linux);
        let mut shift = 0;
        while (p.config.recv_buffer_len >> shift) > 65535 {
            shift += 1;
        }
        assert_eq!(shift, 8);
        assert!(p.config.delayed_ack.is_zero());
        let f = Profile::new(ProfileKind::Freebsd);
        let mut shift = 0;
        while (f.config.recv_buffer_len >> shift) > 65535 {
            shift += 1;
        }
        assert_eq!(shift, 6);
    }
}
