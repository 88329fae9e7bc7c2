//! Corpus builders shared by the wire property tests.
// Each test binary uses a different subset.
#![allow(dead_code)]

use proptest::prelude::*;
use ulnet_wire::*;

/// Any TCP options our representation holds: MSS, window scale (drawn from
/// `window_scale`), SACK-permitted, up to four SACK blocks, a timestamp.
pub fn tcp_options(window_scale: impl Strategy<Value = u8>) -> impl Strategy<Value = TcpOptions> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(window_scale),
        any::<bool>(),
        proptest::collection::vec(any::<(u32, u32)>(), 0..=4),
        proptest::option::of(any::<(u32, u32)>()),
    )
        .prop_map(|(mss, ws, sp, sack, ts)| TcpOptions {
            mss,
            window_scale: ws,
            sack_permitted: sp,
            sack_blocks: SackBlocks::from_slice(
                &sack
                    .iter()
                    .map(|&(l, r)| (SeqNumber(l), SeqNumber(r)))
                    .collect::<Vec<_>>(),
            ),
            timestamp: ts.map(|(tsval, tsecr)| TcpTimestamp { tsval, tsecr }),
        })
}

/// An Ethernet frame (02:00:00:00:00:01 → 02:00:00:00:00:02) carrying `ip` (emitted with
/// its checksum) and then `transport`.
pub fn ipv4_frame(ip: Ipv4Repr, transport: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + ip.buffer_len()];
    EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut f[14..]),
        ChecksumMode::Full,
    );
    f[34..].copy_from_slice(transport);
    f
}
