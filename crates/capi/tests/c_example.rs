//! examples/c/echo_server.c, compiled against include/ulnet.h and linked with the
//! cdylib, serves kernel clients in the peer namespace over AF_XDP: byte-exact echo of
//! 2 MB and of a short line (the client half-closes; the server echoes to EOF), then
//! exits by itself after both connections.

mod support;

use std::time::Duration;

use support::*;

#[test]
fn c_echo_server_on_xdp_serves_kernel_clients_byte_exact() {
    let tb = testbed("capic");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let scratch = Scratch::new();
    let exe = scratch.path("echo_server");
    compile(&["examples/c/echo_server.c"], &exe, true);
    let (ip, env) = ulnet_env(&a, 0);
    let mut server = spawn_in(&a.ns, &env, &exe, &["7007", "2"]);
    wait_line(&mut server, "listening on 7007");

    let input = scratch.path("in");
    let output = scratch.path("out");
    write_random(&input, 2_000_000);
    let o = sh_in(
        &b.ns,
        &format!(
            "socat -t 10 -T 20 - TCP:{ip}:7007 < {} > {}",
            input.display(),
            output.display()
        ),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "socat: {}", text(&o));
    let (same, n_in, n_out) = same_file(&input, &output);
    assert!(same, "echo differs: sent {n_in} bytes, got {n_out}");

    let o = sh_in(
        &b.ns,
        &format!("echo hello ulnet | socat -t 10 - TCP:{ip}:7007"),
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello ulnet\n",
        "{}",
        text(&o)
    );

    let out = server
        .wait_timeout(Duration::from_secs(20))
        .expect("the server did not exit after its two connections");
    assert!(out.status.success(), "server: {}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("2 connections, 2000012 bytes echoed"), "{log}");
}
