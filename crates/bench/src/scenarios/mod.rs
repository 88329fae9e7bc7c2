//! Measurement scenarios of ulnet's data path against the raw channel and the kernel
//! (feature `scenarios`): each builds its own testbed, alternates the two sides of the
//! comparison round by round (so slow drifts of a shared machine hit both alike), and
//! reports medians and their ratio.
//!
//! - [`udp_echo::udp_echo_vs_raw`]: the AF_XDP channel receiving and dropping (no
//!   protocol work) against ulnet's UDP echo on the same channel, one kernel generator.
//! - [`tcp_rx::tcp_rx_vs_kernel`]: a kernel TCP sender in the peer namespace into ulnet's
//!   discard service over AF_XDP against the same sender into a kernel socket receiver
//!   (offloads off on both veth ends), in the same run.
//!
//! Pinning: the load (generator or sender) runs on CPU 0 and the receiver under test on
//! CPU 1 (when the machine has two), so the two never share a core and the scheduler's
//! placement does not differ between rounds; the kernel's softirq work runs wherever the
//! kernel puts it.
//!
//! What CPU figures count: the receiving thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`).
//! On veth that includes the kernel work its transmissions cause on the other side
//! (`veth_xmit` runs the peer's receive path on the sender's core, LINUX-NOTES).

pub mod tcp_rx;
pub mod udp_echo;

mod load;

use std::fmt;
use std::io;

pub use tcp_rx::{tcp_rx_vs_kernel, TcpRxOptions, TcpRxReport};
pub use udp_echo::{udp_echo_vs_raw, UdpEchoOptions, UdpEchoReport};

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A small Markdown table: a title, a header row and data rows.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// One line above the table.
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.title)?;
        writeln!(f, "| {} |", self.header.join(" | "))?;
        writeln!(
            f,
            "|{}",
            self.header.iter().map(|_| " --- |").collect::<String>()
        )?;
        for r in &self.rows {
            writeln!(f, "| {} |", r.join(" | "))?;
        }
        Ok(())
    }
}

/// Turns a testbed or channel error into an `io::Error` carrying its message.
fn io_err(e: impl fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The CPU the load threads run on.
const LOAD_CPU: usize = 0;
/// The CPU the receiver under test runs on.
const RECEIVER_CPU: usize = 1;

/// Pins the calling thread to `cpu`, if the machine has it (one-CPU machines run
/// unpinned).
fn pin(cpu: usize) -> io::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpu >= cpus {
        return Ok(());
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Opens ulnet's runtime for `cfg`, retrying while the queue is still bound: the kernel
/// releases a closed AF_XDP socket's buffer pool from a workqueue, so binding right
/// after the previous round's channel was dropped can fail with `EBUSY` for a moment.
fn open_runtime(
    cfg: &ulnet::runtime::NetConfig,
) -> io::Result<ulnet::runtime::Runtime<ulnet::runtime::AnyChannel>> {
    let mut tries = 0;
    loop {
        match ulnet::runtime::open(cfg) {
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(40));
            }
            r => return r,
        }
    }
}

/// Joins a scenario thread, turning a panic into an error.
fn join<T>(t: std::thread::JoinHandle<io::Result<T>>, what: &str) -> io::Result<T> {
    t.join()
        .map_err(|_| io::Error::other(format!("{what} panicked")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_tables() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let t = Table {
            title: "t".into(),
            header: vec!["a".into(), "b".into()],
            rows: vec![vec!["1".into(), "2".into()]],
        };
        assert_eq!(t.to_string(), "t\n| a | b |\n| --- | --- |\n| 1 | 2 |\n");
    }
}
