//! Per-stage cycle accounting of the UDP path, ulnet's side (seed 002): the hooks the
//! runtime and the socket API call, the TSC's calibration against the monotonic clock,
//! and a printable breakdown.
//!
//! The accounting itself lives in [`ulnet_stack::stage`] (no_std, static aggregates, no
//! allocation per packet); it is compiled in with the `stage-cycles` feature and switched
//! on at run time with [`set_enabled`]. Without the feature every hook here is an empty
//! inline function, so the data path carries nothing; with it and the switch off, each
//! is a relaxed load and a branch not taken.
//!
//! The stages (see [`Stage`]) are timed with the TSC; [`calibrate`] converts cycles to
//! time, and [`tsc_flags`] says whether the CPU declares the TSC invariant (constant
//! rate across P-states, and running in deep C-states), which is what makes cycles on
//! one core comparable with cycles on another and with wall time.

#[cfg(feature = "stage-cycles")]
pub use ulnet_stack::stage::{
    enabled, now, record, reset, set_enabled, snapshot, Snapshot, Stage, StageFigures, STAGE_COUNT,
};

/// The loop is about to pop the receive ring.
#[inline(always)]
pub(crate) fn rx_poll() {
    #[cfg(feature = "stage-cycles")]
    ulnet_stack::stage::rx_poll();
}

/// A received frame is in hand.
#[inline(always)]
pub(crate) fn rx_frame() {
    #[cfg(feature = "stage-cycles")]
    ulnet_stack::stage::rx_frame();
}

/// The stack is done with a received frame.
#[inline(always)]
pub(crate) fn rx_frame_done() {
    #[cfg(feature = "stage-cycles")]
    ulnet_stack::stage::rx_frame_done();
}

/// Before the doorbell: the TSC when a traced frame waits for it, else 0.
#[inline(always)]
pub(crate) fn tx_flush_start() -> u64 {
    #[cfg(feature = "stage-cycles")]
    return ulnet_stack::stage::tx_flush_start();
    #[cfg(not(feature = "stage-cycles"))]
    0
}

/// After the doorbell that sent `frames` frames.
#[inline(always)]
pub(crate) fn tx_flushed(start: u64, frames: u64) {
    #[cfg(feature = "stage-cycles")]
    ulnet_stack::stage::tx_flushed(start, frames);
    #[cfg(not(feature = "stage-cycles"))]
    let _ = (start, frames);
}

/// A `send` call begins: the TSC (0 when the accounting is off).
#[inline(always)]
pub(crate) fn send_start() -> u64 {
    #[cfg(feature = "stage-cycles")]
    return ulnet_stack::stage::tx_enter();
    #[cfg(not(feature = "stage-cycles"))]
    0
}

/// The CPU's TSC flags from `/proc/cpuinfo`: (`constant_tsc`, `nonstop_tsc`). Both
/// together make the TSC invariant (Intel SDM vol. 3 §18.17.1).
///
/// # Errors
/// `/proc/cpuinfo` could not be read.
#[cfg(feature = "stage-cycles")]
pub fn tsc_flags() -> std::io::Result<(bool, bool)> {
    let text = std::fs::read_to_string("/proc/cpuinfo")?;
    let flags = text
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    Ok((has("constant_tsc"), has("nonstop_tsc")))
}

/// The TSC's rate in Hz, measured against `CLOCK_MONOTONIC` over `span` (the two clocks
/// read back to back at both ends; the shortest of three tries of each read pair bounds
/// the error by the reads' own cost).
#[cfg(feature = "stage-cycles")]
pub fn calibrate(span: std::time::Duration) -> f64 {
    use std::time::Instant;
    let pair = || {
        let mut best = (u64::MAX, Instant::now(), 0u64);
        for _ in 0..3 {
            let a = now();
            let t = Instant::now();
            let b = now();
            if b.wrapping_sub(a) < best.0 {
                best = (b.wrapping_sub(a), t, a + (b.wrapping_sub(a)) / 2);
            }
        }
        (best.1, best.2)
    };
    let (t0, c0) = pair();
    std::thread::sleep(span);
    let (t1, c1) = pair();
    let secs = t1.duration_since(t0).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    c1.wrapping_sub(c0) as f64 / secs
}

/// The breakdown as a text table: per stage the samples, mean and median cycles and
/// nanoseconds at `hz`, each direction's stage sum against its whole-path span.
#[cfg(feature = "stage-cycles")]
pub fn format(s: &Snapshot, hz: f64) -> String {
    use std::fmt::Write;
    let ns = |c: f64| if hz > 0.0 { c * 1e9 / hz } else { 0.0 };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<48} {:>9} {:>10} {:>10} {:>9} {:>6}",
        "stage", "samples", "mean cyc", "median cyc", "mean ns", "share"
    );
    let mut section = |title: &str, stages: &[Stage], whole: Option<Stage>| {
        let total: f64 = stages.iter().map(|x| s.get(*x).mean).sum();
        let _ = writeln!(out, "{title}");
        for st in stages {
            let f = s.get(*st);
            let share = if total > 0.0 {
                100.0 * f.mean / total
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  {:<46} {:>9} {:>10.0} {:>10.0} {:>9.0} {:>5.1}%",
                st.label(),
                f.count,
                f.mean,
                f.median,
                ns(f.mean),
                share
            );
        }
        if let Some(w) = whole {
            let f = s.get(w);
            let _ = writeln!(
                out,
                "  {:<46} {:>9} {:>10.0} {:>10.0} {:>9.0}   (stages add up to {:.0} cycles, {:+.1}%)",
                w.label(),
                f.count,
                f.mean,
                f.median,
                ns(f.mean),
                total,
                if f.mean > 0.0 {
                    100.0 * (total - f.mean) / f.mean
                } else {
                    0.0
                }
            );
        }
    };
    section("receive", &Stage::RX, Some(Stage::RxWhole));
    section("application", &[Stage::App], None);
    section("transmit", &Stage::TX, Some(Stage::TxWhole));
    let _ = writeln!(
        out,
        "not traced: {} received frames, {} sent datagrams (not UDP, queued behind others, or a trace in flight); TSC {:.3} GHz",
        s.rx_untraced,
        s.tx_untraced,
        hz / 1e9
    );
    out
}
