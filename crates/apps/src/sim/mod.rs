//! Whole-stack simulations in virtual time: two ulnet interfaces joined by the simulated
//! wire of [`ulnet_channel::sim`], running real TCP transfers through the complete
//! stack (Ethernet, ARP, IPv4, TCP) under configurable impairments.
//!
//! This is what `ulnet sim tcp` runs and what the TCP acceptance tests
//! (`crates/apps/tests/sim_tcp*.rs`) and benchmarks reuse. In: [`TcpSimOptions`]. Out:
//! a [`TcpSimReport`] (serialisable): byte-exact delivery checked with SHA-256, final
//! states, goodput, retransmissions, windows, wire counters. A run is a pure function
//! of its options (the seed included) apart from `wall_s`.
//!
//! Invariants: a run never hangs: it ends when every connection has closed, or reports
//! failure when virtual time passes `time_limit`, real time passes `wall_limit`, nothing
//! is left to happen (stall), or time stops moving (livelock). Memory is bounded by the
//! stacks' configuration and the wire's in-flight limit.
//!
//! ```
//! use ulnet_apps::sim::{run_tcp, TcpSimOptions};
//!
//! let mut opts = TcpSimOptions::default();
//! opts.bytes = 64 * 1024;
//! opts.both_ways(|d| d.loss = 0.02);
//! let report = run_tcp(&opts)?;
//! assert!(report.ok, "{:?}", report.failures);
//! assert_eq!(report.bytes_received, 64 * 1024);
//! # Ok::<(), std::io::Error>(())
//! ```

mod net;
mod options;
mod payload;
mod report;
mod run;

pub use net::TapCounters;
pub use options::{
    parse_ack_policy, parse_bytes, parse_congestion, parse_duration, parse_pair, parse_probability,
    parse_rate, Congestion, Impairments, TcpSimOptions,
};
pub use payload::Stream;
pub use report::{
    ConnReport, CwndSample, NodeTcpReport, Retransmissions, Spread, TcpSimReport, Windows,
    WireDirection, WireReport,
};
pub use run::{run_tcp, PORT};
