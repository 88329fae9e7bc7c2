//! What a simulated TCP run does: [`TcpSimOptions`] (transfer, wire impairments per
//! direction, TCP tunables, capture and limits), and the parsers the command line uses
//! for sizes, rates, durations and probabilities.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use ulnet_channel::sim::LinkConfig;
use ulnet_stack::tcp::{AckPolicy, Algorithm};

/// The impairments of one direction of the simulated cable. Every field defaults to a
/// perfect wire; see [`LinkConfig`] for the order a frame meets them in.
///
/// Not [`LinkConfig`] itself (which serialises through ulnet-channel's `serde` feature):
/// these are the runner's options as the command line and the report state them, with
/// `None` meaning "the simulator's default" (a state `LinkConfig` does not keep),
/// durations in seconds, and public fields that tests and the CLI assign;
/// [`Impairments::link_config`] turns them into the real configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Impairments {
    /// Probability that a frame is lost (`0.0..=1.0`).
    pub loss: f64,
    /// Probability that a frame is held back by `reorder_delay` so later ones overtake it.
    pub reorder: f64,
    /// How long a reordered frame is held back (`None`: the simulator's default, 1 ms).
    #[serde(serialize_with = "ser_opt_duration")]
    pub reorder_delay: Option<Duration>,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Fixed one-way propagation delay.
    #[serde(serialize_with = "ser_duration")]
    pub delay: Duration,
    /// Extra uniformly distributed delay in `0..=jitter` per frame.
    #[serde(serialize_with = "ser_duration")]
    pub jitter: Duration,
    /// Bottleneck bandwidth in bits per second (`None`: unlimited).
    pub rate_bps: Option<u64>,
    /// Drop-tail limit of the bottleneck queue, in frames (only with a rate).
    pub queue_frames: Option<usize>,
    /// Drop-tail limit of the bottleneck queue, in bytes (only with a rate).
    pub queue_bytes: Option<usize>,
}

impl Impairments {
    /// The simulator's link configuration for these impairments.
    pub fn link_config(&self) -> LinkConfig {
        let mut c = LinkConfig::new()
            .loss(self.loss)
            .reorder(self.reorder)
            .duplicate(self.duplicate)
            .corrupt(self.corrupt)
            .delay(self.delay)
            .jitter(self.jitter)
            .rate_bps(self.rate_bps.unwrap_or(0));
        if let Some(d) = self.reorder_delay {
            c = c.reorder_delay(d);
        }
        if let Some(q) = self.queue_frames {
            c = c.queue_limit_frames(q);
        }
        if let Some(q) = self.queue_bytes {
            c = c.queue_limit_bytes(q);
        }
        c
    }
}

/// Congestion control algorithm, as named on the command line and in reports: the TCP
/// layer's own [`Algorithm`] (serialised `"newreno"`, `"cubic"` or `"bbr"` through ulnet-stack's
/// `serde` feature), under the name the simulator's options have always used.
pub type Congestion = Algorithm;

/// Parses a receiver ACK policy name: `batch` (ulnet's default) or `linux` (any case).
///
/// # Errors
/// A message naming the accepted values.
pub fn parse_ack_policy(s: &str) -> Result<AckPolicy, String> {
    match s.to_ascii_lowercase().as_str() {
        "batch" | "perbatch" => Ok(AckPolicy::PerBatch),
        "linux" => Ok(AckPolicy::Linux),
        _ => Err(format!("unknown ACK policy {s:?} (batch or linux)")),
    }
}

/// Parses `newreno`/`reno`/`new-reno` or `cubic` (any case).
///
/// # Errors
/// A message naming the accepted values.
pub fn parse_congestion(s: &str) -> Result<Congestion, String> {
    if s.eq_ignore_ascii_case("new-reno") {
        return Ok(Algorithm::NewReno);
    }
    s.parse()
        .map_err(|_| format!("unknown congestion control {s:?} (newreno, cubic or bbr)"))
}

/// A whole simulated run: `connections` TCP connections from node A (198.18.0.1, or
/// 2001:2::1 with `ipv6`) to a listener on node B (198.18.0.2:5001 or `[2001:2::2]:5001`),
/// each moving `bytes` of seeded pseudo-random data, over a cable with `a_to_b` and
/// `b_to_a` impairments.
#[derive(Debug, Clone, Serialize)]
pub struct TcpSimOptions {
    /// Payload bytes each connection sends from A to B.
    pub bytes: u64,
    /// Concurrent connections, all to one listening socket.
    pub connections: usize,
    /// Seeds the wire's random draws, the payload, and the stacks' ISN keys.
    pub seed: u64,
    /// Impairments of the data direction (A to B).
    pub a_to_b: Impairments,
    /// Impairments of the ACK direction (B to A).
    pub b_to_a: Impairments,
    /// Congestion control on both stacks.
    pub congestion: Congestion,
    /// SACK (RFC 2018) offered by both stacks.
    pub sack: bool,
    /// Timestamps (RFC 7323) offered by both stacks.
    pub timestamps: bool,
    /// Window scaling (RFC 7323) offered by both stacks.
    pub window_scaling: bool,
    /// Send buffer per connection, bytes (`None`: the TCP layer's default).
    pub send_buffer: Option<usize>,
    /// Receive buffer per connection, bytes (`None`: the TCP layer's default).
    pub recv_buffer: Option<usize>,
    /// Link MTU of both interfaces and the wire (IP header included).
    pub mtu: usize,
    /// Caps the MSS below what the MTU allows (TCP derives its MSS from `mss + 40`, or
    /// `mss + 60` over IPv6).
    pub mss: Option<u16>,
    /// Delayed ACK timeout (`None`: the TCP layer's default); zero acknowledges at once.
    #[serde(serialize_with = "ser_opt_duration")]
    pub delayed_ack: Option<Duration>,
    /// How node B, the receiver, paces its ACKs: `AckPolicy::Linux` makes it stand in
    /// for a Linux peer (an ACK every second segment, SACK compression), so loss runs on
    /// the simulated wire see what a real Linux receiver sends back.
    pub receiver_acks: AckPolicy,
    /// Pre-load both neighbour caches instead of resolving with ARP.
    pub static_arp: bool,
    /// Data-carrying TCP segments sent by A to lose on purpose, numbered from 1 in the
    /// order A transmits them (retransmissions included), before the wire sees them.
    pub drop_segments: Vec<u64>,
    /// Give up (and report failure) when virtual time passes this.
    #[serde(serialize_with = "ser_duration")]
    pub time_limit: Duration,
    /// Give up (and report failure) when the run has taken this much real time.
    #[serde(serialize_with = "ser_duration")]
    pub wall_limit: Duration,
    /// Write every frame node A sends or receives to this pcap file.
    pub pcap: Option<PathBuf>,
    /// Write every frame node B sends or receives to this pcap file.
    pub pcap_b: Option<PathBuf>,
    /// Record connection 0's cwnd, ssthresh and srtt whenever they change.
    pub cwnd_trace: bool,
    /// Run over IPv6: A is 2001:2::1/64, B 2001:2::2/64 (RFC 5180's benchmarking
    /// block), resolved by Neighbor Discovery (DAD off, so both families start at the
    /// same instant).
    pub ipv6: bool,
    /// Both ends send new data in bursts of up to this many bytes
    /// ([`TcpConfig::gso_max`](ulnet_stack::tcp::TcpConfig::gso_max)), which the
    /// interface cuts into segments itself (the simulated wire has no segmentation
    /// offload); 0 sends segment by segment.
    pub gso_max: u32,
}

impl Default for TcpSimOptions {
    fn default() -> Self {
        TcpSimOptions {
            bytes: 1 << 20,
            connections: 1,
            seed: 1,
            a_to_b: Impairments::default(),
            b_to_a: Impairments::default(),
            congestion: Congestion::default(),
            sack: true,
            timestamps: true,
            window_scaling: true,
            send_buffer: None,
            recv_buffer: None,
            mtu: 1500,
            mss: None,
            delayed_ack: None,
            receiver_acks: AckPolicy::PerBatch,
            static_arp: false,
            drop_segments: Vec::new(),
            time_limit: Duration::from_secs(3600),
            wall_limit: Duration::from_secs(600),
            pcap: None,
            pcap_b: None,
            cwnd_trace: false,
            ipv6: false,
            gso_max: 0,
        }
    }
}

impl TcpSimOptions {
    /// Applies `f` to the impairments of both directions.
    pub fn both_ways(&mut self, f: impl Fn(&mut Impairments)) {
        f(&mut self.a_to_b);
        f(&mut self.b_to_a);
    }
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn ser_opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Splits `text` into its number and the (trimmed) suffix after it.
fn split_number(text: &str) -> Result<(f64, String), String> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?}: expected a number"))?;
    if !value.is_finite() {
        return Err(format!("{text:?}: not a finite number"));
    }
    Ok((value, suffix.trim().to_ascii_lowercase()))
}

/// Parses a byte count: a number with an optional binary suffix, `K` = 1024, `M` = 2^20,
/// `G` = 2^30 (`64K`, `100M`, `1G`, `1.5M`; `KiB`, `MB` and the like mean the same).
///
/// # Errors
/// A message saying what was wrong.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let (value, suffix) = split_number(text)?;
    let scale: u64 = match suffix.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("{text:?}: unknown size suffix (K, M, G)")),
    };
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("{text:?}: too large"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a bandwidth in bits per second with an optional decimal suffix: `k` = 10^3,
/// `M` = 10^6, `G` = 10^9, optionally followed by `bit`, `bps` or `b/s` (`100M`,
/// `1Gbit`, `2.5gbps`). Zero means unlimited.
///
/// # Errors
/// A message saying what was wrong.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let (value, suffix) = split_number(text)?;
    let s = suffix
        .trim_end_matches("bit/s")
        .trim_end_matches("bit")
        .trim_end_matches("bps")
        .trim_end_matches("b/s");
    let scale = match s {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => return Err(format!("{text:?}: unknown rate suffix (k, M, G)")),
    };
    let bps = value * scale;
    if bps > u64::MAX as f64 / 2.0 {
        return Err(format!("{text:?}: too large"));
    }
    Ok(bps.round() as u64)
}

/// Parses a duration: a number and a unit, `ns`, `us`, `ms`, `s`, `m`/`min` or `h`;
/// a bare `0` is zero.
///
/// # Errors
/// A message saying what was wrong.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (value, suffix) = split_number(text)?;
    let secs = match suffix.as_str() {
        "ns" => value * 1e-9,
        "us" | "µs" => value * 1e-6,
        "ms" => value * 1e-3,
        "s" | "sec" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "" if value == 0.0 => 0.0,
        _ => return Err(format!("{text:?}: give a unit (ns, us, ms, s, min, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{text:?}: {e}"))
}

/// Parses a probability: `5%` or `0.05`. A bare number above 1 is refused (write `5%`).
///
/// # Errors
/// A message saying what was wrong.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (p, pct) = match t.strip_suffix('%') {
        Some(n) => (n, true),
        None => (t, false),
    };
    let v: f64 = p
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: expected a probability like 5% or 0.05"))?;
    let v = if pct { v / 100.0 } else { v };
    if !(0.0..=1.0).contains(&v) {
        return Err(format!(
            "{text:?}: a probability is between 0 and 1 (or 0% and 100%)"
        ));
    }
    Ok(v)
}

/// Parses `VALUE` (both directions) or `A2B,B2A` (each direction) with `one`.
///
/// # Errors
/// The first error of `one`, or more than two values.
pub fn parse_pair<T: Clone>(
    text: &str,
    one: impl Fn(&str) -> Result<T, String>,
) -> Result<(T, T), String> {
    let parts: Vec<&str> = text.split(',').collect();
    match parts.as_slice() {
        [v] => {
            let v = one(v)?;
            Ok((v.clone(), v))
        }
        [a, b] => Ok((one(a)?, one(b)?)),
        _ => Err(format!(
            "{text:?}: one value for both directions or A2B,B2A"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("100M"), Ok(100 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("12345"), Ok(12345));
        assert_eq!(parse_bytes("2mb"), Ok(2 << 20));
        assert!(parse_bytes("5X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("1e30").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_rate("1Gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2.5gbps"), Ok(2_500_000_000));
        assert_eq!(parse_rate("64k"), Ok(64_000));
        assert_eq!(parse_rate("0"), Ok(0));
        assert!(parse_rate("3q").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("1e400s").is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("5%"), Ok(0.05));
        assert_eq!(parse_probability("0.1"), Ok(0.1));
        assert_eq!(parse_probability("0"), Ok(0.0));
        assert!(parse_probability("5").is_err());
        assert!(parse_probability("101%").is_err());
        assert!(parse_probability("NaN").is_err());
    }

    #[test]
    fn pairs() {
        assert_eq!(parse_pair("5%", parse_probability), Ok((0.05, 0.05)));
        assert_eq!(parse_pair("5%,0", parse_probability), Ok((0.05, 0.0)));
        assert!(parse_pair("1%,2%,3%", parse_probability).is_err());
    }

    #[test]
    fn congestion_names() {
        assert_eq!(parse_congestion("CUBIC"), Ok(Congestion::Cubic));
        assert_eq!(parse_congestion("reno"), Ok(Congestion::NewReno));
        assert_eq!(parse_congestion("bbr"), Ok(Congestion::Bbr));
        assert!(parse_congestion("vegas").is_err());
    }

    #[test]
    fn stack_config_types_serialise_as_the_report_names_them() {
        // The report's `congestion` field is the stack's Algorithm, named as before.
        let j = serde_json::to_string(&Congestion::NewReno).unwrap();
        assert_eq!(j, "\"newreno\"");
        let c: Congestion = serde_json::from_str("\"cubic\"").unwrap();
        assert_eq!(c, Congestion::Cubic);
        // TcpConfig round-trips, and a document that leaves fields out takes defaults.
        let d = ulnet_stack::tcp::TcpConfig::default();
        let j = serde_json::to_string(&d).unwrap();
        let back: ulnet_stack::tcp::TcpConfig = serde_json::from_str(&j).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), j);
        let partial: ulnet_stack::tcp::TcpConfig =
            serde_json::from_str(r#"{"sack": false, "congestion": "newreno"}"#).unwrap();
        assert!(!partial.sack && partial.timestamps);
        assert_eq!(partial.congestion, Congestion::NewReno);
    }

    #[test]
    fn link_config_deserialises_through_the_clamping_builder() {
        // ulnet-channel's `serde` feature: out-of-range knobs are clamped as the builder
        // clamps them, missing ones take a perfect wire's defaults, and a configuration
        // round-trips.
        let c: LinkConfig =
            serde_json::from_str(r#"{"loss": 5.0, "duplicate": -1.0, "rate_bps": 0}"#).unwrap();
        assert_eq!(c.loss_probability(), 1.0);
        assert_eq!(c.duplicate_probability(), 0.0);
        assert_eq!(c.rate(), None);
        assert_eq!(c, LinkConfig::new().loss(1.0));
        let full = LinkConfig::new()
            .burst_loss(0.01, 0.5)
            .delay(Duration::from_millis(10))
            .rate_bps(1_000_000)
            .queue_limit_frames(8);
        let back: LinkConfig =
            serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
        assert_eq!(back, full);
        assert!(serde_json::from_str::<LinkConfig>(r#"{"los": 0.1}"#).is_err());
    }
}
