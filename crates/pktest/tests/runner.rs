//! The runner's own behaviour: failures name the right line and rule, lenient mode skips
//! and lists, timing is checked, the JSON report carries the summary.

use ulnet_pktest::{run_source, to_json, FailureKind, ProfileKind, RunOptions, Status};

const OPEN: &str = "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 fcntl(3, F_SETFL, O_RDWR|O_NONBLOCK) = 0
+0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)
+0 > S 0:0(0) <...>
+.1 < S. 0:0(0) ack 1 win 65535 <mss 1460,nop,nop,sackOK,nop,wscale 7>
+0 > . 1:1(0) ack 1 <...>
";

fn run(extra: &str, opts: &RunOptions) -> ulnet_pktest::ScriptReport {
    run_source("t.pkt", &format!("{OPEN}{extra}"), opts)
}

#[test]
fn wrong_expectation_names_line_and_both_segments() {
    let r = run(
        "+0 write(3, ..., 100) = 100\n+0 > P. 1:51(50) ack 1\n",
        &RunOptions::default(),
    );
    assert_eq!(r.status, Status::Fail);
    let f = r.failure.unwrap();
    assert_eq!((f.line, f.kind), (8, FailureKind::PacketMismatch));
    assert!(
        f.message
            .contains("payload length: expected 50 vs actual 100"),
        "{}",
        f.message
    );
    assert_eq!(f.expected.as_deref(), Some("0.100000 > P. 1:51(50) ack 1"));
    assert!(f
        .actual
        .unwrap()
        .starts_with("0.100000 > P. 1:101(100) ack 1 win "));
}

#[test]
fn timing_is_checked_in_virtual_time() {
    // Without timestamps the RTO after a 100 ms sample is 300 ms; 200 ms is too early.
    let r = run(
        "+0 write(3, ..., 100) = 100\n+0 > P. 1:101(100) ack 1\n+.2 > P. 1:101(100) ack 1\n",
        &RunOptions::default(),
    );
    let f = r.failure.expect("fails");
    assert_eq!((f.line, f.kind), (9, FailureKind::Timing), "{}", f.message);
    let ok = run(
        "+0 write(3, ..., 100) = 100\n+0 > P. 1:101(100) ack 1\n+.3 > P. 1:101(100) ack 1\n",
        &RunOptions::default(),
    );
    assert_eq!(ok.status, Status::Pass, "{}", ok.to_text());
}

#[test]
fn lenient_skips_and_lists_what_it_cannot_run() {
    let src = "+0 `sysctl -q net.ipv4.tcp_timestamps=0`\n+0 %{ assert tcpi_rto == 300000 }%\n";
    let strict = run(src, &RunOptions::default());
    assert_eq!(strict.status, Status::Error);
    assert_eq!(strict.failure.unwrap().kind, FailureKind::Unsupported);
    let lenient = run(
        src,
        &RunOptions {
            lenient: true,
            ..RunOptions::default()
        },
    );
    assert_eq!(lenient.status, Status::Pass, "{}", lenient.to_text());
    assert_eq!(lenient.skipped.len(), 2);
    assert_eq!(lenient.skipped[0].line, 7);
}

#[test]
fn lenient_merges_tso_super_segments() {
    let line = "+0 write(3, ..., 3000) = 3000\n+0 > P. 1:3001(3000) ack 1\n";
    assert_eq!(run(line, &RunOptions::default()).status, Status::Fail);
    let r = run(
        line,
        &RunOptions {
            lenient: true,
            ..RunOptions::default()
        },
    );
    assert_eq!(r.status, Status::Pass, "{}", r.to_text());
}

#[test]
fn syscall_results_and_errnos_are_checked() {
    let r = run(
        "+0 read(3, ..., 10) = -1 ECONNRESET (x)\n",
        &RunOptions::default(),
    );
    let f = r.failure.unwrap();
    assert_eq!(f.kind, FailureKind::SyscallMismatch);
    assert_eq!(f.actual.as_deref(), Some("-1 EAGAIN"));
}

#[test]
fn parse_errors_and_json() {
    let r = run_source(
        "bad.pkt",
        "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+0 < S 0:0(0)\n",
        &RunOptions::default(),
    );
    assert_eq!(r.status, Status::Error);
    let f = r.failure.clone().unwrap();
    assert_eq!((f.kind, f.line), (FailureKind::Parse, 2));
    let ok = run("", &RunOptions::default());
    let json = to_json(&[r, ok]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["summary"]["scripts"], 2);
    assert_eq!(v["summary"]["passed"], 1);
    assert_eq!(v["scripts"][0]["failure"]["kind"], "parse");
}

#[test]
fn profiles_change_the_defaults() {
    let src = "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 connect(3, ..., ...) = -1 EINPROGRESS (x)
";
    let nonblock = src.replace(
        "+0 connect",
        "+0 fcntl(3, F_SETFL, O_RDWR|O_NONBLOCK) = 0\n+0 connect",
    );
    let linux = format!(
        "{nonblock}+0 > S 0:0(0) win 65535 <mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 8>\n"
    );
    let opts = |p| RunOptions {
        profile: Some(p),
        ..RunOptions::default()
    };
    assert_eq!(
        run_source("l", &linux, &opts(ProfileKind::Linux)).status,
        Status::Pass
    );
    let r = run_source("n", &linux, &opts(ProfileKind::Neutral));
    assert!(r.failure.unwrap().hint.unwrap().contains("window-scale"));
    // FreeBSD's option order matches with the freebsd profile (unordered comparison).
    let bsd = format!("{nonblock}+0 > S 0:0(0) <mss 1460,nop,wscale 6,sackOK,TS val 1 ecr 0>\n");
    assert_eq!(
        run_source("f", &bsd, &opts(ProfileKind::Freebsd)).status,
        Status::Pass
    );
}

#[test]
fn hostile_scripts_never_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pkt");
    let mut sources: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pkt"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    sources.push(
        "0 < S 0:0(0) win 1 <sack 1:2 3:4 5:6 7:8 9:10>\n99999999999 read(3, ..., -5) = 1\n".into(),
    );
    sources
        .push("+18446744073709 poll([{fd=3, events=POLLIN}], 1, 9223372036854775807) = 0\n".into());
    let opts = RunOptions {
        lenient: true,
        horizon_usecs: 5_000_000,
        ..RunOptions::default()
    };
    for src in &sources {
        let chars: Vec<char> = src.chars().collect();
        for cut in (0..chars.len()).step_by(37) {
            let s: String = chars[..cut].iter().collect();
            let _ = run_source("cut.pkt", &s, &opts);
            let swapped = s.replace('+', "").replace("ack", "win");
            let _ = run_source("mut.pkt", &swapped, &opts);
        }
    }
}
