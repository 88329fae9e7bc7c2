//! `ulnet sim`: transfers between two ulnet stacks on the simulated wire, in virtual
//! time (see docs/sim.md).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use ulnet_apps::sim::{
    parse_ack_policy, parse_bytes, parse_congestion, parse_duration, parse_pair, parse_probability,
    parse_rate, run_tcp, Congestion, Impairments, TcpSimOptions,
};

/// Subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Bulk TCP transfers from node A (198.18.0.1, or 2001:2::1 with --ipv6) to a
    /// listener on node B (198.18.0.2 or 2001:2::2)
    /// over an impaired simulated cable; prints a JSON report and fails unless every
    /// byte arrived intact and every connection closed cleanly.
    Tcp(Box<TcpArgs>),
}

/// A value for both directions, or `A2B,B2A`.
type Pair<T> = (T, T);

fn probability_pair(s: &str) -> Result<Pair<f64>, String> {
    parse_pair(s, parse_probability)
}

fn duration_pair(s: &str) -> Result<Pair<Duration>, String> {
    parse_pair(s, parse_duration)
}

fn rate_pair(s: &str) -> Result<Pair<u64>, String> {
    parse_pair(s, parse_rate)
}

fn count_pair(s: &str) -> Result<Pair<usize>, String> {
    parse_pair(s, |v| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("{v:?}: expected a frame count"))
    })
}

fn size_pair(s: &str) -> Result<Pair<usize>, String> {
    parse_pair(s, |v| parse_bytes(v).map(|n| n as usize))
}

fn size(s: &str) -> Result<usize, String> {
    parse_bytes(s).and_then(|n| usize::try_from(n).map_err(|_| format!("{s:?}: too large")))
}

fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("{s:?}: on or off")),
    }
}

fn segment_list(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{v:?}: a segment number from 1"))
        })
        .collect()
}

/// Flags of `ulnet sim tcp`. Impairment flags take one value for both directions or
/// `A2B,B2A` (data direction first).
#[derive(Debug, clap::Args)]
pub struct TcpArgs {
    /// Payload bytes per connection (K, M, G = 2^10, 2^20, 2^30).
    #[arg(long, default_value = "1M", value_parser = parse_bytes)]
    bytes: u64,
    /// Concurrent connections, all to one listening socket.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Seed of the wire's random draws, the payload and the ISN keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Frame loss probability (5% or 0.05).
    #[arg(long, value_parser = probability_pair)]
    loss: Option<Pair<f64>>,
    /// Probability that a frame is held back so later frames overtake it.
    #[arg(long, value_parser = probability_pair)]
    reorder: Option<Pair<f64>>,
    /// How long a reordered frame is held back (default 1ms).
    #[arg(long, value_parser = duration_pair)]
    reorder_delay: Option<Pair<Duration>>,
    /// Frame duplication probability.
    #[arg(long, value_parser = probability_pair)]
    duplicate: Option<Pair<f64>>,
    /// Probability of flipping one bit of a frame.
    #[arg(long, value_parser = probability_pair)]
    corrupt: Option<Pair<f64>>,
    /// One-way propagation delay (10ms, 250us).
    #[arg(long, value_parser = duration_pair, conflicts_with = "rtt")]
    delay: Option<Pair<Duration>>,
    /// Round-trip propagation delay, split evenly between the directions.
    #[arg(long, value_parser = parse_duration)]
    rtt: Option<Duration>,
    /// Extra random delay per frame, uniform in 0..=JITTER (reorders when large).
    #[arg(long, value_parser = duration_pair)]
    jitter: Option<Pair<Duration>>,
    /// Bottleneck bandwidth in bit/s (100M, 1G; k/M/G = 10^3/10^6/10^9).
    #[arg(long, value_parser = rate_pair)]
    bandwidth: Option<Pair<u64>>,
    /// Drop-tail limit of the bottleneck queue, frames (with --bandwidth).
    #[arg(long, value_parser = count_pair)]
    queue: Option<Pair<usize>>,
    /// Drop-tail limit of the bottleneck queue, bytes (with --bandwidth).
    #[arg(long, value_parser = size_pair)]
    queue_bytes: Option<Pair<usize>>,
    /// Send buffer per connection, bytes.
    #[arg(long, value_parser = size)]
    send_buffer: Option<usize>,
    /// Receive buffer per connection (the largest window advertised), bytes.
    #[arg(long, value_parser = size)]
    recv_buffer: Option<usize>,
    /// Both buffers at once.
    #[arg(long, value_parser = size)]
    buffer: Option<usize>,
    /// Congestion control: newreno, cubic or bbr.
    #[arg(long = "cc", default_value = "cubic", value_parser = parse_congestion)]
    congestion: Congestion,
    /// Selective acknowledgements (RFC 2018): on or off.
    #[arg(long, default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    sack: bool,
    /// Timestamps (RFC 7323): on or off.
    #[arg(long, default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    timestamps: bool,
    /// Window scaling (RFC 7323): on or off.
    #[arg(long, default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    window_scaling: bool,
    /// Link MTU (IP header included).
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// Cap the TCP MSS (below MTU - 40).
    #[arg(long)]
    mss: Option<u16>,
    /// Delayed-ACK timeout (0 acknowledges every segment at once).
    #[arg(long, value_parser = parse_duration)]
    delayed_ack: Option<Duration>,
    /// How node B, the receiver, paces its ACKs: `batch` (ulnet's, one per receive
    /// batch) or `linux` (every second segment, SACK compression: a Linux peer).
    #[arg(long, default_value = "batch", value_parser = parse_ack_policy)]
    receiver_acks: ulnet::stack::tcp::AckPolicy,
    /// Pre-load the neighbour caches instead of resolving with ARP (or, with --ipv6,
    /// neighbour discovery).
    #[arg(long)]
    static_arp: bool,
    /// Run over IPv6: A is 2001:2::1, B 2001:2::2 (/64), resolved by neighbour
    /// discovery; the MSS is sized for the 40-byte IPv6 header.
    #[arg(long)]
    ipv6: bool,
    /// Lose these data segments sent by A (1 = the first; comma list or repeated).
    #[arg(long = "drop-segment", value_parser = segment_list)]
    drop_segments: Vec<Vec<u64>>,
    /// Fail when virtual time passes this.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    time_limit: Duration,
    /// Fail when the run takes this much real time.
    #[arg(long, default_value = "10min", value_parser = parse_duration)]
    wall_limit: Duration,
    /// Capture every frame node A sends or receives (pcap, virtual timestamps).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Capture every frame node B sends or receives.
    #[arg(long)]
    pcap_b: Option<PathBuf>,
    /// Write connection 0's cwnd, ssthresh and srtt over time as CSV.
    #[arg(long)]
    cwnd_trace: Option<PathBuf>,
    /// Print the report on one line.
    #[arg(long)]
    compact: bool,
}

impl TcpArgs {
    fn options(&self) -> TcpSimOptions {
        let mut o = TcpSimOptions {
            bytes: self.bytes,
            connections: self.connections,
            seed: self.seed,
            congestion: self.congestion,
            sack: self.sack,
            timestamps: self.timestamps,
            window_scaling: self.window_scaling,
            send_buffer: self.send_buffer.or(self.buffer),
            recv_buffer: self.recv_buffer.or(self.buffer),
            mtu: self.mtu,
            mss: self.mss,
            delayed_ack: self.delayed_ack,
            receiver_acks: self.receiver_acks,
            static_arp: self.static_arp,
            ipv6: self.ipv6,
            drop_segments: self.drop_segments.concat(),
            time_limit: self.time_limit,
            wall_limit: self.wall_limit,
            pcap: self.pcap.clone(),
            pcap_b: self.pcap_b.clone(),
            cwnd_trace: self.cwnd_trace.is_some(),
            ..TcpSimOptions::default()
        };
        let delay = self.delay.or(self.rtt.map(|r| (r / 2, r / 2)));
        let dirs: [(&mut Impairments, usize); 2] = [(&mut o.a_to_b, 0), (&mut o.b_to_a, 1)];
        for (d, i) in dirs {
            let pick = |p: Option<(f64, f64)>| p.map_or(0.0, |p| if i == 0 { p.0 } else { p.1 });
            d.loss = pick(self.loss);
            d.reorder = pick(self.reorder);
            d.duplicate = pick(self.duplicate);
            d.corrupt = pick(self.corrupt);
            let side = |p: (Duration, Duration)| if i == 0 { p.0 } else { p.1 };
            d.reorder_delay = self.reorder_delay.map(side);
            d.delay = delay.map(side).unwrap_or_default();
            d.jitter = self.jitter.map(side).unwrap_or_default();
            d.rate_bps = self
                .bandwidth
                .map(|p| if i == 0 { p.0 } else { p.1 })
                .filter(|&r| r > 0);
            d.queue_frames = self.queue.map(|p| if i == 0 { p.0 } else { p.1 });
            d.queue_bytes = self.queue_bytes.map(|p| if i == 0 { p.0 } else { p.1 });
        }
        o
    }
}

fn tcp(args: TcpArgs) -> anyhow::Result<()> {
    let opts = args.options();
    let report = run_tcp(&opts).context("setting up the simulation")?;
    if let Some(path) = &args.cwnd_trace {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        report
            .write_cwnd_csv(&mut f)
            .and_then(|()| std::io::Write::flush(&mut f))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let json = if args.compact {
        serde_json::to_string(&report)?
    } else {
        serde_json::to_string_pretty(&report)?
    };
    println!("{json}");
    if !report.ok {
        anyhow::bail!(
            "the transfer failed: {}",
            report
                .failures
                .first()
                .map_or("see the report", String::as_str)
        );
    }
    Ok(())
}

/// Runs the subcommand.
///
/// # Errors
/// Bad options, I/O errors writing the capture or trace, or a failed transfer (after
/// printing its report).
pub fn run(c: Command) -> anyhow::Result<()> {
    match c {
        Command::Tcp(args) => tcp(*args),
    }
}
