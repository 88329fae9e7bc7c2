//! Seed 003's IDE figure: synchronously read a contiguous region of a file one block at
//! a time, block sizes 1 KB to 1 MB, through the kernel's system-call path and through a
//! user-level submission ring.
//!
//! What is measured: a file of the region's size (64 MB in default and full) is written
//! once per run on the disk-backed filesystem under `/var/tmp` (tmpfs has no O_DIRECT),
//! synced, and removed at the end (a guard removes it on error too). For each block size
//! a measurement reads the region from offset 0, one block at a time, each read waiting
//! for the previous one, until the region is read or the time cap of the profile is
//! reached (the figures count only what was read). Systems:
//! - the kernel's system-call path: `pread(2)` on a file opened with `O_DIRECT` (no page
//!   cache: every read goes to the device), and buffered `pread(2)` as a reference (the
//!   file's cached pages are dropped with `posix_fadvise(DONTNEED)` before each round,
//!   so the device is read, with the kernel's readahead);
//! - a user-level submission ring: io_uring on the same `O_DIRECT` file, with the block's
//!   buffer registered (`IORING_OP_READ_FIXED`) and a kernel thread polling the
//!   submission queue (`IORING_SETUP_SQPOLL`), so starting an I/O is a write to shared
//!   memory; the application then sleeps in `io_uring_enter(GETEVENTS)` for the
//!   completion;
//! - fio (psync, and io_uring with `sqthread_poll` and fixed buffers, both `O_DIRECT`,
//!   queue depth 1) for two block sizes, as an independent cross-check.
//!
//! Every block read is checked: the file carries its own offset at the start of every
//! 512-byte sector, and each block's first sector must hold the block's offset.
//!
//! CPU figures: `sut_*` is this process's CPU over the window (the reading thread, and for
//! io_uring its submission-polling kernel thread, which belongs to the process);
//! `tasks_*` sums every process on the machine. For fio, `sut_cores` is fio's own
//! `usr_cpu + sys_cpu` (it runs as a separate process).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::num::NonZeroU64;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Experiment;
use crate::exec;
use crate::harness::{io_err, Ctx, Metrics, Plan, Profile, Window, LOAD_CPU, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;

const DIRECT: &str = "kernel-pread-direct";
const BUFFERED: &str = "kernel-pread-buffered";
const URING: &str = "uring-sqpoll";
const FIO_PSYNC: &str = "fio-psync";
const FIO_URING: &str = "fio-io_uring-sqpoll";
const URING_ENTER: &str = "uring-enter";
const FIO_URING_ENTER: &str = "fio-io_uring";
/// The sector the file's offset markers are spaced by (and the smallest block).
const SECTOR: usize = 512;
/// The alignment of the read buffers (O_DIRECT wants the logical block size; a page
/// covers every device).
const ALIGN: usize = 4096;
/// Setup of one measurement beyond its reading (open, ring, registration).
const OVERHEAD: Duration = Duration::from_millis(30);

/// `disk`.
pub struct Disk;

/// A profile's sizes.
struct Sizes {
    /// Bytes in the region (and the file).
    region: u64,
    /// Block sizes (KiB).
    blocks_kib: Vec<u64>,
    /// The longest one measurement may read for.
    cap: Duration,
    /// Block sizes (KiB) fio cross-checks (empty: none).
    fio_kib: Vec<u64>,
}

fn sizes(p: Profile) -> Sizes {
    let all: Vec<u64> = (0..=10).map(|i| 1u64 << i).collect();
    p.pick(
        Sizes {
            region: 4 << 20,
            blocks_kib: vec![4, 64, 1024],
            cap: Duration::from_millis(150),
            fio_kib: Vec::new(),
        },
        Sizes {
            region: 64 << 20,
            blocks_kib: all.clone(),
            cap: Duration::from_millis(400),
            fio_kib: vec![4, 128],
        },
        Sizes {
            region: 64 << 20,
            blocks_kib: all.clone(),
            cap: Duration::from_millis(1500),
            fio_kib: vec![4, 128],
        },
        Sizes {
            region: 64 << 20,
            blocks_kib: all,
            cap: Duration::from_secs(10),
            fio_kib: vec![4, 128],
        },
    )
}

fn case_id(kib: u64) -> String {
    format!("{kib}k")
}

impl Experiment for Disk {
    fn name(&self) -> &'static str {
        "disk"
    }
    fn seed(&self) -> &'static str {
        "003"
    }
    fn title(&self) -> &'static str {
        "Synchronous block reads of a 64 MB region, 1 KB..1 MB: pread (O_DIRECT, buffered) vs an io_uring SQPOLL ring"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let s = sizes(plan.profile);
        // A read of the region takes about 60 µs per block plus 1 ms per MB here (a
        // virtio disk), or the cap: small blocks run to the cap, large ones end sooner.
        let read = |kib: u64| {
            let blocks = s.region / (kib << 10);
            let t = Duration::from_micros(60 * blocks + (s.region >> 20) * 1000);
            t.min(s.cap) + OVERHEAD
        };
        let ours: Duration = s.blocks_kib.iter().map(|&k| read(k) * 4).sum();
        // fio starts in about 0.3 s.
        let fio: Duration = s
            .fio_kib
            .iter()
            .map(|&k| (read(k) + Duration::from_millis(300)) * 3)
            .sum();
        // Writing the file: about 16 ms per MB here.
        (ours + fio) * plan.rounds + Duration::from_millis(200 + (s.region >> 20) * 16)
    }
    fn tools(&self) -> &'static [&'static str] {
        &["fio", "taskset", "findmnt", "lsblk"]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let s = sizes(ctx.profile());
        let dir = Path::new("/var/tmp");
        let file = TestFile::create(dir, s.region)?;
        let r = run_on(ctx, &file, &s);
        drop(file);
        r
    }
    fn seed_figure(&self) -> &'static str {
        "Seed 003 (\"Comparative disk driver performance\", an IDE disk, synchronous reads of a \
         contiguous 64 MB region, block sizes 1 KB..1 MB; its figure is a plot, its numbers \
         are stated in the text only):\n\n\
         | | throughput | CPU (system time) |\n| --- | --- | --- |\n\
         | user-level driver vs in-kernel driver | no degradation at any block size | +17% at worst (1 KB blocks), much less at realistic sizes |\n\n\
         Claim: a user-level driver reads as fast as the kernel's at every block size, for at \
         most 17% more CPU."
    }
    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        for (ring, what) in [
            (
                URING,
                "the io_uring SQPOLL ring (submission by a memory write)",
            ),
            (
                URING_ENTER,
                "io_uring without SQPOLL (one io_uring_enter per read)",
            ),
        ] {
            let mut worst_tp: Option<(String, f64)> = None;
            let mut worst_cpu: Option<(String, f64)> = None;
            let mut n = 0;
            for c in &r.cases {
                let (Some(t), Some(cpu)) = (
                    s.paired(&c.id, ring, DIRECT, "mb_s"),
                    s.paired(&c.id, ring, DIRECT, "sut_cores"),
                ) else {
                    continue;
                };
                n += 1;
                if worst_tp.as_ref().is_none_or(|w| t < w.1) {
                    worst_tp = Some((c.label.clone(), t));
                }
                if worst_cpu.as_ref().is_none_or(|w| cpu > w.1) {
                    worst_cpu = Some((c.label.clone(), cpu));
                }
            }
            if let (Some((tc, t)), Some((cc, cpu))) = (worst_tp, worst_cpu) {
                out.push(format!(
                    "Over {n} block sizes {what} read at {t:.2}x the throughput of pread with O_DIRECT at worst ({tc}), and used at most {cpu:.2}x its process CPU ({cc}); the seed's claim (no throughput loss, at most +17% CPU) {} for it here (5% throughput tolerance).",
                    if t >= 0.95 && cpu <= 1.17 { "holds" } else { "does not hold" }
                ));
            }
        }
        if out.is_empty() {
            out.push("Missing io_uring or O_DIRECT figures: no verdict.".into());
        }
        for c in &r.cases {
            for (fio, ours) in [
                (FIO_PSYNC, DIRECT),
                (FIO_URING_ENTER, URING_ENTER),
                (FIO_URING, URING),
            ] {
                if let Some(x) = s.paired(&c.id, ours, fio, "mb_s") {
                    out.push(format!(
                        "Cross-check at {}: {ours} read {x:.2}x what {fio} read.",
                        c.label
                    ));
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------
// The file

/// The file read, removed on drop.
struct TestFile {
    path: PathBuf,
    len: u64,
}

impl TestFile {
    /// Writes `len` bytes (a multiple of 1 MiB) under `dir`, every 512-byte sector
    /// starting with its own offset, and syncs them to the device.
    fn create(dir: &Path, len: u64) -> io::Result<TestFile> {
        let path = dir.join(format!("ulnet-bench-disk-{}.dat", std::process::id()));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        // From here on the guard removes the file whatever happens.
        let t = TestFile { path, len };
        let chunk = 1usize << 20;
        let mut buf = vec![0x5au8; chunk];
        let mut off = 0u64;
        while off < len {
            for (i, sector) in buf.chunks_mut(SECTOR).enumerate() {
                let at = off + (i * SECTOR) as u64;
                sector[..8].copy_from_slice(&at.to_le_bytes());
            }
            f.write_all(&buf)?;
            off += chunk as u64;
        }
        f.sync_all()?;
        Ok(t)
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a block read at `off` holds the file's marker for `off`.
fn block_ok(block: &[u8], off: u64) -> bool {
    block.len() >= 8 && block[..8] == off.to_le_bytes()
}

/// A buffer of `len` bytes aligned to [`ALIGN`] (for O_DIRECT), carved out of a larger
/// vector so no unsafe allocation is needed.
struct Aligned {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let v = vec![0u8; len + ALIGN];
        let off = v.as_ptr().align_offset(ALIGN);
        Aligned { v, off, len }
    }
    fn buf(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

// ---------------------------------------------------------------------------------------
// Running

fn declare(ctx: &mut Ctx<'_>, device: &str, direct_ok: bool, fio: bool) {
    let common = |how: &str| {
        vec![
            ("device", device.to_owned()),
            ("access", how.to_owned()),
            (
                "synchronous",
                "one block in flight: each read waits for the previous one".to_owned(),
            ),
        ]
    };
    if direct_ok {
        ctx.system(
            DIRECT,
            "kernel: pread, O_DIRECT",
            SystemKind::Kernel,
            false,
            &common("pread(2) on an O_DIRECT file descriptor (no page cache)"),
        );
    }
    ctx.system(
        BUFFERED,
        "kernel: pread, buffered (reference)",
        SystemKind::Kernel,
        false,
        &common("pread(2) through the page cache; cached pages dropped (posix_fadvise DONTNEED) before each round; kernel readahead on"),
    );
    if direct_ok {
        ctx.system(
            URING,
            "user-level ring: io_uring SQPOLL, fixed buffer",
            SystemKind::Channel,
            false,
            &common(&format!(
                "io_uring READ_FIXED on the O_DIRECT file, one registered buffer, IORING_SETUP_SQPOLL (poller thread on CPU {LOAD_CPU}, idle 50 ms), waits in io_uring_enter(GETEVENTS)"
            )),
        );
    }
    if direct_ok {
        ctx.system(
            URING_ENTER,
            "io_uring without SQPOLL, fixed buffer",
            SystemKind::Channel,
            false,
            &common("io_uring READ_FIXED on the O_DIRECT file, one registered buffer, no SQPOLL: one io_uring_enter both submits and waits"),
        );
    }
    if fio && direct_ok {
        ctx.system(
            FIO_URING_ENTER,
            "fio, io_uring (cross-check)",
            SystemKind::Channel,
            false,
            &common(&format!("fio --ioengine=io_uring --fixedbufs --registerfiles --direct=1 --iodepth=1 (taskset -c {SUT_CPU})")),
        );
        ctx.system(
            FIO_PSYNC,
            "fio, psync, O_DIRECT (cross-check)",
            SystemKind::Kernel,
            false,
            &common(&format!(
                "fio --ioengine=psync --direct=1 --rw=read --iodepth=1 (taskset -c {SUT_CPU})"
            )),
        );
        ctx.system(
            FIO_URING,
            "fio, io_uring SQPOLL (cross-check)",
            SystemKind::Channel,
            false,
            &common(&format!("fio --ioengine=io_uring --sqthread_poll=1 --sqthread_poll_cpu={LOAD_CPU} --fixedbufs --registerfiles --direct=1 --iodepth=1 (taskset -c {SUT_CPU})")),
        );
    }
}

fn views(ctx: &mut Ctx<'_>, baseline: &str) {
    ctx.view(View::Table(TableView {
        title: "Synchronous sequential reads, one block at a time".into(),
        cases: Vec::new(),
        systems: Vec::new(),
        metrics: vec![
            Metric::more("mb_s", "throughput (MB/s)", 1),
            Metric::less("us_per_block", "per block (µs)", 1),
            Metric::less("sut_cores", "process CPU (cores)", 2),
            Metric::less("tasks_cores", "machine CPU, all tasks (cores)", 2),
            Metric::plain("mib_read", "read (MiB)", 1),
        ],
        baselines: vec![baseline.into()],
        ratio_metric: None,
    }));
    ctx.view(View::Plot(PlotView {
        id: "throughput".into(),
        title: "Throughput against block size (dashed: process CPU)".into(),
        kind: PlotKind::Lines,
        cases: Vec::new(),
        // The buffered reference (readahead, several times faster) is in the table
        // only: on the same axis it would flatten the synchronous lines.
        systems: vec![DIRECT.into(), URING.into(), URING_ENTER.into()],
        x_param: Some("block_kib".into()),
        x_label: "block size (KiB)".into(),
        y: Metric::more("mb_s", "throughput (MB/s)", 1),
        y2: Some(Metric::less("sut_cores", "process CPU (cores)", 2)),
        x_log: true,
    }));
    ctx.view(View::Plot(PlotView {
        id: "cpu".into(),
        title: "Process CPU against block size".into(),
        kind: PlotKind::Lines,
        cases: Vec::new(),
        // The buffered reference (readahead, several times faster) is in the table
        // only: on the same axis it would flatten the synchronous lines.
        systems: vec![DIRECT.into(), URING.into(), URING_ENTER.into()],
        x_param: Some("block_kib".into()),
        x_label: "block size (KiB)".into(),
        y: Metric::less("sut_cores", "process CPU (cores)", 2),
        y2: None,
        x_log: true,
    }));
}

/// What backs `path`: findmnt's source and filesystem type, and lsblk's view of the device.
fn device_of(path: &Path) -> String {
    let p = path.to_string_lossy().into_owned();
    let out = |prog: &str, args: &[&str]| -> String {
        exec::run(prog, args)
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|e| format!("({prog} failed: {e})"))
    };
    let mnt = out("findmnt", &["-n", "-o", "SOURCE,FSTYPE,TARGET", "-T", &p]);
    let src = mnt.split_whitespace().next().unwrap_or("").to_owned();
    let blk = if src.starts_with("/dev/") {
        out(
            "lsblk",
            &["-d", "-n", "-o", "NAME,SIZE,ROTA,TYPE,MODEL", &src],
        )
    } else {
        "not a block device".into()
    };
    format!(
        "{mnt} (lsblk: {})",
        blk.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// The readahead of the device behind `device` (a [`device_of`] text), in KiB, if known:
/// it decides what buffered reads of a sequential file cost.
fn read_ahead_kib(device: &str) -> Option<String> {
    let dev = device.split_whitespace().next()?.strip_prefix("/dev/")?;
    std::fs::read_to_string(format!("/sys/block/{dev}/queue/read_ahead_kb"))
        .ok()
        .map(|s| s.trim().to_owned())
}

fn run_on(ctx: &mut Ctx<'_>, file: &TestFile, s: &Sizes) -> io::Result<()> {
    let device = device_of(&file.path);
    // O_DIRECT may be refused at open (tmpfs) or at the first read (alignment).
    let direct_ok = open_direct(&file.path)
        .and_then(|f| {
            let mut b = Aligned::new(ALIGN);
            f.read_at(b.buf(), 0)
        })
        .is_ok();
    let fio = !s.fio_kib.is_empty();
    declare(ctx, &device, direct_ok, fio);
    views(ctx, if direct_ok { DIRECT } else { BUFFERED });
    ctx.param("file", file.path.display());
    ctx.param("device", &device);
    ctx.param("region_mib", file.len >> 20);
    ctx.param("cap_per_measurement", format!("{:?}", s.cap));
    ctx.param("o_direct", if direct_ok { "works" } else { "refused" });
    let ra = read_ahead_kib(&device).unwrap_or_else(|| "unknown".into());
    ctx.param("read_ahead_kib", &ra);
    ctx.system_setup(BUFFERED, "read_ahead_kb", &ra);
    ctx.note(format!(
        "The file lives on {device}; O_DIRECT {} there. A virtual disk's throughput includes the host's caching: compare systems, not devices.",
        if direct_ok { "works" } else { "is refused, so only buffered reads ran" }
    ));
    ctx.note(format!(
        "Each measurement reads the region from its start, one block in flight, until the whole {} MiB are read or {:?} pass (small blocks stop at the cap; 'read (MiB)' says how much each read).",
        file.len >> 20,
        s.cap
    ));
    ctx.note("io_uring SQPOLL: a kernel thread of this process spins on the submission queue (for up to 50 ms of idleness), so its CPU (~1 core while reading) is in the process figure: that is the price of submitting by a memory write.");
    if fio {
        ctx.note("fio rows are an independent cross-check at two block sizes (its own figures: bw_bytes and usr_cpu+sys_cpu from --output-format=json), same file, same region, same cap.");
    } else {
        ctx.note("fio is skipped in this profile.");
    }
    let mut systems = vec![BUFFERED];
    if direct_ok {
        systems = vec![DIRECT, URING, URING_ENTER, BUFFERED];
    }
    for &kib in &s.blocks_kib {
        let id = case_id(kib);
        let label = if kib >= 1024 {
            format!("{} MB blocks", kib / 1024)
        } else {
            format!("{kib} KB blocks")
        };
        ctx.case(&id, &label, &[("block_kib", kib as f64)]);
        let mut sys = systems.clone();
        if direct_ok && s.fio_kib.contains(&kib) {
            sys.extend([FIO_PSYNC, FIO_URING_ENTER, FIO_URING]);
        }
        let bs = (kib as usize) << 10;
        ctx.alternate(&id, &sys, |sys, _| match sys {
            DIRECT => read_pread(file, bs, true, s.cap),
            BUFFERED => read_pread(file, bs, false, s.cap),
            URING => ring::read_uring(&file.path, file.len, bs, true, s.cap),
            URING_ENTER => ring::read_uring(&file.path, file.len, bs, false, s.cap),
            FIO_PSYNC => fio_round(file, bs, FioEngine::Psync, s.cap),
            FIO_URING_ENTER => fio_round(file, bs, FioEngine::Uring, s.cap),
            _ => fio_round(file, bs, FioEngine::UringSqpoll, s.cap),
        });
    }
    Ok(())
}

fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// The metrics of one measurement: `bytes` in `blocks` reads over `elapsed`.
fn figures(cpu: &crate::harness::CpuUse, bytes: u64, blocks: u64, elapsed: Duration) -> Metrics {
    let mut m = cpu.metrics(Some(bytes), Some(blocks));
    let secs = elapsed.as_secs_f64();
    m.insert("mb_s".into(), bytes as f64 / secs / 1e6);
    m.insert("us_per_block".into(), secs * 1e6 / blocks as f64);
    m.insert("mib_read".into(), bytes as f64 / (1u64 << 20) as f64);
    m.insert("blocks".into(), blocks as f64);
    m
}

/// Reads the file with pread, `bs` at a time, until its end or `cap`.
fn read_pread(file: &TestFile, bs: usize, direct: bool, cap: Duration) -> io::Result<Metrics> {
    let f = if direct {
        open_direct(&file.path)?
    } else {
        let f = File::open(&file.path)?;
        // Drop the file's cached pages so the device is read (they are clean: synced).
        rustix::fs::fadvise(
            &f,
            0,
            NonZeroU64::new(file.len),
            rustix::fs::Advice::DontNeed,
        )?;
        f
    };
    let mut buf = Aligned::new(bs);
    let w = Window::start()?;
    let start = Instant::now();
    let (mut off, mut blocks) = (0u64, 0u64);
    while off < file.len && start.elapsed() < cap {
        let b = buf.buf();
        let n = f.read_at(b, off)?;
        if n != bs || !block_ok(b, off) {
            return Err(io_err(format!("short or wrong read at {off}: {n} bytes")));
        }
        off += bs as u64;
        blocks += 1;
    }
    let elapsed = start.elapsed();
    let cpu = w.finish(Duration::ZERO)?;
    Ok(figures(&cpu, off, blocks, elapsed))
}

/// fio's figures from its JSON output: bytes read, bytes/s, CPU % (usr + sys).
fn parse_fio(out: &str) -> Option<(u64, f64, f64)> {
    let v: serde_json::Value = serde_json::from_str(&out[out.find('{')?..]).ok()?;
    let job = v.get("jobs")?.get(0)?;
    let read = job.get("read")?;
    Some((
        read.get("io_bytes")?.as_u64()?,
        read.get("bw_bytes")?.as_f64()?,
        job.get("usr_cpu")?.as_f64()? + job.get("sys_cpu")?.as_f64()?,
    ))
}

/// How fio submits.
#[derive(Clone, Copy, PartialEq)]
enum FioEngine {
    Psync,
    Uring,
    UringSqpoll,
}

/// One fio run on the file: `bs` blocks, O_DIRECT, one in flight.
fn fio_round(file: &TestFile, bs: usize, engine: FioEngine, cap: Duration) -> io::Result<Metrics> {
    let path = file.path.to_string_lossy().into_owned();
    let bs_arg = format!("--bs={bs}");
    let size = format!("--size={}", file.len);
    // fio's runtime is in whole seconds at least; the cap stops it as it stops ours.
    let runtime = format!("--runtime={}ms", cap.as_millis().max(1));
    let cpu_s = SUT_CPU.to_string();
    let mut args = vec![
        "-c",
        &cpu_s,
        "fio",
        "--name=xcheck",
        "--readonly",
        "--rw=read",
        "--direct=1",
        "--iodepth=1",
        "--numjobs=1",
        "--output-format=json",
        &bs_arg,
        &size,
        &runtime,
    ];
    let file_arg = format!("--filename={path}");
    args.push(&file_arg);
    let sq_cpu = format!("--sqthread_poll_cpu={LOAD_CPU}");
    match engine {
        FioEngine::Psync => args.push("--ioengine=psync"),
        FioEngine::Uring => args.extend(["--ioengine=io_uring", "--fixedbufs", "--registerfiles"]),
        // The poller on the other core, as ours: on fio's own core it starves fio (and
        // is starved by it) and reads collapse to under 1 MB/s here.
        FioEngine::UringSqpoll => args.extend([
            "--ioengine=io_uring",
            "--sqthread_poll=1",
            &sq_cpu,
            "--fixedbufs",
            "--registerfiles",
        ]),
    }
    let w = Window::start()?;
    let mut cmd = std::process::Command::new("taskset");
    cmd.args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = exec::ChildGuard::spawn(cmd).map_err(io_err)?;
    let out = child
        .wait_timeout(cap + Duration::from_secs(20))
        .map_err(io_err)?;
    let cpu = w.finish(Duration::ZERO)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (bytes, bw, cpu_pct) = parse_fio(&text).ok_or_else(|| {
        io_err(format!(
            "fio output not understood (exit {}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))
    })?;
    if bytes == 0 || bw <= 0.0 {
        return Err(io_err("fio read nothing"));
    }
    let elapsed = Duration::from_secs_f64(bytes as f64 / bw);
    let blocks = bytes / bs as u64;
    let mut m = figures(&cpu, bytes, blocks, elapsed);
    // fio is its own process: this process's CPU says nothing about it, fio's own does.
    m.retain(|k, _| !k.starts_with("sut_"));
    m.insert("sut_cores".into(), cpu_pct / 100.0);
    Ok(m)
}

/// The user-level submission ring. The only unsafe code of the crate: io_uring's
/// submissions and buffer registration hand the kernel raw pointers, whose validity the
/// caller must promise.
#[allow(unsafe_code)]
mod ring {
    use std::io;
    use std::os::fd::AsRawFd;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use io_uring::{opcode, types, IoUring};

    use super::{block_ok, figures, open_direct, Aligned};
    use crate::harness::{io_err, Metrics, Window, LOAD_CPU};

    /// How long the kernel's poller spins on an empty submission queue before sleeping.
    const SQ_IDLE_MS: u32 = 50;

    /// Reads the file at `path` (`len` bytes) `bs` at a time with io_uring: one registered
    /// buffer, READ_FIXED, and with `sqpoll` a kernel-polled submission queue (the poller
    /// on the load core); until its end or `cap`.
    pub(super) fn read_uring(
        path: &Path,
        len: u64,
        bs: usize,
        sqpoll: bool,
        cap: Duration,
    ) -> io::Result<Metrics> {
        let f = open_direct(path)?;
        let mut buf = Aligned::new(bs);
        // Declared after `buf`, so dropped before it: the kernel's registration of the
        // buffer ends (with the ring) before the memory is freed.
        let mut builder = IoUring::builder();
        if sqpoll {
            builder
                .setup_sqpoll(SQ_IDLE_MS)
                .setup_sqpoll_cpu(LOAD_CPU as u32);
        }
        let mut ring: IoUring = builder.build(8)?;
        let b = buf.buf();
        let iov = libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        };
        // SAFETY: the iovec points at `buf`'s `bs` bytes, which outlive the ring (dropped
        // first, see above) and are not moved or reallocated while it exists.
        unsafe { ring.submitter().register_buffers(&[iov])? };
        let ptr = b.as_mut_ptr();
        let fd = types::Fd(f.as_raw_fd());
        let w = Window::start()?;
        let start = Instant::now();
        let (mut off, mut blocks) = (0u64, 0u64);
        while off < len && start.elapsed() < cap {
            let sqe = opcode::ReadFixed::new(fd, ptr, bs as u32, 0)
                .offset(off)
                .build()
                .user_data(off);
            // SAFETY: the entry reads into registered buffer 0 (`buf`, alive and not
            // otherwise accessed until its completion is reaped below) from `f`, which
            // stays open for the whole loop.
            unsafe {
                ring.submission()
                    .push(&sqe)
                    .map_err(|_| io_err("submission queue full"))?;
            }
            // With SQPOLL this enters the kernel only to wait for the completion (and to
            // wake the poller if it went to sleep); the submission itself was the
            // queue's tail update when `submission()`'s handle dropped. Without, one
            // io_uring_enter submits and waits.
            ring.submit_and_wait(1)?;
            let cqe = ring
                .completion()
                .next()
                .ok_or_else(|| io_err("no completion after waiting for one"))?;
            let n = cqe.result();
            if n < 0 {
                return Err(io::Error::from_raw_os_error(-n));
            }
            if n as usize != bs || cqe.user_data() != off || !block_ok(buf_view(&buf), off) {
                return Err(io_err(format!("short or wrong read at {off}: {n} bytes")));
            }
            off += bs as u64;
            blocks += 1;
        }
        let elapsed = start.elapsed();
        let cpu = w.finish(Duration::ZERO)?;
        drop(ring);
        Ok(figures(&cpu, off, blocks, elapsed))
    }

    fn buf_view(a: &Aligned) -> &[u8] {
        &a.v[a.off..a.off + a.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_json() {
        let out = "note: both iodepth >= 1 and synchronous I/O engine are selected\n{\n \"fio version\" : \"fio-3.33\",\n \"jobs\" : [ { \"jobname\" : \"xcheck\", \"read\" : { \"io_bytes\" : 67108864, \"bw_bytes\" : 123456789 }, \"usr_cpu\" : 1.5, \"sys_cpu\" : 20.25 } ] }";
        assert_eq!(parse_fio(out), Some((67108864, 123456789.0, 21.75)));
        assert_eq!(parse_fio("fio: error"), None);
    }

    #[test]
    fn file_markers_and_alignment() {
        let dir = std::env::temp_dir();
        let f = TestFile::create(&dir, 1 << 20).unwrap();
        let data = std::fs::read(&f.path).unwrap();
        assert_eq!(data.len(), 1 << 20);
        assert!(block_ok(&data[4096..], 4096));
        assert!(!block_ok(&data[4096..], 0));
        let path = f.path.clone();
        drop(f);
        assert!(!path.exists(), "the guard removes the file");
        let mut a = Aligned::new(1000);
        assert_eq!(a.buf().as_ptr() as usize % ALIGN, 0);
        assert_eq!(a.buf().len(), 1000);
    }
}
