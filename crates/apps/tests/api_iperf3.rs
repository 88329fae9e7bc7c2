//! `ulnet serve iperf3`'s server against an unmodified `iperf3 -c` in the peer
//! namespace, on every backend: TCP, reverse (-R), 4 parallel streams (-P 4) and UDP
//! (-u), each with JSON output (-J) checked for sane numbers.

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;

use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet_apps::iperf3::{Iperf3Server, TestSummary};
use ulnet_bench::testbed::Testbed;

fn testbed(label: &str) -> Testbed {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("iperf3 interop needs root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    ulnet_bench::preflight::require_tool("iperf3")
        .unwrap_or_else(|e| panic!("iperf3 interop needs `iperf3`: {e}"));
    Testbed::builder()
        .name_prefix(label)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"))
}

const RUNS: [&[&str]; 4] = [&[], &["-R"], &["-P", "4"], &["-u"]];

/// Runs the four client invocations from namespace `client_ns` against `server`.
fn run_clients(stack: &Stack, client_ns: &str, server: IpAddr) {
    let srv = Iperf3Server::bind(stack, 5201).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let t = thread::spawn(move || {
        let mut out: Vec<Result<TestSummary, String>> = Vec::new();
        srv.run(&s2, Some(RUNS.len()), &mut |r| {
            out.push(r.map_err(|e| e.to_string()))
        })
        .unwrap();
        out
    });
    let ip = server.to_string();
    for extra in RUNS {
        let mut args = vec![
            "netns", "exec", client_ns, "timeout", "30", "iperf3", "-c", &ip, "-t", "1", "-J",
        ];
        args.extend_from_slice(extra);
        let o = std::process::Command::new("ip")
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "iperf3 {extra:?} failed: {text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(j.get("error").is_none(), "iperf3 {extra:?}: {}", j["error"]);
        let end = &j["end"];
        let (bytes, secs) = if extra.contains(&"-u") {
            (
                end["sum"]["bytes"].as_f64().unwrap(),
                end["sum"]["seconds"].as_f64().unwrap(),
            )
        } else {
            (
                end["sum_received"]["bytes"].as_f64().unwrap(),
                end["sum_received"]["seconds"].as_f64().unwrap(),
            )
        };
        let bps = bytes * 8.0 / secs;
        // Sane: TCP moves at least 10 Mbit/s over a veth; UDP runs at iperf3's default
        // 1 Mbit/s.
        let floor = if extra.contains(&"-u") { 0.5e6 } else { 10e6 };
        assert!(bps > floor && bps < 1e12, "iperf3 {extra:?}: {bps} bit/s");
        if extra.contains(&"-P") {
            assert_eq!(end["streams"].as_array().unwrap().len(), 4);
        }
        if extra.contains(&"-u") {
            let lost = end["sum"]["lost_percent"].as_f64().unwrap();
            assert!(lost < 5.0, "UDP loss {lost}%");
        }
    }
    let out = t.join().unwrap();
    assert_eq!(out.len(), RUNS.len());
    for r in out {
        let s = r.unwrap();
        assert!(s.bytes > 0, "{s}");
    }
}

fn on_backend(backend: Backend) {
    let tb = testbed(&format!("ip3{}", &backend.name()[..1]));
    let b = tb.b();
    let (client_ns, ip) = match backend {
        Backend::Tap => (b.ns.clone(), "198.18.250.2".parse::<IpAddr>().unwrap()),
        _ => (tb.a().ns.clone(), b.spare_ip(3)),
    };
    let builder = Stack::builder().backend(backend).netns(&b.ns);
    let stack = match backend {
        Backend::Tap => {
            let name = format!("ultp{}", std::process::id() % 100_000);
            let s = builder
                .interface(&name)
                .address("198.18.250.2/24")
                .build()
                .unwrap();
            b.run("ip", ["addr", "add", "198.18.250.1/24", "dev", &name])
                .unwrap();
            s
        }
        _ => builder
            .interface(&b.ifname)
            .address(&format!("{ip}/{}", b.prefix_len))
            .build()
            .unwrap(),
    };
    run_clients(&stack, &client_ns, ip);
}

#[test]
fn iperf3_over_xdp() {
    on_backend(Backend::Xdp);
}

#[test]
fn iperf3_over_packet() {
    on_backend(Backend::Packet);
}

#[test]
fn iperf3_over_tap() {
    on_backend(Backend::Tap);
}

/// Issue 13: a client that trickles its cookie one byte every 2 s (each byte well within
/// the read timeout) is dropped after the setup's 10 s, and an `iperf3 -c` after it runs.
#[test]
fn iperf3_slow_client_cannot_hold_the_server() {
    use std::io::Write;
    use std::time::{Duration, Instant};

    let tb = testbed("ip3s");
    let b = tb.b();
    let (client_ns, ip) = (tb.a().ns.clone(), b.spare_ip(4));
    let stack = Stack::builder()
        .backend(Backend::Packet)
        .netns(&b.ns)
        .interface(&b.ifname)
        .address(&format!("{ip}/{}", b.prefix_len))
        .build()
        .unwrap();
    let srv = Iperf3Server::bind(&stack, 5201).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let server = thread::spawn(move || {
        let mut out: Vec<Result<TestSummary, String>> = Vec::new();
        srv.run(&s2, Some(2), &mut |r| {
            out.push(r.map_err(|e| e.to_string()))
        })
        .unwrap();
        out
    });
    let ns = client_ns.clone();
    let started = Instant::now();
    let trickled = thread::spawn(move || {
        let _g = ulnet::channel::sys::netns::enter(&ns).expect("enter netns");
        let mut c = std::net::TcpStream::connect((ip, 5201)).expect("connect");
        let mut sent = 0;
        // At most 15 bytes (30 s): never the whole 37-byte cookie.
        while sent < 15 && c.write_all(b"x").is_ok() {
            sent += 1;
            thread::sleep(Duration::from_secs(2));
        }
        sent
    });
    // The real client waits its turn (iperf3 connects once the trickler is dropped).
    thread::sleep(Duration::from_millis(500));
    let o = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &client_ns,
            "timeout",
            "40",
            "iperf3",
            "-c",
            &ip.to_string(),
            "-t",
            "1",
            "-J",
        ])
        .output()
        .unwrap();
    let waited = started.elapsed();
    let out = server.join().unwrap();
    let sent = trickled.join().unwrap();
    assert!(
        o.status.success(),
        "iperf3 after the trickler: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        out[0].as_ref().is_err_and(|e| e.contains("too slow")),
        "the trickler: {:?}",
        out[0]
    );
    assert!(out[1].is_ok(), "{:?}", out[1]);
    assert!(
        sent < 15,
        "the trickler was still connected after {sent} bytes ({waited:?}): without the \
         setup deadline every byte restarts the read timeout"
    );
}
