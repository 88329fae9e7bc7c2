//! What every experiment runs on: the run's [`Plan`] (profile, rounds, backends), the
//! [`Ctx`] an experiment records its systems, cases, views and raw rounds into, the
//! alternation of systems round by round ([`Ctx::alternate`]), CPU accounting over a
//! measurement window ([`Window`]), core pinning and the progress display.
//!
//! Pinning: [`pin_sut`] puts the calling thread (and every thread it spawns later, ulnet's
//! runtime among them) on CPU 1; load generators pin themselves to CPU 0 with
//! [`pin_load`]. On veth the kernel's receive work runs on the *sending* core.

pub mod progress;
pub mod stalls;
pub mod sysinfo;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ulnet::runtime::Backend;

use crate::cpu::{CpuDelta, CpuSample};
use crate::results::{Case, ExperimentResult, Measurement, System, SystemKind, View};
pub use progress::Progress;

/// The CPU load generators and peers run on.
pub const LOAD_CPU: usize = 0;
/// The CPU the system under test runs on.
pub const SUT_CPU: usize = 1;

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    /// Seconds per experiment: only proves the harness works (CI).
    Smoke,
    /// Scaled-down sizes (the whole run in about 10 minutes on 2 cores).
    Quick,
    /// The seeds' sizes where they fit (whole run under 10 minutes).
    Default,
    /// Every variant and longer windows (whole run under 30 minutes).
    Full,
}

impl Profile {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Smoke => "smoke",
            Profile::Quick => "quick",
            Profile::Default => "default",
            Profile::Full => "full",
        }
    }

    /// Picks one of four values by profile (smoke, quick, default, full).
    pub fn pick<T>(self, smoke: T, quick: T, default: T, full: T) -> T {
        match self {
            Profile::Smoke => smoke,
            Profile::Quick => quick,
            Profile::Default => default,
            Profile::Full => full,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The size of the run.
    pub profile: Profile,
    /// Rounds per system and case (each round runs every system once, alternating).
    pub rounds: u32,
    /// ulnet backends to measure where an experiment compares them (empty: its default).
    pub backends: Vec<Backend>,
    /// Where the report goes.
    pub out: PathBuf,
    /// Experiments that take the testbed run over IPv6 (2001:2::/48, RFC 5180) instead
    /// of IPv4 where they support it (`ulnet bench --ipv6`): ulnet and the kernel alike.
    pub ipv6: bool,
    /// Only these cases (`ulnet bench --case`, by id; empty: all): the others are not
    /// measured.
    pub cases: Vec<String>,
    /// Only these systems (`ulnet bench --system`, by id; empty: all).
    pub systems: Vec<String>,
}

impl Plan {
    /// Whether case `id` is measured (see [`Plan::cases`]).
    pub fn wants_case(&self, id: &str) -> bool {
        self.cases.is_empty() || self.cases.iter().any(|c| c == id)
    }

    /// Whether system `id` is measured (see [`Plan::systems`]).
    pub fn wants_system(&self, id: &str) -> bool {
        self.systems.is_empty() || self.systems.iter().any(|s| s == id)
    }

    /// `wanted` if the user named no backend, else the named ones that are in `wanted`.
    pub fn backends_or(&self, wanted: &[Backend]) -> Vec<Backend> {
        if self.backends.is_empty() {
            wanted.to_vec()
        } else {
            wanted
                .iter()
                .copied()
                .filter(|b| self.backends.contains(b))
                .collect()
        }
    }
}

/// Metrics of one round, by name.
pub type Metrics = BTreeMap<String, f64>;

/// An experiment's recording context.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The run's plan.
    pub plan: &'a Plan,
    progress: &'a Progress,
    result: ExperimentResult,
    seq: u32,
    started: Instant,
}

impl<'a> Ctx<'a> {
    /// A context for experiment `name` of seed `seed`.
    pub fn new(
        plan: &'a Plan,
        progress: &'a Progress,
        name: &str,
        seed: &str,
        title: &str,
    ) -> Self {
        let mut result = ExperimentResult::new(name, seed, title);
        if !plan.cases.is_empty() || !plan.systems.is_empty() {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "all".to_owned()
                } else {
                    v.join(", ")
                }
            };
            result.notes.push(format!(
                "Part of the experiment only (--case, --system): cases {}; systems {}. A verdict covers what ran.",
                list(&plan.cases),
                list(&plan.systems)
            ));
        }
        Ctx {
            plan,
            progress,
            result,
            seq: 0,
            started: Instant::now(),
        }
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.plan.profile
    }

    /// Rounds per system and case.
    pub fn rounds(&self) -> u32 {
        self.plan.rounds
    }

    /// Whether the run is over IPv6 ([`Plan::ipv6`]); an experiment that supports it
    /// also records it as the `family` parameter.
    pub fn ipv6(&mut self) -> bool {
        if self.plan.ipv6 {
            self.param("family", "IPv6 (testbed 2001:2:0:<slot>::/64, RFC 5180)");
        }
        self.plan.ipv6
    }

    /// Records an exact parameter of the experiment.
    pub fn param(&mut self, key: &str, value: impl fmt::Display) {
        self.result.params.insert(key.into(), value.to_string());
    }

    /// Declares a system (replacing one of the same id, so setup found only once the
    /// channel is open, such as the XDP mode, can be filled in later).
    pub fn system(
        &mut self,
        id: &str,
        label: &str,
        kind: SystemKind,
        engine_only: bool,
        setup: &[(&str, String)],
    ) {
        let s = System {
            id: id.into(),
            label: label.into(),
            kind,
            engine_only,
            setup: setup
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        };
        match self.result.systems.iter_mut().find(|x| x.id == id) {
            Some(x) => *x = s,
            None => self.result.systems.push(s),
        }
    }

    /// Adds `key = value` to system `id`'s setup.
    pub fn system_setup(&mut self, id: &str, key: &str, value: impl fmt::Display) {
        if let Some(s) = self.result.systems.iter_mut().find(|x| x.id == id) {
            s.setup.insert(key.into(), value.to_string());
        }
    }

    /// Declares a case with its numeric parameters.
    pub fn case(&mut self, id: &str, label: &str, params: &[(&str, f64)]) {
        if self.result.case(id).is_none() {
            self.result.cases.push(Case {
                id: id.into(),
                label: label.into(),
                params: params.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            });
        }
    }

    /// Adds a table or a plot.
    pub fn view(&mut self, v: View) {
        self.result.views.push(v);
    }

    /// Adds a note for the reader.
    pub fn note(&mut self, text: impl Into<String>) {
        self.result.notes.push(text.into());
    }

    /// Shows what is being measured now.
    pub fn status(&self, msg: impl Into<String>) {
        self.progress
            .status(&format!("{}: {}", self.result.name, msg.into()));
    }

    /// Records one round and prints a line for it.
    pub fn record(&mut self, case: &str, system: &str, round: u32, metrics: Metrics) {
        let line = format!(
            "{:<15} {:<28} {:<26} round {}  {}",
            self.result.name,
            self.result.case(case).map_or(case, |c| c.label.as_str()),
            self.result
                .system(system)
                .map_or(system, |s| s.label.as_str()),
            round + 1,
            headline(&metrics)
        );
        self.progress.line(&line);
        self.result.measurements.push(Measurement {
            case: case.into(),
            system: system.into(),
            round,
            seq: self.seq,
            metrics,
        });
        self.seq += 1;
    }

    /// Records that a measurement failed, and prints it.
    pub fn fail(&mut self, case: &str, system: &str, round: u32, err: &dyn fmt::Display) {
        let msg = format!("{case} / {system} / round {}: {err}", round + 1);
        self.progress
            .line(&format!("{:<15} FAILED {msg}", self.result.name));
        self.result.errors.push(msg);
    }

    /// Runs `rounds` rounds of `case`, each round every system of `systems` once, in
    /// turn (kernel, ulnet, kernel, ulnet, ... when listed so), so a slow drift of the
    /// machine hits every system alike. A failed measurement is recorded as an error and
    /// the others go on; a system that fails twice is not tried again on this case.
    pub fn alternate(
        &mut self,
        case: &str,
        systems: &[&str],
        mut measure: impl FnMut(&str, u32) -> io::Result<Metrics>,
    ) {
        if !self.plan.wants_case(case) {
            return;
        }
        let plan = self.plan;
        let systems: Vec<&str> = systems
            .iter()
            .copied()
            .filter(|s| plan.wants_system(s))
            .collect();
        let mut failures: BTreeMap<&str, u32> = BTreeMap::new();
        for round in 0..self.plan.rounds {
            for &sys in &systems {
                if failures.get(sys).copied().unwrap_or(0) >= 2 {
                    continue;
                }
                let label = self
                    .result
                    .system(sys)
                    .map_or(sys.to_owned(), |s| s.label.clone());
                let case_label = self
                    .result
                    .case(case)
                    .map_or(case.to_owned(), |c| c.label.clone());
                self.status(format!("{case_label}, {label}, round {}", round + 1));
                match measure(sys, round) {
                    Ok(m) => self.record(case, sys, round, m),
                    Err(e) => {
                        *failures.entry(sys).or_default() += 1;
                        self.fail(case, sys, round, &e);
                    }
                }
                self.progress.tick_done();
            }
        }
    }

    /// Ends the experiment and hands over its result.
    pub fn finish(mut self) -> ExperimentResult {
        self.result.elapsed_s = self.started.elapsed().as_secs_f64();
        self.result
    }

    /// The result so far.
    pub fn result(&self) -> &ExperimentResult {
        &self.result
    }
}

/// The first few metrics of a round, for its progress line.
fn headline(m: &Metrics) -> String {
    m.iter()
        .take(4)
        .map(|(k, v)| format!("{k}={}", short(*v)))
        .collect::<Vec<_>>()
        .join("  ")
}

/// A number in at most four significant digits.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// CPU use over a measurement window: the machine's user, system and softirq time from
/// /proc/stat (on veth the sender's core does the receiver's kernel work, so a
/// per-process figure alone misleads), and the system under test's own time: this
/// process's CPU minus what the load threads in it reported using.
#[derive(Debug)]
pub struct Window {
    start: CpuSample,
    tasks: BTreeMap<u32, Duration>,
    idle: Option<Vec<Duration>>,
}

/// What a [`Window`] measured.
#[derive(Debug, Clone, Copy)]
pub struct CpuUse {
    /// The whole window.
    pub delta: CpuDelta,
    /// CPU seconds of the system under test (process minus load threads).
    pub sut_s: f64,
    /// CPU seconds of every process on the machine, from their precise run times (see
    /// [`crate::cpu::all_processes`]); the `/proc/stat` figures in `delta` are sampled at
    /// the timer tick and miss work that runs between ticks.
    pub tasks_s: f64,
    /// Busy seconds of the system-under-test core ([`SUT_CPU`]): the window minus that
    /// CPU's idle time ([`crate::cpu::idle_per_cpu`]), so every context that ran there
    /// (the SUT's threads, softirq work, a NAPI thread) counts. `None` without an exact idle source (cpuidle or tickless accounting).
    pub sut_core_s: Option<f64>,
    /// Busy seconds of the load core ([`LOAD_CPU`]), the same way: the peer's core, where
    /// veth also runs the system under test's receive path when the peer sends.
    pub load_core_s: Option<f64>,
    /// Busy seconds of every CPU, the same way.
    pub cpus_busy_s: Option<f64>,
}

impl Window {
    /// Starts a window now.
    ///
    /// # Errors
    /// /proc could not be read.
    pub fn start() -> io::Result<Window> {
        let tasks = crate::cpu::all_processes().map_err(io::Error::other)?;
        Ok(Window {
            start: CpuSample::now().map_err(io::Error::other)?,
            tasks,
            idle: crate::cpu::idle_per_cpu(online_cpus()),
        })
    }

    /// Ends the window; `load_cpu` is the CPU time of load threads inside this process
    /// during it (generators, peers), which is not the system under test's.
    ///
    /// # Errors
    /// /proc could not be read.
    pub fn finish(self, load_cpu: Duration) -> io::Result<CpuUse> {
        let delta = self.start.elapsed().map_err(io::Error::other)?;
        let idle_end = crate::cpu::idle_per_cpu(online_cpus());
        let end = crate::cpu::all_processes().map_err(io::Error::other)?;
        // A process that started inside the window counts whole; one that ended inside it
        // is lost (its time went to its parent's reaped-children total).
        let tasks: Duration = end
            .iter()
            .map(|(pid, t)| t.saturating_sub(self.tasks.get(pid).copied().unwrap_or_default()))
            .sum();
        let sut_s = (delta.process_cpu.as_secs_f64() - load_cpu.as_secs_f64()).max(0.0);
        // Busy = the wall time minus the idle time, per CPU.
        let busy: Option<Vec<f64>> = self.idle.zip(idle_end).map(|(a, b)| {
            a.iter()
                .zip(&b)
                .map(|(a, b)| {
                    let idle = b.saturating_sub(*a).min(delta.wall);
                    (delta.wall - idle).as_secs_f64()
                })
                .collect()
        });
        Ok(CpuUse {
            delta,
            sut_s,
            tasks_s: tasks.as_secs_f64(),
            sut_core_s: busy.as_ref().and_then(|b| b.get(SUT_CPU).copied()),
            load_core_s: busy.as_ref().and_then(|b| b.get(LOAD_CPU).copied()),
            cpus_busy_s: busy.map(|b| b.iter().sum()),
        })
    }
}

impl CpuUse {
    /// The standard CPU metrics of a window, per GB of `bytes` and per packet of
    /// `packets` where given: `wall_s`, `machine_{user,sys,softirq,busy}_s`,
    /// `machine_busy_cores`, `sut_s`, `sut_cores`, `machine_s_per_gb`, `sut_s_per_gb`,
    /// `machine_ns_per_pkt`, `sut_ns_per_pkt`, the precise machine-wide task time
    /// `tasks_s`, `tasks_cores`, `tasks_s_per_gb`, `tasks_ns_per_pkt`, and where the
    /// machine has an exact idle source the exact busy time of every CPU, of the SUT core and
    /// of the load core, `cpus_busy_{s,cores,s_per_gb,ns_per_pkt}`,
    /// `sut_core_{s,cores,s_per_gb,ns_per_pkt}` and `load_core_{s,cores,s_per_gb,ns_per_pkt}`.
    pub fn metrics(&self, bytes: Option<u64>, packets: Option<u64>) -> Metrics {
        let d = &self.delta;
        let wall = d.wall.as_secs_f64();
        let busy = d.system.busy().as_secs_f64();
        let mut m = Metrics::new();
        m.insert("wall_s".into(), wall);
        m.insert("machine_user_s".into(), d.system.user.as_secs_f64());
        m.insert("machine_sys_s".into(), d.system.system.as_secs_f64());
        m.insert("machine_softirq_s".into(), d.system.softirq.as_secs_f64());
        m.insert("machine_busy_s".into(), busy);
        m.insert("sut_s".into(), self.sut_s);
        m.insert("tasks_s".into(), self.tasks_s);
        if wall > 0.0 {
            m.insert("machine_busy_cores".into(), busy / wall);
            m.insert("sut_cores".into(), self.sut_s / wall);
            m.insert("tasks_cores".into(), self.tasks_s / wall);
        }
        if let Some(b) = bytes.filter(|b| *b > 0) {
            let gb = b as f64 / 1e9;
            m.insert("machine_s_per_gb".into(), busy / gb);
            m.insert("sut_s_per_gb".into(), self.sut_s / gb);
            m.insert("tasks_s_per_gb".into(), self.tasks_s / gb);
        }
        for (key, v) in [
            ("sut_core", self.sut_core_s),
            ("load_core", self.load_core_s),
            ("cpus_busy", self.cpus_busy_s),
        ] {
            let Some(v) = v else { continue };
            m.insert(format!("{key}_s"), v);
            if wall > 0.0 {
                m.insert(format!("{key}_cores"), v / wall);
            }
            if let Some(b) = bytes.filter(|b| *b > 0) {
                m.insert(format!("{key}_s_per_gb"), v / (b as f64 / 1e9));
            }
            if let Some(p) = packets.filter(|p| *p > 0) {
                m.insert(format!("{key}_ns_per_pkt"), v * 1e9 / p as f64);
            }
        }
        if let Some(p) = packets.filter(|p| *p > 0) {
            m.insert("machine_ns_per_pkt".into(), busy * 1e9 / p as f64);
            m.insert("sut_ns_per_pkt".into(), self.sut_s * 1e9 / p as f64);
            m.insert("tasks_ns_per_pkt".into(), self.tasks_s * 1e9 / p as f64);
        }
        m
    }
}

/// The CPUs the machine has online (not the calling thread's affinity, which pinning
/// narrows: `available_parallelism` reports the latter, so after one pin it would hide
/// every other CPU).
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of CPUs in a kernel CPU list such as `0-1` or `0,2-3`; `None` if malformed.
fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Pins the calling thread to `cpu` if the machine has it (a one-CPU machine runs
/// unpinned). Threads it spawns afterwards inherit the mask.
///
/// # Errors
/// sched_setaffinity failed.
pub fn pin(cpu: usize) -> io::Result<()> {
    if cpu >= online_cpus() {
        return Ok(());
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Pins the calling thread to the system-under-test core.
///
/// # Errors
/// As [`pin`].
pub fn pin_sut() -> io::Result<()> {
    pin(SUT_CPU)
}

/// Pins the calling thread to the load core.
///
/// # Errors
/// As [`pin`].
pub fn pin_load() -> io::Result<()> {
    pin(LOAD_CPU)
}

/// Lets the calling thread run on every CPU again.
///
/// # Errors
/// As [`pin`].
pub fn unpin() -> io::Result<()> {
    let cpus = online_cpus();
    let mut set = rustix::thread::CpuSet::new();
    for c in 0..cpus.min(rustix::thread::CpuSet::MAX_CPU) {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// The pinning, in words, for the report.
pub fn pinning_text() -> String {
    let cpus = online_cpus();
    if cpus < 2 {
        "one CPU: generator and system under test share it (unpinned)".into()
    } else {
        format!(
            "load generators and peers on CPU {LOAD_CPU}; the system under test (ulnet's runtime and application threads, or the kernel socket's thread) on CPU {SUT_CPU}; kernel softirq work where the kernel runs it (on veth, the sending core)"
        )
    }
}

/// Turns any error into an `io::Error` with its message.
pub fn io_err(e: impl fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact busy figures come per second, per GB and per packet, from the same
    /// seconds.
    #[test]
    fn busy_time_per_packet() {
        let cpu = CpuUse {
            delta: crate::cpu::CpuDelta {
                wall: Duration::from_secs(2),
                process_cpu: Duration::from_millis(500),
                process: Default::default(),
                system: Default::default(),
            },
            sut_s: 0.5,
            tasks_s: 0.9,
            sut_core_s: Some(0.3),
            load_core_s: Some(0.9),
            cpus_busy_s: Some(1.2),
        };
        let m = cpu.metrics(Some(1_000_000_000), Some(60_000));
        assert_eq!(m["sut_core_cores"], 0.15);
        assert_eq!(m["sut_core_s_per_gb"], 0.3);
        assert!((m["sut_core_ns_per_pkt"] - 5_000.0).abs() < 1e-6);
        assert!((m["cpus_busy_ns_per_pkt"] - 20_000.0).abs() < 1e-6);
        assert_eq!(m["load_core_cores"], 0.45);
        assert_eq!(m["load_core_s_per_gb"], 0.9);
        let m = cpu.metrics(None, None);
        assert!(!m.contains_key("sut_core_ns_per_pkt"));
    }

    /// `--case` and `--system` leave the other pairs unmeasured (and the case's
    /// alternation order otherwise as it was); no filter measures everything.
    #[test]
    fn case_and_system_filters() {
        let plan = |cases: &[&str], systems: &[&str]| Plan {
            profile: Profile::Smoke,
            rounds: 2,
            backends: vec![],
            out: "/tmp".into(),
            ipv6: false,
            cases: cases.iter().map(|c| (*c).to_owned()).collect(),
            systems: systems.iter().map(|s| (*s).to_owned()).collect(),
        };
        let progress = Progress::new(Duration::from_secs(1));
        let ran = |p: &Plan| {
            let mut ctx = Ctx::new(p, &progress, "x", "000", "t");
            let mut seen = Vec::new();
            for case in ["a", "b"] {
                ctx.alternate(case, &["k", "u", "v"], |sys, round| {
                    seen.push(format!("{case}/{sys}/{round}"));
                    Ok(Metrics::new())
                });
            }
            (seen, ctx.finish())
        };
        let (all, r) = ran(&plan(&[], &[]));
        assert_eq!(all.len(), 2 * 3 * 2);
        assert!(r.notes.is_empty());
        let (some, r) = ran(&plan(&["b"], &["v", "k"]));
        assert_eq!(some, ["b/k/0", "b/v/0", "b/k/1", "b/v/1"]);
        assert_eq!(r.measurements.len(), 4);
        assert!(
            r.notes[0].contains("cases b; systems v, k"),
            "{:?}",
            r.notes
        );
        let (none, _) = ran(&plan(&["c"], &[]));
        assert!(none.is_empty());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0,2-3"), Some(3));
        assert_eq!(parse_cpu_list("x"), None);
    }

    /// The regression: after pinning to one CPU, pinning to another must still work
    /// (it silently did nothing when the CPU count came from the thread's own mask).
    #[test]
    fn pinning_moves_between_cpus() {
        if online_cpus() < 2 {
            return;
        }
        std::thread::spawn(|| {
            pin(LOAD_CPU).unwrap();
            pin(SUT_CPU).unwrap();
            let set = rustix::thread::sched_getaffinity(None).unwrap();
            assert!(set.is_set(SUT_CPU) && !set.is_set(LOAD_CPU));
            unpin().unwrap();
            let set = rustix::thread::sched_getaffinity(None).unwrap();
            assert!(set.is_set(SUT_CPU) && set.is_set(LOAD_CPU));
        })
        .join()
        .unwrap();
    }
}
