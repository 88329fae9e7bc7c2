//! CPU accounting, so every result can say what it cost: this process, a child (a kernel
//! tool such as iperf3 running in a namespace), and the whole machine, including the
//! softirq time in which the kernel does its own network receive work.
//!
//! Sources: `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` for this process's precise total;
//! `/proc/<pid>/stat` for the user/system split (in clock ticks, 10 ms granularity);
//! `/proc/stat` for the machine. Take a [`CpuSample`] before and after the measured
//! interval and print the [`CpuDelta`].

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

fn ticks_to_duration(ticks: u64, hz: u64) -> Duration {
    let hz = hz.max(1);
    Duration::from_secs(ticks / hz) + Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz)
}

fn clock_ticks() -> u64 {
    rustix::param::clock_ticks_per_second()
}

fn timespec(ts: rustix::time::Timespec) -> Duration {
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// Precise CPU time used so far by all threads of this process.
pub fn process_cpu_time() -> Duration {
    timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::ProcessCPUTime,
    ))
}

/// Precise CPU time used so far by the calling thread (e.g. a busy-polling data path).
pub fn thread_cpu_time() -> Duration {
    timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::ThreadCPUTime,
    ))
}

fn read_proc(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// CPU time of one process, split by mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuTimes {
    /// Time in user mode.
    #[serde(serialize_with = "secs")]
    pub user: Duration,
    /// Time in the kernel on the process's behalf (system calls, page faults).
    #[serde(serialize_with = "secs")]
    pub system: Duration,
}

impl CpuTimes {
    /// User plus system time.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// Reads process `pid`'s own CPU times (not its reaped children's) from
    /// `/proc/<pid>/stat`.
    ///
    /// # Errors
    /// [`Error::Io`] if the process does not exist (any more); [`Error::Parse`] if the
    /// file is not in the documented format (proc(5)).
    pub fn of_pid(pid: u32) -> Result<Self> {
        let path = format!("/proc/{pid}/stat");
        parse_pid_stat(&read_proc(&path)?, clock_ticks()).ok_or_else(|| Error::Parse {
            command: format!("read {path}"),
            why: "unexpected format".into(),
        })
    }

    /// This process's CPU times; see [`CpuTimes::of_pid`].
    ///
    /// # Errors
    /// As [`CpuTimes::of_pid`].
    pub fn of_self() -> Result<Self> {
        Self::of_pid(std::process::id())
    }

    /// `self - earlier`, field by field, never below zero.
    pub fn saturating_sub(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// Every process's CPU time (user + system, its threads dead or alive), by pid, from
/// each `/proc/<pid>/stat`. Unlike `/proc/stat`, whose split by state is sampled at each
/// timer tick on a kernel with tick-based accounting (`CONFIG_TICK_CPU_ACCOUNTING`, as
/// here), these totals are scaled to the scheduler's precise run time, so work that wakes
/// and sleeps in step with the tick is not missed. Processes that vanish while it reads
/// are skipped.
///
/// # Errors
/// [`Error::Io`] if `/proc` cannot be listed.
pub fn all_processes() -> Result<std::collections::BTreeMap<u32, Duration>> {
    let hz = clock_ticks();
    let mut out = std::collections::BTreeMap::new();
    let dir = std::fs::read_dir("/proc").map_err(|e| Error::Io {
        path: "/proc".into(),
        source: e,
    })?;
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            if let Some(t) = parse_pid_stat(&text, hz) {
                out.insert(pid, t.total());
            }
        }
    }
    Ok(out)
}

/// utime and stime are fields 14 and 15 of proc(5)'s stat line. The command name (field 2)
/// is parenthesised and may itself contain spaces and parentheses, so count from the last
/// `)`.
fn parse_pid_stat(text: &str, hz: u64) -> Option<CpuTimes> {
    let after_comm = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // fields[0] is field 3 (state).
    let utime = fields.get(14 - 3)?.parse().ok()?;
    let stime = fields.get(15 - 3)?.parse().ok()?;
    Some(CpuTimes {
        user: ticks_to_duration(utime, hz),
        system: ticks_to_duration(stime, hz),
    })
}

/// How long each CPU has been idle, by CPU number. Unlike `/proc/stat`'s busy states,
/// which a kernel with tick-based accounting samples at the timer tick, both sources used
/// here are kept exactly on every idle entry and exit; so the busy time of a CPU over an
/// interval (the interval minus its idle time) counts every context, also softirq work
/// that ran while the CPU was otherwise idle, which no task's run time holds.
///
/// The first source is the cpuidle residency counters
/// (`/sys/devices/system/cpu/cpu<N>/cpuidle/state<K>/time`, microseconds, summed over the
/// states; a CPU that cannot be read counts as never idle). A virtual machine may have no
/// cpuidle driver (`cpuidle/current_driver` says `none`: seen on a Firecracker guest whose
/// host offers no halt-polling); there the tickless kernel's own idle accounting is read
/// instead ([`nohz_idle_per_cpu`]). `None` where neither is available.
pub fn idle_per_cpu(cpus: usize) -> Option<Vec<Duration>> {
    idle_under(std::path::Path::new("/sys/devices/system/cpu"), cpus)
        .or_else(|| nohz_idle_per_cpu(cpus))
}

/// Each CPU's idle time from the tickless kernel's accounting (`tick_sched`'s
/// `idle_sleeptime` and `iowait_sleeptime`, nanoseconds, in `/proc/timer_list`). The
/// kernel stops the idle clock at every interrupt on an idle CPU and starts it again
/// after, so interrupt and softirq work counts as busy, as with cpuidle; `/proc/stat`'s
/// idle column comes from the same counters but in 10 ms units. An idle period is added
/// to the counter only when it ends, so each CPU is read by a thread running on that CPU
/// (which is then not idle): its figure is complete up to the read. `None` where the file
/// is missing, a CPU's tick is not in tickless mode (its counters would stand still), or
/// a reader cannot be placed on a CPU.
pub fn nohz_idle_per_cpu(cpus: usize) -> Option<Vec<Duration>> {
    (0..cpus)
        .map(|n| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut set = rustix::thread::CpuSet::new();
                    set.set(n);
                    rustix::thread::sched_setaffinity(None, &set).ok()?;
                    let text = std::fs::read_to_string("/proc/timer_list").ok()?;
                    nohz_idle_of(&text, n)
                })
                .join()
                .ok()
                .flatten()
            })
        })
        .collect()
}

/// CPU `cpu`'s idle plus iowait sleep time in a `/proc/timer_list` text, if its tick is in
/// tickless mode (`.nohz : 1`).
fn nohz_idle_of(text: &str, cpu: usize) -> Option<Duration> {
    let header = format!("cpu: {cpu}");
    let mut lines = text.lines().skip_while(|l| l.trim() != header).skip(1);
    let mut nohz = false;
    let mut idle = None;
    let mut iowait = Duration::ZERO;
    for line in lines.by_ref() {
        if line.starts_with("cpu: ") || line.starts_with("Tick Device") {
            break;
        }
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let num = || -> Option<u64> { value.split_whitespace().next()?.parse().ok() };
        match key.trim() {
            ".nohz" => nohz = num() == Some(1),
            ".idle_sleeptime" => idle = num().map(Duration::from_nanos),
            ".iowait_sleeptime" => iowait = num().map(Duration::from_nanos)?,
            _ => {}
        }
    }
    if !nohz {
        return None;
    }
    Some(idle? + iowait)
}

fn idle_under(root: &std::path::Path, cpus: usize) -> Option<Vec<Duration>> {
    if !root.join("cpu0/cpuidle").is_dir() {
        return None;
    }
    let per = (0..cpus)
        .map(|n| {
            let dir = root.join(format!("cpu{n}/cpuidle"));
            let Ok(states) = std::fs::read_dir(&dir) else {
                return Duration::ZERO;
            };
            let us: u64 = states
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("state"))
                .filter_map(|e| std::fs::read_to_string(e.path().join("time")).ok())
                .filter_map(|t| t.trim().parse::<u64>().ok())
                .sum();
            Duration::from_micros(us)
        })
        .collect();
    Some(per)
}

/// Machine-wide CPU time by state, summed over all CPUs (the `cpu` line of `/proc/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SystemTimes {
    /// User mode (including niced).
    #[serde(serialize_with = "secs")]
    pub user: Duration,
    /// Kernel mode outside interrupts.
    #[serde(serialize_with = "secs")]
    pub system: Duration,
    /// Hard interrupts.
    #[serde(serialize_with = "secs")]
    pub irq: Duration,
    /// Soft interrupts: where the kernel's own packet receive processing runs.
    #[serde(serialize_with = "secs")]
    pub softirq: Duration,
    /// Stolen by the hypervisor.
    #[serde(serialize_with = "secs")]
    pub steal: Duration,
    /// Idle, including waiting for I/O.
    #[serde(serialize_with = "secs")]
    pub idle: Duration,
    /// How many CPUs the machine has (`cpuN` lines).
    pub cpus: u32,
}

impl SystemTimes {
    /// Reads `/proc/stat`.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Parse`].
    pub fn now() -> Result<Self> {
        const PATH: &str = "/proc/stat";
        parse_proc_stat(&read_proc(PATH)?, clock_ticks()).ok_or_else(|| Error::Parse {
            command: format!("read {PATH}"),
            why: "no well-formed `cpu` line".into(),
        })
    }

    /// Time any CPU spent not idle.
    pub fn busy(&self) -> Duration {
        self.user + self.system + self.irq + self.softirq + self.steal
    }

    /// `self - earlier`, field by field, never below zero (the CPU count is kept).
    pub fn saturating_sub(&self, earlier: &SystemTimes) -> SystemTimes {
        SystemTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
            idle: self.idle.saturating_sub(earlier.idle),
            cpus: self.cpus,
        }
    }
}

/// proc(5): `cpu user nice system idle iowait irq softirq steal guest guest_nice`, in
/// USER_HZ ticks; guest time is already inside user.
fn parse_proc_stat(text: &str, hz: u64) -> Option<SystemTimes> {
    let mut lines = text.lines();
    let mut fields = lines.next()?.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let mut v = [0u64; 8];
    for slot in &mut v {
        *slot = fields.next()?.parse().ok()?;
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] =
        v.map(|t| ticks_to_duration(t, hz));
    let cpus = lines
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    Some(SystemTimes {
        user: user + nice,
        system,
        irq,
        softirq,
        steal,
        idle: idle + iowait,
        cpus: u32::try_from(cpus).unwrap_or(u32::MAX),
    })
}

/// A snapshot of CPU use: this process and the machine, with the wall-clock instant.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    /// When it was taken.
    pub at: Instant,
    /// This process's precise CPU time (all threads).
    pub process_cpu: Duration,
    /// This process's user/system split (tick granularity).
    pub process: CpuTimes,
    /// The whole machine.
    pub system: SystemTimes,
}

impl CpuSample {
    /// Takes a snapshot now.
    ///
    /// # Errors
    /// [`Error::Io`]/[`Error::Parse`] if /proc cannot be read.
    pub fn now() -> Result<Self> {
        Ok(CpuSample {
            at: Instant::now(),
            process_cpu: process_cpu_time(),
            process: CpuTimes::of_self()?,
            system: SystemTimes::now()?,
        })
    }

    /// What happened between `earlier` and this sample.
    pub fn delta_since(&self, earlier: &CpuSample) -> CpuDelta {
        CpuDelta {
            wall: self.at.saturating_duration_since(earlier.at),
            process_cpu: self.process_cpu.saturating_sub(earlier.process_cpu),
            process: self.process.saturating_sub(&earlier.process),
            system: self.system.saturating_sub(&earlier.system),
        }
    }

    /// What happened since this sample, up to now.
    ///
    /// # Errors
    /// As [`CpuSample::now`].
    pub fn elapsed(&self) -> Result<CpuDelta> {
        Ok(CpuSample::now()?.delta_since(self))
    }
}

/// CPU use over an interval; `Display` prints it on one line.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CpuDelta {
    /// Wall-clock length of the interval.
    #[serde(serialize_with = "secs")]
    pub wall: Duration,
    /// This process's precise CPU time in the interval.
    #[serde(serialize_with = "secs")]
    pub process_cpu: Duration,
    /// This process's user/system split in the interval (tick granularity).
    pub process: CpuTimes,
    /// The machine's CPU time by state in the interval.
    pub system: SystemTimes,
}

impl CpuDelta {
    fn per_wall(&self, d: Duration) -> f64 {
        if self.wall.is_zero() {
            0.0
        } else {
            d.as_secs_f64() / self.wall.as_secs_f64()
        }
    }

    /// This process's CPU use in cores (1.0 = one CPU busy all the time).
    pub fn process_cores(&self) -> f64 {
        self.per_wall(self.process_cpu)
    }

    /// The machine's non-idle CPU use in cores (at most the CPU count).
    pub fn system_busy_cores(&self) -> f64 {
        self.per_wall(self.system.busy())
    }

    /// The machine's softirq CPU use in cores.
    pub fn softirq_cores(&self) -> f64 {
        self.per_wall(self.system.softirq)
    }

    /// CPU time per unit of work (e.g. per packet, with `units` packets), machine-wide.
    pub fn system_busy_per(&self, units: u64) -> Duration {
        if units == 0 {
            return Duration::ZERO;
        }
        let nanos = self.system.busy().as_nanos() / u128::from(units);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for CpuDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wall {:.3} s | this process {:.2} cores (user {:.2} s, sys {:.2} s) | machine {:.2} of {} cores busy (softirq {:.2}, sys {:.2}, user {:.2})",
            self.wall.as_secs_f64(),
            self.process_cores(),
            self.process.user.as_secs_f64(),
            self.process.system.as_secs_f64(),
            self.system_busy_cores(),
            self.system.cpus,
            self.softirq_cores(),
            self.per_wall(self.system.system),
            self.per_wall(self.system.user),
        )
    }
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_residency_sums_the_states_of_each_cpu() {
        let root = std::env::temp_dir().join(format!("ulnet-cpuidle-{}", std::process::id()));
        let state = |cpu: usize, k: usize, us: &str| {
            let d = root.join(format!("cpu{cpu}/cpuidle/state{k}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("time"), us).unwrap();
        };
        assert_eq!(idle_under(&root, 2), None, "no cpuidle: no figure");
        state(0, 0, "5\n");
        state(0, 1, "1000000\n");
        state(1, 1, "250\n");
        // An unreadable state is skipped; a CPU without cpuidle counts as never idle.
        std::fs::create_dir_all(root.join("cpu1/cpuidle/state2")).unwrap();
        let got = idle_under(&root, 3).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            got,
            vec![
                Duration::from_micros(1_000_005),
                Duration::from_micros(250),
                Duration::ZERO
            ]
        );
        if let Some(live) = idle_per_cpu(1) {
            assert_eq!(live.len(), 1);
        }
    }

    #[test]
    fn tickless_idle_is_read_per_cpu_from_the_timer_list() {
        let text = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 163909457720 nsecs\n\ncpu: 0\n clock 0:\n  .base:       0000000000000000\n #0: <0000000015a59d96>, tick_nohz_handler, S:01\n # expires at 163912000000-163912000000 nsecs [in 2542280 to 2542280 nsecs]\n  .nohz           : 1\n  .highres        : 1\n  .idle_sleeptime : 99471354712 nsecs\n  .iowait_sleeptime: 120 nsecs\n\ncpu: 1\n  .nohz           : 0\n  .idle_sleeptime : 5 nsecs\n  .iowait_sleeptime: 0 nsecs\n\ncpu: 12\n  .nohz           : 1\n  .idle_sleeptime : 7 nsecs\n\nTick Device: mode:     1\nBroadcast device\n";
        assert_eq!(
            nohz_idle_of(text, 0),
            Some(Duration::from_nanos(99_471_354_832))
        );
        assert_eq!(
            nohz_idle_of(text, 1),
            None,
            "ticking CPU: counters stand still"
        );
        assert_eq!(nohz_idle_of(text, 12), Some(Duration::from_nanos(7)));
        assert_eq!(nohz_idle_of(text, 2), None, "no such CPU");
        // This machine's own file, where it has one: a CPU kept busy by this thread gains
        // less idle time than the window it was busy for.
        let cpu = rustix::thread::sched_getcpu();
        if let Some(a) = nohz_idle_per_cpu(cpu + 1) {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set).unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                std::hint::spin_loop();
            }
            let b = nohz_idle_per_cpu(cpu + 1).unwrap();
            assert!(b[cpu] >= a[cpu], "idle time never goes back");
            assert!(
                b[cpu] - a[cpu] < Duration::from_millis(40),
                "{:?}",
                b[cpu] - a[cpu]
            );
        }
    }

    #[test]
    fn parses_pid_stat_with_awkward_command_names() {
        let line = "8435 (we ird) (cat)) R 8430 8430 5452 0 -1 4194304 101 0 0 0 250 37 4 5 20 0 1 0 50768 3133440 388";
        let t = parse_pid_stat(line, 100).unwrap();
        assert_eq!(t.user, Duration::from_millis(2500));
        assert_eq!(t.system, Duration::from_millis(370));
        assert!(parse_pid_stat("8435 (cat) R 1 2", 100).is_none());
        assert!(parse_pid_stat("no parens", 100).is_none());
    }

    #[test]
    fn parses_proc_stat() {
        let text = "cpu  12754 6 3503 84109 490 1 59 347 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n";
        let s = parse_proc_stat(text, 100).unwrap();
        assert_eq!(s.user, Duration::from_millis(127_600));
        assert_eq!(s.softirq, Duration::from_millis(590));
        assert_eq!(s.idle, Duration::from_millis(845_990));
        assert_eq!(s.cpus, 2);
        assert!(parse_proc_stat("intr 1 2\n", 100).is_none());
        assert!(parse_proc_stat("cpu 1 2 3\n", 100).is_none());
    }

    #[test]
    fn ticks_convert_exactly() {
        assert_eq!(ticks_to_duration(250, 100), Duration::from_millis(2500));
        assert_eq!(ticks_to_duration(1, 250), Duration::from_millis(4));
    }

    #[test]
    fn samples_see_this_process_work() {
        let before = CpuSample::now().unwrap();
        // Burn a little CPU deterministically (bounded work, no timing assertion).
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        let delta = before.elapsed().unwrap();
        assert!(delta.process_cpu > Duration::ZERO);
        assert!(delta.system.cpus >= 1);
        let text = delta.to_string();
        assert!(text.contains("cores"), "{text}");
        let json = serde_json::to_value(delta).unwrap();
        assert!(json["process_cpu"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn reads_a_child_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let times = CpuTimes::of_pid(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(times.unwrap().total() < Duration::from_secs(5));
        assert!(CpuTimes::of_pid(u32::MAX).is_err());
    }

    #[test]
    fn per_unit_cost_handles_zero() {
        let d = CpuDelta {
            wall: Duration::from_secs(1),
            process_cpu: Duration::ZERO,
            process: CpuTimes::default(),
            system: SystemTimes {
                user: Duration::from_millis(500),
                ..SystemTimes::default()
            },
        };
        assert_eq!(d.system_busy_per(0), Duration::ZERO);
        assert_eq!(d.system_busy_per(1000), Duration::from_micros(500));
        assert!((d.system_busy_cores() - 0.5).abs() < 1e-9);
    }
}
