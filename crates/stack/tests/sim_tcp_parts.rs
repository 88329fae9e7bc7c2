//! TCP through `Interface::ingress_parts`: every received frame is handed over cut into
//! several buffers, as a multi-buffer AF_XDP channel hands a jumbo frame, at cut points
//! that fall inside the headers (the frame is gathered first), inside the payload at
//! odd offsets (taken where it lies, its checksum summed across the cuts) or nowhere.
//! Over a wire that loses, duplicates, reorders and corrupts frames, the stream must
//! arrive byte for byte, and no corrupted segment may pass as good.

mod common;

use std::os::fd::BorrowedFd;

use common::{Family, Sim, SimChannel};
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_channel::{Capabilities, Channel, RxParts, Stats, Tx};
use ulnet_stack::iface::DropReason;
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::Duration;

/// An endpoint whose received frames come out in pieces.
struct Cut {
    inner: Endpoint,
    frames: usize,
}

impl Cut {
    /// Where frame number `k` of `len` bytes is cut: a pattern that walks through cuts
    /// inside the Ethernet, IP and TCP headers, right after them, at odd and even
    /// offsets of the payload, several at once, and none.
    fn cuts(k: usize, len: usize) -> Vec<usize> {
        let cuts: Vec<usize> = match k % 6 {
            0 => vec![],
            1 => vec![14],
            2 => vec![14 + 20 + 20 + k % 13],
            3 => vec![61, 394, 395, 1001],
            4 => vec![200 + k % 7, 201 + k % 7 + k % 300],
            _ => (1..12).map(|i| 54 + i * (77 + k % 5)).collect(),
        };
        cuts.into_iter().filter(|&c| c > 0 && c < len).collect()
    }
}

impl Channel for Cut {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet_channel::Result<usize> {
        self.inner.rx_batch(max_count, f)
    }

    fn rx_batch_parts(
        &mut self,
        max_count: usize,
        f: &mut RxParts<'_>,
    ) -> ulnet_channel::Result<usize> {
        let frames = &mut self.frames;
        self.inner.rx_batch(max_count, &mut |frame, tx| {
            *frames += 1;
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in Cut::cuts(*frames, frame.len()) {
                if c > at {
                    pieces.push(&frame[at..c]);
                    at = c;
                }
            }
            pieces.push(&frame[at..]);
            f(pieces[0], &pieces[1..], tx);
        })
    }

    fn tx(&mut self) -> &mut dyn Tx {
        self.inner.tx()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn stats(&self) -> Stats {
        self.inner.stats()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl SimChannel for Cut {
    fn next_arrival(&self) -> Option<std::time::Duration> {
        self.inner.next_arrival()
    }
}

fn transfer(family: Family, seed: u64, link: LinkConfig, len: usize) -> Sim {
    let (wire, a, b) = Wire::pair(seed, link.clone(), link);
    let mut sim = Sim::new(wire);
    sim.family = family;
    for (i, inner) in [(1, a), (2, b)] {
        sim.add(family.config(i), Box::new(Cut { inner, frames: 0 }));
    }
    sim.iface(0)
        .set_tcp(Tcp::new(TcpConfig::default(), [1; 16]));
    sim.iface(1)
        .set_tcp(Tcp::new(TcpConfig::default(), [2; 16]));
    let data = common::tcp::stream(len);
    let t = common::tcp::transfer(&mut sim, &data, Duration::from_secs(600));
    assert!(
        t.done,
        "{family:?}: transfer incomplete: {} of {len} bytes by {}",
        t.received.len(),
        sim.now()
    );
    assert!(t.received == data, "{family:?}: stream corrupted");
    sim
}

#[test]
fn a_stream_in_cut_frames_arrives_intact() {
    for family in [Family::V4, Family::V6] {
        let sim = transfer(
            family,
            11,
            LinkConfig::new().delay(std::time::Duration::from_millis(1)),
            400_000,
        );
        let s = sim.nodes[1].iface.stats();
        // Nothing dropped but what a clean wire brings anyway: ARP for the other host,
        // and (IPv6) its Router Solicitation to all-routers.
        let expected = s.drops(DropReason::ArpNotForUs) + s.drops(DropReason::Ipv6NotForUs);
        assert_eq!(s.total_drops(), expected, "{family:?}: {s}");
        // Frames whose headers all came in the first buffer are taken where they lie;
        // the rest are gathered.
        assert!(
            s.rx_parts_in_place > 50 && s.rx_parts_gathered > 50,
            "{family:?}: {s}"
        );
    }
}

#[test]
fn cut_frames_on_a_hostile_wire_carry_the_stream_and_no_corruption() {
    for family in [Family::V4, Family::V6] {
        let link = LinkConfig::new()
            .loss(0.02)
            .duplicate(0.01)
            .reorder(0.02)
            .corrupt(0.02)
            .delay(std::time::Duration::from_millis(1));
        let sim = transfer(family, 12, link, 300_000);
        let s = sim.nodes[1].iface.stats();
        // Corrupted frames were caught (by a checksum: the stream above is intact).
        assert!(s.total_drops() > 0, "{family:?}: {s}");
    }
}
