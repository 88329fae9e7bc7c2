//! The testbed against the real kernel: namespaces, veth, addresses, offloads, teardown.
//!
//! These need root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2, ethtool, procps, iputils-ping
//! and nftables (scripts/setup.sh installs them). Without them they fail, naming what is
//! missing; they never pass by skipping. Every testbed has a label unique to this test, so
//! tests running in parallel never touch each other's.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use ulnet_bench::testbed::{self, Builder, MacAddr, Testbed, TestbedInfo, OFFLOADS_TURNED_OFF};

fn build(builder: Builder) -> Testbed {
    builder
        .build()
        .unwrap_or_else(|e| panic!("cannot build a testbed (this test needs root and the tools scripts/setup.sh installs): {e}"))
}

fn ns_exists(ns: &str) -> bool {
    Path::new("/var/run/netns").join(ns).exists()
}

fn ping(tb: &Testbed, from_a: bool, extra: &[&str]) -> std::process::Output {
    let (from, to) = if from_a {
        (tb.a(), tb.b())
    } else {
        (tb.b(), tb.a())
    };
    let dst = to.ip.to_string();
    let mut args = vec!["-c", "1", "-W", "2"];
    args.extend_from_slice(extra);
    args.push(&dst);
    from.output("ping", &args).expect("ping runs")
}

#[test]
fn up_makes_two_namespaces_whose_kernels_ping_each_other() {
    let tb = build(Testbed::builder().name_prefix("up"));
    let (a, b) = (tb.a(), tb.b());
    assert!(ns_exists(&a.ns) && ns_exists(&b.ns));
    assert!(tb.name().starts_with("ulnet-up-"));
    assert_eq!(a.ns, format!("{}-a", tb.name()));

    // Addresses: one /24 inside 198.18.0.0/15, .1 and .2, spares outside both.
    for side in [a, b] {
        let IpAddr::V4(ip) = side.ip else {
            panic!("IPv4 expected")
        };
        assert_eq!(ip.octets()[0], 198);
        assert!(matches!(ip.octets()[1], 18 | 19));
        assert_eq!(side.prefix_len, 24);
        assert_eq!(side.mtu, 1500);
        assert_ne!(side.ifindex, 0);
        assert!(!side.kernel_offloads && !side.ipv6);
    }
    assert_ne!(a.mac, b.mac);
    let spares: HashSet<IpAddr> = (0..100)
        .flat_map(|n| [a.spare_ip(n), b.spare_ip(n)])
        .collect();
    assert_eq!(spares.len(), 200);
    assert!(!spares.contains(&a.ip) && !spares.contains(&b.ip));

    let out = ping(&tb, true, &[]);
    assert!(
        out.status.success(),
        "A cannot ping B: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = ping(&tb, false, &[]);
    assert!(
        out.status.success(),
        "B cannot ping A: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Offloads that break raw readers are off on both ends, as ethtool itself reports.
    for side in [a, b] {
        let features = side.offload_features().unwrap();
        for (_, long) in OFFLOADS_TURNED_OFF {
            assert_eq!(
                features.get(long),
                Some(&false),
                "{long} on {} is not off",
                side.ifname
            );
        }
    }

    // The kernel holds no spare address and (IPv6 off) no link-local one.
    let addrs = a
        .run("ip", ["addr", "show", "dev", a.ifname.as_str()])
        .unwrap();
    let addrs = String::from_utf8_lossy(&addrs.stdout);
    assert!(!addrs.contains(&a.spare_ip(0).to_string()));
    assert!(!addrs.contains("inet6"), "{addrs}");

    // What `up` prints parses back to the same value, and matches what the system says.
    let parsed: TestbedInfo = serde_json::from_str(&tb.to_json()).unwrap();
    assert_eq!(&parsed, tb.info());
    assert_eq!(&testbed::inspect(tb.name()).unwrap(), tb.info());
    assert!(testbed::list().unwrap().contains(&tb.name().to_owned()));
}

#[test]
fn drop_guard_removes_everything_even_when_the_test_panics() {
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::panic::catch_unwind(move || {
        let tb = build(Testbed::builder().name_prefix("panics"));
        tx.send(tb.info().clone()).unwrap();
        panic!("deliberate panic with a live testbed");
    });
    assert!(result.is_err());
    let info = rx.recv().unwrap();
    assert!(!ns_exists(&info.a.ns), "{} survived the panic", info.a.ns);
    assert!(!ns_exists(&info.b.ns), "{} survived the panic", info.b.ns);
    assert!(!testbed::list().unwrap().contains(&info.name));
    assert!(matches!(
        testbed::inspect(&info.name),
        Err(ulnet_bench::Error::NotFound(_))
    ));
}

#[test]
fn explicit_teardown_reports_and_removes() {
    let tb = build(Testbed::builder().name_prefix("teardown"));
    let info = tb.info().clone();
    tb.teardown().unwrap();
    assert!(!ns_exists(&info.a.ns) && !ns_exists(&info.b.ns));
    assert!(matches!(
        testbed::down(&info.name),
        Err(ulnet_bench::Error::NotFound(_))
    ));
}

#[test]
fn parallel_testbeds_do_not_collide() {
    let infos: Vec<TestbedInfo> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let tb = build(Testbed::builder().name_prefix("parallel"));
                    let out = ping(&tb, true, &[]);
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stdout)
                    );
                    tb.info().clone()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct =
        |f: &dyn Fn(&TestbedInfo) -> String| infos.iter().map(f).collect::<HashSet<_>>().len();
    assert_eq!(distinct(&|i| i.name.clone()), 4);
    assert_eq!(distinct(&|i| i.subnet.to_string()), 4);
    assert_eq!(distinct(&|i| i.a.ifname.clone()), 4);
    assert_eq!(distinct(&|i| i.b.mac.to_string()), 4);
    for info in &infos {
        assert!(!ns_exists(&info.a.ns) && !ns_exists(&info.b.ns));
    }
}

#[test]
fn down_all_cleans_up_after_a_crashed_run() {
    // A label no other test (or process) uses, so --all with it touches only ours.
    let label = format!("crash{}", std::process::id());
    // A run that "crashed" after building: kept, never torn down.
    let kept = build(Testbed::builder().name_prefix(label.as_str()).keep(true))
        .info()
        .clone();
    assert!(ns_exists(&kept.a.ns) && ns_exists(&kept.b.ns));
    // A run that crashed half-way through building: only side A's namespace exists.
    let half = format!("ulnet-{label}-1-0-dead-s510");
    ulnet_bench::exec::run("ip", ["netns", "add", &format!("{half}-a")]).unwrap();

    // A namespace file left without its mount (the mount went, the file stayed).
    let stale = format!("ulnet-{label}-1-1-beef-s509");
    std::fs::write(format!("/var/run/netns/{stale}-b"), b"").unwrap();

    let listed = testbed::list().unwrap();
    assert!(listed.contains(&kept.name) && listed.contains(&half) && listed.contains(&stale));

    // What `ulnet testbed down --all --label <label>` calls.
    let mut removed = testbed::down_all(Some(&label)).unwrap();
    removed.sort();
    let mut expected = vec![kept.name.clone(), half.clone(), stale.clone()];
    expected.sort();
    assert_eq!(removed, expected);
    for ns in [
        &kept.a.ns,
        &kept.b.ns,
        &format!("{half}-a"),
        &format!("{stale}-b"),
    ] {
        assert!(!ns_exists(ns), "{ns} left behind");
    }
}

#[test]
fn jumbo_mtu_carries_jumbo_frames_without_fragmenting() {
    let tb = build(Testbed::builder().name_prefix("jumbo").mtu(9000));
    assert_eq!(testbed::inspect(tb.name()).unwrap().b.mtu, 9000);
    // 8972 + 8 ICMP + 20 IP = 9000, with Don't Fragment set.
    let out = ping(&tb, true, &["-s", "8972", "-M", "do"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = ping(&tb, true, &["-s", "8973", "-M", "do"]);
    assert!(
        !out.status.success(),
        "a 9001-byte packet passed an MTU of 9000"
    );
}

#[test]
fn bad_parameters_are_refused_before_touching_the_system() {
    for builder in [
        Testbed::builder().mtu(67),
        Testbed::builder().mtu(70_000),
        Testbed::builder().name_prefix("Bad-Label"),
    ] {
        assert!(matches!(
            builder.build(),
            Err(ulnet_bench::Error::Invalid(_))
        ));
    }
}

#[test]
fn loss_rules_drop_and_clear() {
    let tb = build(Testbed::builder().name_prefix("loss"));
    tb.b().set_loss(100).unwrap();
    assert!(
        !ping(&tb, true, &[]).status.success(),
        "ping passed 100% loss"
    );
    let drops = testbed::loss_drops(&tb.b().ns).unwrap();
    assert!(drops >= 1, "no drop counted");
    tb.b().clear_loss().unwrap();
    assert_eq!(testbed::loss_drops(&tb.b().ns).unwrap(), 0);
    let out = ping(&tb, true, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn static_neighbours_point_the_kernel_at_a_spare_address() {
    let tb = build(Testbed::builder().name_prefix("neigh"));
    let spare = tb.a().spare_ip(3);
    let mac: MacAddr = "02:00:00:00:00:33".parse().unwrap();
    tb.b().set_neighbor(spare, mac).unwrap();
    let out = tb
        .b()
        .run("ip", ["neigh", "show", &spare.to_string()])
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("02:00:00:00:00:33") && text.contains("PERMANENT"),
        "{text}"
    );
}

#[test]
fn spawned_children_run_inside_the_namespace_and_die_with_their_guard() {
    let tb = build(Testbed::builder().name_prefix("spawn"));
    let sleeper = tb.a().spawn("sleep", ["30"]).unwrap();
    let pid = sleeper.id().to_string();
    // `ip netns exec` enters the namespace just after it starts: poll (bounded) until then.
    let identify = || {
        let out = ulnet_bench::exec::run("ip", ["netns", "identify", &pid]).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let mut seen = identify();
    for _ in 0..200 {
        if seen == tb.a().ns {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        seen = identify();
    }
    assert_eq!(seen, tb.a().ns);
    drop(sleeper);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    assert!(
        !stat.is_ok_and(|s| s.contains("(sleep)")),
        "sleep {pid} outlived its guard"
    );

    let dst = tb.b().ip.to_string();
    let pinger = tb
        .a()
        .spawn("ping", ["-c", "2", "-i", "0.2", "-W", "2", &dst])
        .unwrap();
    let out = pinger.wait_timeout(Duration::from_secs(10)).unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 received"));
}

#[test]
fn kernel_offloads_can_be_left_on_for_baselines() {
    let tb = build(
        Testbed::builder()
            .name_prefix("offl")
            .kernel_offloads(true)
            .ipv6(true),
    );
    let info = testbed::inspect(tb.name()).unwrap();
    assert!(info.a.kernel_offloads && info.a.ipv6);
    assert_eq!(
        tb.a().offload_features().unwrap().get("tx-checksumming"),
        Some(&true)
    );
}

#[test]
fn ipv6_testbed_has_addresses_from_the_benchmarking_range_and_no_link_local() {
    // Issue 15: both ends get 2001:2:0:<slot>::1 / ::2, usable at once (nodad), and no
    // kernel link-local (ulnet on an end shares its MAC, hence its EUI-64 link-local).
    let tb = build(Testbed::builder().name_prefix("v6").ipv6(true));
    let (a, b) = (tb.a(), tb.b());
    let (a6, b6) = (a.ip6(), b.ip6());
    for (side, ip) in [(a, a6), (b, b6)] {
        let IpAddr::V6(v6) = ip else { unreachable!() };
        assert_eq!(v6.segments()[..3], [0x2001, 2, 0], "{v6}");
        assert_eq!(side.prefix6_len, 64);
        assert!(side.ipv6);
        let addrs = side
            .run("ip", ["-6", "addr", "show", "dev", side.ifname.as_str()])
            .unwrap();
        let addrs = String::from_utf8_lossy(&addrs.stdout);
        assert!(addrs.contains(&format!("{v6}/64")), "{addrs}");
        assert!(
            !addrs.contains("fe80"),
            "kernel link-local on {}: {addrs}",
            side.ifname
        );
        assert!(!addrs.contains("tentative"), "{addrs}");
    }
    let spares: HashSet<IpAddr> = (0..100)
        .flat_map(|n| [a.spare_ip6(n), b.spare_ip6(n)])
        .collect();
    assert_eq!(spares.len(), 200);
    assert!(!spares.contains(&a6) && !spares.contains(&b6));
    // The kernels reach each other over IPv6 at once.
    let out = a
        .output("ping", ["-6", "-c", "1", "-W", "2", &b6.to_string()])
        .unwrap();
    assert!(
        out.status.success(),
        "A cannot ping B over IPv6: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // IPv4 is still there.
    assert!(ping(&tb, true, &[]).status.success());
    let parsed: TestbedInfo = serde_json::from_str(&tb.to_json()).unwrap();
    assert_eq!(&parsed, tb.info());
    assert_eq!(&testbed::inspect(tb.name()).unwrap(), tb.info());
    assert!(tb.info().subnet6.is_some());
}

#[test]
fn ipv6_testbed_refuses_an_mtu_below_1280() {
    let err = Testbed::builder()
        .name_prefix("v6mtu")
        .ipv6(true)
        .mtu(1279)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("1280"), "{err}");
    let tb = build(Testbed::builder().name_prefix("v6mtu").ipv6(true).mtu(1280));
    assert_eq!(tb.a().mtu, 1280);
}

#[test]
fn rps_steers_each_ends_receive_to_its_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (ca, cb) = (cpus - 1, 0);
    let tb = build(
        Testbed::builder()
            .name_prefix("rps")
            .rps_cpu(testbed::SideId::A, ca)
            .rps_cpu(testbed::SideId::B, cb),
    );
    for (side, cpu) in [(tb.a(), ca), (tb.b(), cb)] {
        let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", side.ifname);
        let out = side.output("cat", [path.as_str()]).expect("cat runs");
        let mask = String::from_utf8_lossy(&out.stdout).trim().replace(',', "");
        assert_eq!(
            u128::from_str_radix(&mask, 16).unwrap(),
            1u128 << cpu,
            "{path}: {mask}"
        );
    }
    // Steered frames still arrive, both ways.
    assert!(ping(&tb, true, &[]).status.success());
    assert!(ping(&tb, false, &[]).status.success());
}
