//! Shared by the C library's tests: a testbed (namespaces A and B joined by veth; the
//! program on ulnet in A, kernel peers in B), compiling C against the built library,
//! running programs bounded in time. Missing tools or privileges fail with what is
//! missing; nothing passes by skipping.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ulnet_bench::exec::ChildGuard;
use ulnet_bench::{Side, Testbed};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh testbed labelled `label`, after checking the tools the tests use.
pub fn testbed(label: &str) -> Testbed {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("these tests need root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    for tool in ["ip", "cc", "socat"] {
        ulnet_bench::preflight::require_tool(tool)
            .unwrap_or_else(|e| panic!("these tests need `{tool}`: {e}"));
    }
    Testbed::builder()
        .name_prefix(label)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"))
}

/// The target directory holding `libulnet.so` (the test binary is in its `deps/`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory in /dev/shm, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        let p = PathBuf::from("/dev/shm").join(format!(
            "ulnet-capi-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles the C files `srcs` (relative to the repository) into `out`, linked with
/// libulnet when `link` (else a plain program, for running under the interposer).
pub fn compile(srcs: &[&str], out: &Path, link: bool) {
    let lib = target_dir();
    let mut cmd = Command::new("cc");
    cmd.args(["-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"])
        .arg("-I")
        .arg(repo().join("crates/capi/include"))
        .arg("-o")
        .arg(out);
    for s in srcs {
        cmd.arg(repo().join(s));
    }
    if link {
        cmd.arg("-L")
            .arg(&lib)
            .arg("-lulnet")
            .arg(format!("-Wl,-rpath,{}", lib.display()));
    }
    cmd.arg("-lpthread");
    let o = cmd.output().expect("cannot run cc");
    assert!(o.status.success(), "cc failed: {}", text(&o));
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The ulnet settings for a stack on a spare address of `a`.
pub fn ulnet_env(a: &Side, n: u8) -> (IpAddr, Vec<(String, String)>) {
    let ip = a.spare_ip(n);
    let env = vec![
        ("ULNET_BACKEND".into(), "xdp".into()),
        ("ULNET_IFACE".into(), a.ifname.clone()),
        ("ULNET_ADDR".into(), format!("{ip}/{}", a.prefix_len)),
    ];
    (ip, env)
}

/// Starts `program args` in namespace `ns` with `env`, stdout piped.
pub fn spawn_in(ns: &str, env: &[(String, String)], program: &Path, args: &[&str]) -> ChildGuard {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).arg(program).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    ChildGuard::spawn(cmd).unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()))
}

/// Reads stdout lines of `child` until one contains `what` (panics at EOF: the
/// program died; its stderr is in the message).
pub fn wait_line(child: &mut ChildGuard, what: &str) {
    let out = child.child_mut().stdout.take().expect("stdout piped");
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            let mut err = String::new();
            if let Some(mut e) = child.child_mut().stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("program ended before printing {what:?}: {err}");
        }
        if line.contains(what) {
            break;
        }
    }
    // Keep draining stdout so the program never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut r, &mut sink);
    });
}

/// Runs `sh -c script` in namespace `ns`, bounded by `timeout`.
pub fn sh_in(ns: &str, script: &str, timeout: Duration) -> Output {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, "timeout", "-k", "2"])
        .arg(format!("{}", timeout.as_secs().max(1)))
        .args(["sh", "-c", script]);
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"))
}

/// Writes `len` pseudo-random bytes (a fixed seed) to `path`.
pub fn write_random(path: &Path, len: usize) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    std::fs::write(path, v).unwrap();
}

/// Whether two files hold the same bytes (with their lengths for the message).
pub fn same_file(a: &Path, b: &Path) -> (bool, usize, usize) {
    let x = std::fs::read(a).unwrap_or_default();
    let y = std::fs::read(b).unwrap_or_default();
    (x == y, x.len(), y.len())
}
