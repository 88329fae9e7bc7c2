//! The examples in `examples/` (built by `cargo test`) run against the kernel in the
//! peer namespace: the echo server answers socat, the HTTP client fetches from a socat
//! HTTP responder, the UDP ping-pong gets every echo from socat.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ulnet_bench::testbed::Testbed;

fn testbed(label: &str) -> Testbed {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("example interop needs root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    ulnet_bench::preflight::require_tool("socat")
        .unwrap_or_else(|e| panic!("example interop needs `socat`: {e}"));
    Testbed::builder()
        .name_prefix(label)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"))
}

/// target/<profile>/examples/<name>, next to this test's deps/ directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let p = dir.join("examples").join(name);
    assert!(p.exists(), "example {name} not built at {}", p.display());
    p
}

/// An example process, killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(tb: &Testbed, name: &str, ip: &str) -> Command {
    let b = tb.b();
    let mut c = Command::new(example(name));
    c.env("ULNET_BACKEND", "packet")
        .env("ULNET_NETNS", &b.ns)
        .env("ULNET_IFACE", &b.ifname)
        .env("ULNET_ADDR", format!("{ip}/{}", b.prefix_len));
    c
}

#[test]
fn echo_server_answers_the_kernel() {
    let tb = testbed("exe");
    let ip = tb.b().spare_ip(1).to_string();
    let _srv = Running(
        command(&tb, "echo_server", &ip)
            .args(["7", "1"])
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &tb.a().ns,
                "timeout",
                "5",
                "socat",
                "-t",
                "2",
                "-",
            ])
            .arg(format!("TCP:{ip}:7"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"hello from the kernel\n")
                .unwrap();
        }
        let o = c.wait_with_output().unwrap();
        if o.stdout == b"hello from the kernel\n" {
            break;
        }
        assert!(Instant::now() < deadline, "no echo within 10 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn http_client_fetches_from_the_kernel() {
    let tb = testbed("exh");
    let a = tb.a();
    let listen = format!("TCP-LISTEN:8080,bind={},reuseaddr,fork", a.ip);
    let _srv = a
        .spawn(
            "socat",
            [
                listen.as_str(),
                "SYSTEM:'printf \"HTTP/1.0 200 OK\\r\\nContent-Length: 12\\r\\n\\r\\nulnet works\\n\"'",
            ],
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let ip = tb.b().spare_ip(2).to_string();
    let o = command(&tb, "http_client", &ip)
        .arg(format!("http://{}:8080/x", a.ip))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, b"ulnet works\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("200 OK"));
}

#[test]
fn udp_ping_pong_gets_every_echo() {
    let tb = testbed("exu");
    let a = tb.a();
    let listen = format!("UDP-LISTEN:9000,bind={},fork", a.ip);
    let _srv = a.spawn("socat", [listen.as_str(), "EXEC:cat"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let ip = tb.b().spare_ip(3).to_string();
    let o = command(&tb, "udp_ping_pong", &ip)
        .args([format!("{}:9000", a.ip), "5".into()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("5/5 replies"), "{out}");
}
