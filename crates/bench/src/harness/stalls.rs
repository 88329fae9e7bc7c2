//! The machine's own stalls: how often, and for how long, a CPU that spins in user space
//! stops running it (the guest kernel's timer tick, the host's interrupts and exits under
//! a hypervisor), with no network and no other work.
//!
//! Why a latency experiment needs it: a ping-pong round trip that meets a stall is longer
//! by the stall. The critical path of a round trip between two busy CPUs runs on each
//! about half the time, so with each CPU stalling `r` times a second a round trip of
//! length `T` meets one with a probability of about `r·T`. Once that reaches 1% the p99
//! holds a stall whatever the stack does, and p99 ratios between systems whose round
//! trips are on either side of that line compare the machine, not the stacks
//! (docs/performance-log.md, "Session 26": on the Firecracker guest of sessions 22-26 each
//! vCPU stops for ~20 µs every millisecond, and for 30-55 µs at each 4 ms tick).

use std::io;
use std::time::{Duration, Instant};

use super::{io_err, pin, Metrics};

/// A pause shorter than this is not a stall (a clock read in the loop takes ~25 ns; a
/// cache miss a few hundred).
///
/// It was 4 µs until session 31, which hid most of them on the Intel guest of sessions
/// 29-31: there each spinning vCPU also stops for 2-3 µs, from none to 12,000 times a
/// second by the host's phase, beside ~500 longer stalls (~25 µs). In the phases with
/// them the slow round trips of a busy ping-pong (1-4.5% of the kernel's and ulnet's,
/// 1-3% of the bare channel's, about 4 µs longer than the rest) decide every row's p99,
/// and with 4 µs the probe put the line at ~20 µs, past every p50
/// (docs/performance-log.md, "Session 31").
pub const THRESHOLD: Duration = Duration::from_micros(1);

/// Stalls one CPU recorded at most (the record is allocated before the spin, so the
/// probe's own allocation is never one of them).
const MAX_STALLS: usize = 100_000;

/// The stalls one spinning CPU saw: when each began (from the start of the spin) and
/// how long it lasted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuStalls {
    /// How long the CPU spun.
    pub window: Duration,
    /// `(start, length)` of each stall, in order.
    pub stalls: Vec<(Duration, Duration)>,
}

/// Spins the calling thread, pinned to `cpu`, on the monotonic clock for `window`, and
/// records each gap between two reads of at least [`THRESHOLD`].
///
/// # Errors
/// The thread could not be pinned.
pub fn spin(cpu: usize, window: Duration) -> io::Result<CpuStalls> {
    pin(cpu)?;
    let mut stalls = Vec::with_capacity(MAX_STALLS);
    let start = Instant::now();
    let mut last = start;
    loop {
        let now = Instant::now();
        let gap = now - last;
        if gap >= THRESHOLD && stalls.len() < MAX_STALLS {
            stalls.push((last - start, gap));
        }
        last = now;
        if now - start >= window {
            break;
        }
    }
    Ok(CpuStalls {
        window: last - start,
        stalls,
    })
}

/// Spins every CPU of `cpus` at once for `window` (a ping-pong keeps both its CPUs
/// busy, and a host may treat one busy vCPU differently from two).
///
/// # Errors
/// A thread could not be pinned or did not finish.
pub fn probe(cpus: &[usize], window: Duration) -> io::Result<Vec<CpuStalls>> {
    std::thread::scope(|s| {
        let threads: Vec<_> = cpus
            .iter()
            .map(|&cpu| s.spawn(move || spin(cpu, window)))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| io_err("stall probe thread panicked"))?
            })
            .collect()
    })
}

/// What a probe found, over all its CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Stalls per second of one CPU (the mean over the CPUs).
    pub per_cpu_s: f64,
    /// Median, 90th percentile and longest stall, µs.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p90_us: f64,
    /// See `p50_us`.
    pub max_us: f64,
    /// Share of the CPUs' time lost in stalls, percent.
    pub time_pct: f64,
    /// Median spacing between two stalls of one CPU, ms (`None` with fewer than two).
    pub spacing_ms: Option<f64>,
    /// The round trip (µs) that meets a stall in 1% of cases: `0.01 / per_cpu_s` (see
    /// the module's text). `None` when no stall was seen.
    pub p99_reach_us: Option<f64>,
}

impl Figures {
    /// The figures of `cpus`' records.
    pub fn of(cpus: &[CpuStalls]) -> Figures {
        let secs: f64 = cpus.iter().map(|c| c.window.as_secs_f64()).sum();
        let mut lens: Vec<f64> = cpus
            .iter()
            .flat_map(|c| c.stalls.iter().map(|s| s.1.as_secs_f64() * 1e6))
            .collect();
        lens.sort_by(f64::total_cmp);
        let total_us: f64 = lens.iter().sum();
        let mut spacings: Vec<f64> = cpus
            .iter()
            .flat_map(|c| {
                c.stalls
                    .windows(2)
                    .map(|w| (w[1].0 - w[0].0).as_secs_f64() * 1e3)
            })
            .collect();
        spacings.sort_by(f64::total_cmp);
        let per_cpu_s = if secs > 0.0 {
            lens.len() as f64 / secs
        } else {
            0.0
        };
        let q = |v: &[f64], q: f64| -> f64 {
            if v.is_empty() {
                0.0
            } else {
                v[((v.len() - 1) as f64 * q).round() as usize]
            }
        };
        Figures {
            per_cpu_s,
            p50_us: q(&lens, 0.5),
            p90_us: q(&lens, 0.9),
            max_us: lens.last().copied().unwrap_or(0.0),
            time_pct: if secs > 0.0 {
                total_us / (secs * 1e6) * 100.0
            } else {
                0.0
            },
            spacing_ms: (!spacings.is_empty()).then(|| q(&spacings, 0.5)),
            p99_reach_us: (per_cpu_s > 0.0).then(|| 0.01 / per_cpu_s * 1e6),
        }
    }

    /// As a measurement's metrics.
    pub fn metrics(&self) -> Metrics {
        let mut m = Metrics::new();
        m.insert("stalls_per_cpu_s".into(), self.per_cpu_s);
        m.insert("stall_p50_us".into(), self.p50_us);
        m.insert("stall_p90_us".into(), self.p90_us);
        m.insert("stall_max_us".into(), self.max_us);
        m.insert("stall_time_pct".into(), self.time_pct);
        if let Some(s) = self.spacing_ms {
            m.insert("stall_spacing_ms".into(), s);
        }
        if let Some(r) = self.p99_reach_us {
            m.insert("p99_reach_us".into(), r);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn figures_of_a_periodic_stall() {
        // One CPU, 10 ms: a 20 µs stall every millisecond and a 40 µs one at 4 ms.
        let mut stalls: Vec<(Duration, Duration)> =
            (0..10).map(|i| (us(1000 * i + 300), us(20))).collect();
        stalls.insert(4, (us(3800), us(40)));
        let c = CpuStalls {
            window: Duration::from_millis(10),
            stalls,
        };
        let f = Figures::of(&[c.clone(), c]);
        assert!((f.per_cpu_s - 1100.0).abs() < 1e-6, "{f:?}");
        assert_eq!(f.p50_us, 20.0);
        assert_eq!(f.max_us, 40.0);
        // 11 stalls, 240 µs of every 10 ms.
        assert!((f.time_pct - 2.4).abs() < 1e-9, "{f:?}");
        assert_eq!(f.spacing_ms, Some(1.0));
        let reach = f.p99_reach_us.unwrap();
        assert!((reach - 1e4 / 1100.0).abs() < 1e-9, "{reach}");
        let m = f.metrics();
        assert_eq!(m.get("stall_p50_us"), Some(&20.0));
    }

    #[test]
    fn no_stall_no_reach() {
        let f = Figures::of(&[CpuStalls {
            window: Duration::from_millis(5),
            stalls: Vec::new(),
        }]);
        assert_eq!(f.per_cpu_s, 0.0);
        assert_eq!(f.p99_reach_us, None);
        assert_eq!(f.spacing_ms, None);
        assert!(!f.metrics().contains_key("p99_reach_us"));
    }

    #[test]
    fn a_short_spin_finds_the_window_and_records_in_order() {
        let c = spin(0, Duration::from_millis(20)).unwrap();
        assert!(c.window >= Duration::from_millis(20));
        assert!(c.stalls.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(c.stalls.iter().all(|s| s.1 >= THRESHOLD));
    }
}
