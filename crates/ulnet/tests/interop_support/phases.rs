//! The checks the interop tests share, one phase each, as methods of a [`Session`]:
//! ulnet serving [`Services`] at `ip`, the kernel peer in namespace `ns`. Each asserts
//! with a message naming the direction that failed.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use ulnet::net::StackBuilder;
use ulnet::runtime::{AnyChannel, Runtime};
use ulnet_bench::testbed::Side;

use super::{
    curl, kernel_neighbor, kernel_tcp_server, kernel_udp_echo, output_in, pattern_sha, serve_until,
    serve_while, text, ulnet_bulk, ulnet_ping, write_pattern, Scratch, Services,
};

/// How long one phase may serve before a hung peer fails the test.
pub const LIMIT: Duration = Duration::from_secs(60);
/// [`LIMIT`] for a phase under 2% loss, where TCP spends time in recovery.
pub const LOSS_LIMIT: Duration = Duration::from_secs(90);

/// `ping -c COUNT -i 0.2 -W 2 IP` by the kernel in `ns` (any exit status).
pub fn ping_from(ns: &str, ip: IpAddr, count: u32) -> Output {
    let (count, ip) = (count.to_string(), ip.to_string());
    output_in(ns, "ping", &["-c", &count, "-i", "0.2", "-W", "2", &ip])
}

/// ulnet's runtime with its [`Services`] at `ip`, and the kernel peer's namespace `ns`.
/// Dropping it closes the runtime (detaching the channel, flushing a capture).
pub struct Session {
    pub rt: Runtime<AnyChannel>,
    pub s: Services,
    pub ip: IpAddr,
    pub ns: String,
}

impl Session {
    /// Builds the runtime `builder` describes and starts the services at its address;
    /// the kernel peer is in namespace `ns`.
    pub fn open(builder: StackBuilder, ns: &str) -> Session {
        let what = format!("{builder:?}");
        let rt = builder
            .build_runtime()
            .unwrap_or_else(|e| panic!("open the runtime {what}: {e}"));
        let ip = rt.iface().config().addresses[0].address();
        let s = Services::start(&rt, ip);
        Session {
            rt,
            s,
            ip,
            ns: ns.to_owned(),
        }
    }

    /// [`serve_while`] with the services, within [`LIMIT`].
    pub fn serve_while<T: Send>(&mut self, work: impl FnOnce() -> T + Send) -> T {
        serve_while(&mut self.rt, &mut self.s, LIMIT, work)
    }

    /// The kernel learned `mac` for ulnet's address by ARP.
    pub fn check_kernel_learned(&self, mac: &str) {
        assert_eq!(
            kernel_neighbor(&self.ns, self.ip).as_deref(),
            Some(mac),
            "ARP kernel → ulnet: the kernel did not learn ulnet's MAC"
        );
    }

    /// The kernel pings ulnet three times (resolving it by ARP first, so it must then
    /// hold `mac` for it), and ulnet pings the kernel at `kernel` three times.
    pub fn check_pings_both_ways(&mut self, mac: &str, kernel: IpAddr) {
        let (ns, ip) = (self.ns.clone(), self.ip);
        let ping = self.serve_while(|| ping_from(&ns, ip, 3));
        assert!(
            ping.status.success(),
            "kernel → ulnet ping: {}",
            text(&ping)
        );
        self.check_kernel_learned(mac);
        self.check_ulnet_pings(kernel);
    }

    /// ulnet pings the kernel at `kernel` three times and gets every reply.
    pub fn check_ulnet_pings(&mut self, kernel: IpAddr) {
        assert_eq!(
            ulnet_ping(&mut self.rt, &mut self.s, kernel, 3),
            3,
            "ulnet → kernel ping"
        );
    }

    /// A kernel UDP client gets `count` datagrams echoed intact by ulnet's echo service.
    pub fn check_udp_echo(&mut self, count: usize) {
        let (ns, to) = (self.ns.clone(), SocketAddr::new(self.ip, 7));
        let echoed = self.serve_while(|| kernel_udp_echo(&ns, to, count));
        assert_eq!(echoed, count, "UDP echoes intact");
    }

    /// curl fetches `len` pattern bytes from ulnet's HTTP server into `out`, intact.
    pub fn check_curl(&mut self, len: u64, out: &Path) {
        let url = format!("http://{}/bytes/{len}", self.ip);
        let ns = self.ns.clone();
        let got = self.serve_while(|| curl(&ns, &url, out));
        assert_eq!(got, (len, pattern_sha(len)), "curl body");
    }

    /// socat sends a file of `len` pattern bytes to ulnet's discard service, which must
    /// count them all, in order.
    pub fn check_socat_to_discard(&mut self, scratch: &Scratch, len: u64) {
        let file = scratch.path("up");
        write_pattern(&file, len);
        let src = format!("FILE:{}", file.display());
        let dst = format!("TCP:{}:9", self.ip);
        let sent = serve_until(
            &mut self.rt,
            &mut self.s,
            LIMIT,
            &self.ns,
            "socat",
            &["-u", &src, &dst],
            |s| s.discard.tcp_stats().finished >= 1,
        );
        assert!(sent.status.success(), "socat → discard: {}", text(&sent));
        let st = self.s.discard.stats();
        assert_eq!(
            (st.tcp_bytes, st.tcp_pattern_ok),
            (len, 1),
            "discard saw {st:?}"
        );
    }

    /// ulnet connects to a kernel server at `server`; ulnet sends `ulnet_sends` pattern
    /// bytes, the kernel `kernel_sends`, and both sides get theirs intact.
    pub fn check_bulk(&mut self, server: SocketAddr, ulnet_sends: u64, kernel_sends: u64) {
        let kernel = kernel_tcp_server(&self.ns, server, kernel_sends);
        let r = ulnet_bulk(&mut self.rt, &mut self.s, self.ip, server, ulnet_sends);
        assert!(!r.failed && r.sent == ulnet_sends, "ulnet ⇄ kernel: {r:?}");
        assert_eq!(
            (r.received, r.received_pattern_ok),
            (kernel_sends, true),
            "ulnet received"
        );
        assert_eq!(
            kernel.join().unwrap(),
            (ulnet_sends, pattern_sha(ulnet_sends)),
            "kernel received"
        );
    }

    /// With 2% random loss each way on `peer` (nftables), curl there still fetches `len`
    /// bytes intact. Returns how many packets the loss rules dropped.
    pub fn check_curl_under_loss(&mut self, peer: &Side, len: u64, out: &Path) -> u64 {
        peer.set_loss(2).expect("nft loss rules");
        let url = format!("http://{}/bytes/{len}", self.ip);
        let ns = &self.ns;
        let got = serve_while(&mut self.rt, &mut self.s, LOSS_LIMIT, || {
            curl(ns, &url, out)
        });
        let drops = ulnet_bench::testbed::loss_drops(&peer.ns).unwrap_or(0);
        peer.clear_loss().unwrap();
        assert_eq!(got, (len, pattern_sha(len)), "curl body under loss");
        drops
    }
}
