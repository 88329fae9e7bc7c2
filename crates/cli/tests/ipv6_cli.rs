//! Issue 15 through the real binary: `ulnet testbed up --ipv6`, `ulnet ping` to an IPv6
//! target, `ulnet serve http` on an IPv6 and an IPv4 address at once (curl -6 and -4),
//! and `ulnet serve iperf3` dual-stack against unmodified `iperf3 -6` and `-4` clients.
//! Needs root (namespaces, AF_XDP), curl and iperf3, as the other interop tests do; each
//! run is bounded in time and its testbed removed by a guard.

use std::net::IpAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ulnet_bench::exec::{output_in, spawn_in, ChildGuard};
use ulnet_bench::testbed::{Side, Testbed, TestbedInfo};

const ULNET: &str = env!("CARGO_BIN_EXE_ulnet");

fn testbed6(label: &str) -> Testbed {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("this test needs root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    for tool in ["iperf3", "curl", "ping"] {
        ulnet_bench::preflight::require_tool(tool)
            .unwrap_or_else(|e| panic!("this test needs `{tool}`: {e}"));
    }
    Testbed::builder()
        .name_prefix(label)
        .ipv6(true)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the IPv6 testbed: {e}"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The network options of a ulnet command on side `a` with these addresses.
fn net_args(a: &Side, addrs: &[String]) -> Vec<String> {
    let mut v = vec![
        "--backend".to_owned(),
        "xdp".to_owned(),
        "--iface".to_owned(),
        a.ifname.clone(),
    ];
    for addr in addrs {
        v.extend(["--addr".to_owned(), addr.clone()]);
    }
    v
}

/// Waits until `ip` answers a ping from namespace `ns` (the server is up), at most 15 s;
/// fails at once with the server's output if it exited.
fn wait_until_pingable(ns: &str, ip: IpAddr, server: &mut ChildGuard) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(Some(status)) = server.child_mut().try_wait() {
            let mut err = String::new();
            if let Some(mut e) = server.child_mut().stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the ulnet server exited ({status}) before {ip} answered: {err}");
        }
        let o = output_in(ns, "ping", ["-c", "1", "-W", "1", &ip.to_string()]).unwrap();
        if o.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ip} never answered: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn testbed_up_ipv6_prints_the_addresses() {
    let o = Command::new(ULNET)
        .args(["testbed", "up", "--ipv6", "--label", "v6cliup"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let info: TestbedInfo = serde_json::from_slice(&o.stdout).unwrap();
    let down = Command::new(ULNET)
        .args(["testbed", "down", &info.name])
        .output()
        .unwrap();
    assert!(down.status.success(), "{}", text(&down));
    let a6 = info.a.ip6.expect("side A has an IPv6 address");
    assert_eq!(a6.segments()[..3], [0x2001, 2, 0]);
    assert!(info.b.ip6.is_some() && info.subnet6.is_some());
    assert!(info.a.spare_ip6(0).is_ipv6());
}

#[test]
fn ping_and_serve_http_over_ipv6_and_ipv4_at_once() {
    let tb = testbed6("v6clihttp");
    let (a, b) = (tb.a(), tb.b());
    let (ip6, ip4) = (a.spare_ip6(5), a.spare_ip(5));
    // ulnet ping: the kernel over IPv6 (neighbour discovery, then echo).
    let mut args = vec!["ping".to_owned()];
    args.extend(net_args(a, &[format!("{ip6}/64")]));
    args.extend(["-c", "3", "-i", "0.2", "-W", "2"].map(str::to_owned));
    args.push(b.ip6().to_string());
    let ping = spawn_in(&a.ns, ULNET, &args)
        .unwrap()
        .wait_timeout(Duration::from_secs(30))
        .unwrap();
    assert!(ping.status.success(), "ulnet ping -6: {}", text(&ping));
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains("3 received"),
        "{}",
        text(&ping)
    );

    // ulnet serve http on both families: one server per address.
    let mut args = vec!["serve".to_owned(), "http".to_owned()];
    args.extend(net_args(a, &[format!("{ip6}/64"), format!("{ip4}/24")]));
    args.extend(["--duration", "60"].map(str::to_owned));
    let mut server = spawn_in(&a.ns, ULNET, &args).unwrap();
    wait_until_pingable(&b.ns, ip6, &mut server);
    let len = 5_000_000;
    for url in [
        format!("http://[{ip6}]/bytes/{len}"),
        format!("http://{ip4}/bytes/{len}"),
    ] {
        let o = output_in(
            &b.ns,
            "curl",
            [
                "-sS",
                "-g",
                "--fail",
                "--max-time",
                "30",
                "-o",
                "/dev/null",
                "-w",
                "%{size_download}",
                &url,
            ],
        )
        .unwrap();
        assert!(o.status.success(), "curl {url}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), len.to_string(), "{url}");
    }
    let out = server.kill().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("serving Http on {ip6}/64,{ip4}/24")),
        "{err}"
    );
}

#[test]
fn serve_iperf3_dual_stack_against_unmodified_iperf3_clients() {
    let tb = testbed6("v6cliperf");
    let (a, b) = (tb.a(), tb.b());
    let (ip6, ip4) = (a.spare_ip6(6), a.spare_ip(6));
    let mut args = vec!["serve".to_owned(), "iperf3".to_owned()];
    args.extend(net_args(a, &[format!("{ip6}/64"), format!("{ip4}/24")]));
    args.extend(["--limit", "3", "--duration", "90"].map(str::to_owned));
    let mut server = spawn_in(&a.ns, ULNET, &args).unwrap();
    wait_until_pingable(&b.ns, ip6, &mut server);
    for (family, ip, extra) in [
        ("-6", ip6, None),
        ("-6", ip6, Some("-R")),
        ("-4", ip4, None),
    ] {
        let ip = ip.to_string();
        let mut argv = vec!["30", "iperf3", family, "-c", &ip, "-t", "1", "-J"];
        argv.extend(extra);
        let o = output_in(&b.ns, "timeout", &argv).unwrap();
        assert!(o.status.success(), "iperf3 {argv:?}: {}", text(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(j.get("error").is_none(), "iperf3 {argv:?}: {}", j["error"]);
        let end = &j["end"]["sum_received"];
        let bps = end["bytes"].as_f64().unwrap() * 8.0 / end["seconds"].as_f64().unwrap();
        // Sane, not a speed claim: TCP moves at least 10 Mbit/s over a veth.
        assert!(bps > 10e6 && bps < 1e12, "iperf3 {argv:?}: {bps} bit/s");
    }
    let out = server.wait_timeout(Duration::from_secs(20)).unwrap();
    assert!(out.status.success(), "ulnet serve iperf3: {}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("iperf3 server on [::]:5201"), "{err}");
}

#[test]
fn sim_tcp_runs_over_ipv6() {
    // `ulnet sim tcp --ipv6`: the transfer crosses the simulated wire as IPv6 frames only
    // (neighbour discovery, then TCP with MSS 1440), every byte intact under loss.
    let pcap = std::env::temp_dir().join(format!("ulnet-sim6-{}.pcap", std::process::id()));
    let o = Command::new(ULNET)
        .args([
            "sim",
            "tcp",
            "--ipv6",
            "--bytes",
            "1M",
            "--loss",
            "0.01",
            "--compact",
        ])
        .arg("--pcap")
        .arg(&pcap)
        .output()
        .unwrap();
    let raw = std::fs::read(&pcap);
    let _ = std::fs::remove_file(&pcap);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["hashes_equal"], true, "{report}");
    let raw = raw.expect("the capture");
    let (mut v6, mut other, mut off) = (0, 0, 24usize);
    while off + 16 <= raw.len() {
        let incl = u32::from_le_bytes(raw[off + 8..off + 12].try_into().unwrap()) as usize;
        let frame = &raw[off + 16..(off + 16 + incl).min(raw.len())];
        off += 16 + incl;
        if frame.len() >= 14 && frame[12..14] == [0x86, 0xdd] {
            v6 += 1;
        } else {
            other += 1;
        }
    }
    assert!(v6 > 500 && other == 0, "{v6} IPv6 frames, {other} others");
}
