//! `ulnet bench` in its smoke profile (seconds per experiment, one round): every
//! experiment runs end to end through the real binary, records a round for every system
//! it declares, and writes a complete report. Figures are not judged here (speed is read
//! from the bench itself, never asserted by a test); only that the harness works.
//! Needs root (namespaces, AF_XDP), as the kernel-interop tests do.

use std::path::{Path, PathBuf};
use std::process::Command;

use ulnet_bench::results::{Results, View};

const ULNET: &str = env!("CARGO_BIN_EXE_ulnet");

/// Every experiment `ulnet bench list` must name, with its seed.
const EXPERIMENTS: [(&str, &str); 12] = [
    ("hurd-tcp", "000"),
    ("hurd-udp", "000"),
    ("doorbell", "001"),
    ("netchannel-cpu", "004"),
    ("latency", "-"),
    ("raw", "-"),
    ("loss", "-"),
    ("udp-echo", "003"),
    ("dispatch", "002"),
    ("disk", "003"),
    ("attack", "-"),
    ("same-binary", "-"),
];

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ulnet-bench-smoke-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs one experiment in the smoke profile and checks its results and report.
fn smoke(name: &str) {
    let out = run_smoke(name, &[]);
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs `ulnet bench NAME --smoke --rounds 1` with `extra` arguments, checks its
/// results, and returns the output directory (the caller removes it).
fn run_smoke(name: &str, extra: &[&str]) -> PathBuf {
    let out = out_dir(&format!("{name}{}", extra.join("")));
    let o = Command::new(ULNET)
        .args(["bench", name])
        .args(extra)
        .args(["--smoke", "--rounds", "1", "--out"])
        .arg(&out)
        .output()
        .expect("ulnet runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "ulnet bench {name} {} --smoke failed ({}):\n{stdout}\n{stderr}",
        extra.join(" "),
        o.status
    );
    check(&out, name, &stdout);
    out
}

fn check(out: &Path, name: &str, stdout: &str) {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let results: Results = serde_json::from_str(&text).expect("results.json parses");
    assert_eq!(results.experiments.len(), 1);
    let r = &results.experiments[0];
    assert_eq!(r.name, name);
    assert!(r.errors.is_empty(), "errors: {:?}", r.errors);
    assert!(!r.systems.is_empty() && !r.cases.is_empty() && !r.views.is_empty());
    for s in &r.systems {
        assert!(
            r.measurements.iter().any(|m| m.system == s.id),
            "system {} declared but never measured",
            s.id
        );
    }
    for m in &r.measurements {
        assert!(
            r.case(&m.case).is_some(),
            "round of unknown case {}",
            m.case
        );
        assert!(
            r.system(&m.system).is_some(),
            "round of unknown system {}",
            m.system
        );
        assert!(!m.metrics.is_empty());
        assert!(m.metrics.values().all(|v| v.is_finite()), "{m:?}");
    }
    assert!(!results.meta.kernel.is_empty() && !results.meta.commit.is_empty());
    let plots = r
        .views
        .iter()
        .filter(|v| matches!(v, View::Plot(_)))
        .count();
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert_eq!(
        html.matches("<svg").count(),
        plots,
        "every plot inline in the HTML"
    );
    for f in ["report.md", "results.csv"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let pngs = std::fs::read_dir(out.join("plots"))
        .expect("plots/")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "png"))
        })
        .count();
    assert_eq!(pngs, plots);
    // The terminal shows the tables with the verdict.
    assert!(
        stdout.contains(&format!("=== {name} (seed {}", r.seed)),
        "{stdout}"
    );
    assert!(stdout.contains("=> "), "no verdict printed:\n{stdout}");
}

#[test]
fn list_names_every_experiment_with_its_seed() {
    let o = Command::new(ULNET)
        .args(["bench", "list"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for (name, seed) in EXPERIMENTS {
        assert!(
            text.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.first() == Some(&name) && f.get(1) == Some(&seed)
            }),
            "{name} (seed {seed}) not listed:\n{text}"
        );
    }
}

#[test]
fn an_unknown_experiment_is_a_clear_error() {
    let o = Command::new(ULNET)
        .args(["bench", "no-such"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no experiment `no-such`") && err.contains("hurd-tcp"),
        "{err}"
    );
}

#[test]
fn smoke_hurd_tcp() {
    smoke("hurd-tcp");
}

#[test]
fn smoke_hurd_udp() {
    smoke("hurd-udp");
}

#[test]
fn smoke_doorbell() {
    smoke("doorbell");
}

#[test]
fn smoke_netchannel_cpu() {
    // The channel's floor runs in the 128-byte receive case, and the verdict places it.
    smoke_saying(
        "netchannel-cpu",
        "recv-128: the bare AF_XDP channel taking in the same bytes (no stack",
    );
}

/// As [`smoke`], and the report's verdict holds `line`.
fn smoke_saying(name: &str, line: &str) {
    let out = run_smoke(name, &[]);
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains(line), "{name}: no {line:?} in report.md");
    let _ = std::fs::remove_dir_all(&out);
}

/// With both backends named, the AF_PACKET system is declared and measured too.
#[test]
fn smoke_netchannel_cpu_both_backends() {
    let out = run_smoke(
        "netchannel-cpu",
        &["--backend", "xdp", "--backend", "packet"],
    );
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    assert!(
        text.contains("\"ulnet-packet-sleep\""),
        "no AF_PACKET system in the results"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn smoke_latency() {
    // The machine's stalls are measured in the round and the verdict places the rows.
    smoke_saying("latency", "UDP: this machine stalled each CPU");
}

#[test]
fn smoke_raw() {
    smoke("raw");
}

#[test]
fn smoke_loss() {
    smoke("loss");
}

#[test]
fn smoke_udp_echo() {
    smoke("udp-echo");
}

#[test]
fn smoke_dispatch() {
    smoke("dispatch");
}

#[test]
fn smoke_disk() {
    smoke("disk");
}

#[test]
fn smoke_attack() {
    smoke("attack");
}

/// `--ipv6`: the experiment runs over the testbed's IPv6 addresses (2001:2::/48), which
/// it records, and passes the same checks as over IPv4.
fn smoke_ipv6(name: &str) {
    let out = run_smoke(name, &["--ipv6"]);
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let results: Results = serde_json::from_str(&text).expect("results.json parses");
    let r = &results.experiments[0];
    assert!(
        r.params
            .get("family")
            .is_some_and(|f| f.starts_with("IPv6")),
        "{:?}",
        r.params
    );
    // Every address the experiment used is an IPv6 one of the benchmarking range.
    let addresses: Vec<&String> = r
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("addresses"))
        .map(|(_, v)| v)
        .collect();
    assert!(!addresses.is_empty(), "{:?}", r.params);
    for line in addresses {
        let ips: Vec<std::net::IpAddr> = line
            .split([' ', ','])
            .filter_map(|w| w.parse().ok())
            .collect();
        assert!(
            !ips.is_empty()
                && ips.iter().all(|ip| match ip {
                    std::net::IpAddr::V6(a) => a.segments()[..2] == [0x2001, 2],
                    std::net::IpAddr::V4(_) => false,
                }),
            "{line}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn smoke_hurd_tcp_ipv6() {
    smoke_ipv6("hurd-tcp");
}

#[test]
fn smoke_latency_ipv6() {
    smoke_ipv6("latency");
}

#[test]
fn smoke_udp_echo_ipv6() {
    smoke_ipv6("udp-echo");
}

#[test]
fn ipv6_is_refused_by_an_ipv4_only_experiment() {
    let o = Command::new(ULNET)
        .args(["bench", "raw", "--ipv6", "--smoke"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("raw run over IPv4 only") && err.contains("udp-echo"),
        "{err}"
    );
}

/// Needs `libulnet_preload.so` beside the binary (`cargo build --workspace`, as
/// scripts/test.sh does first): the ulnet rows run the servers under `ulnet run`.
#[test]
fn smoke_same_binary() {
    smoke("same-binary");
}
