//! The seed experiments, one module each, and the registry `ulnet bench` runs from.
//!
//! An experiment builds its own testbed, declares its systems, cases and views on a
//! [`Ctx`], and records raw rounds (alternating the systems with [`Ctx::alternate`]).
//! It also knows its seed's own figure and how to say, from the summaries, whether the
//! seed's claim holds here ([`Experiment::verdict`]).

mod attack;
mod disk;
mod dispatch;
mod doorbell;
mod hurd_tcp;
mod hurd_udp;
mod latency;
mod load;
mod loss;
mod netchannel_cpu;
mod raw;
mod same_binary;
mod udp_echo;
mod xcheck;

use std::time::Duration;

use crate::harness::{Ctx, Plan};
use crate::results::ExperimentResult;
use crate::summary::Summary;

/// One experiment of `ulnet bench`.
pub trait Experiment: Sync {
    /// The name on the command line (`hurd-tcp`).
    fn name(&self) -> &'static str;
    /// The seed document it re-runs (`000`), or `-` for one of ulnet's own.
    fn seed(&self) -> &'static str;
    /// One line for `ulnet bench list` and the report's heading.
    fn title(&self) -> &'static str;
    /// Roughly how long it takes with `plan`.
    fn estimate(&self, plan: &Plan) -> Duration;
    /// Programs it needs on the machine (checked before the run starts).
    fn tools(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether it runs over IPv6 when the plan asks ([`Plan::ipv6`]); an experiment that
    /// does not is refused by `ulnet bench --ipv6` rather than run over IPv4.
    fn supports_ipv6(&self) -> bool {
        false
    }
    /// Runs it, recording into `ctx`.
    ///
    /// # Errors
    /// A failure that stops the whole experiment (no testbed, say); a failure of one
    /// measurement is recorded in `ctx` instead and the rest goes on.
    fn run(&self, ctx: &mut Ctx<'_>) -> std::io::Result<()>;
    /// The seed's own figure, as Markdown (a table or a quotation), shown beside ours.
    fn seed_figure(&self) -> &'static str;
    /// Whether the seed's claim holds here, one sentence each, computed from `s`.
    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String>;
    /// The project's speed goals (issue 11) this experiment judges, as sentences also
    /// found among its [`verdict`](Experiment::verdict): the report lists them first, so
    /// a reader sees every goal's state before the sections that explain it. None by
    /// default.
    fn goals(&self, _r: &ExperimentResult, _s: &Summary) -> Vec<String> {
        Vec::new()
    }
}

/// Every experiment, in the order a full run takes them.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![
        &hurd_tcp::HurdTcp,
        &hurd_udp::HurdUdp,
        &doorbell::Doorbell,
        &netchannel_cpu::NetchannelCpu,
        &latency::Latency,
        &raw::Raw,
        &loss::Loss,
        &udp_echo::UdpEcho,
        &dispatch::Dispatch,
        &disk::Disk,
        &attack::Attack,
        &same_binary::SameBinary,
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}
