//! The receive walk and transmit bookkeeping of [`PacketChannel`] over rings in private
//! memory that the test fills as the kernel would (no privileges needed).

use super::PacketChannel;
use crate::sys::packet::{RxRing, TxRing};
use crate::{Capabilities, Channel, TxError};

const BLOCK: usize = 4096;

fn channel(blocks: usize, slots: usize, batch_count: usize) -> PacketChannel {
    let caps = Capabilities {
        name: "packet",
        mtu: 1500,
        max_frame_len: 1514,
        rx_checksum_verified: false,
        rx_checksum_unfinished: false,
        tx_checksum_offload: false,
        batch_count,
        gso_max_len: 0,
        mode: "fake".into(),
    };
    PacketChannel::assemble(
        RxRing::fake(BLOCK, blocks),
        TxRing::fake(2048, slots),
        caps,
        crate::bursts::Bursts::new(None),
    )
}

/// Collects what `rx_batch(max)` hands out.
fn take(ch: &mut PacketChannel, max: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let n = ch.rx_batch(max, &mut |f, _| got.push(f.to_vec())).unwrap();
    assert_eq!(n, got.len());
    got
}

#[test]
fn walk_resumes_mid_block_and_releases_only_finished_blocks() {
    let mut ch = channel(3, 4, 64);
    ch.rx
        .ring
        .fake_fill(0, &[(b"a0", 2), (b"a1", 2), (b"a2", 2)]);
    ch.rx.ring.fake_fill(1, &[(b"b0", 2)]);
    assert_eq!(take(&mut ch, 2), [b"a0", b"a1"]);
    assert_ne!(
        ch.rx.ring.fake_status(0),
        libc::TP_STATUS_KERNEL,
        "released early"
    );
    assert_eq!(take(&mut ch, 1), [b"a2"]);
    assert_eq!(ch.rx.ring.fake_status(0), libc::TP_STATUS_KERNEL);
    // Block 2 still belongs to the kernel: the walk stops at it.
    assert_eq!(take(&mut ch, 64), [b"b0"]);
    assert_eq!(ch.rx.ring.fake_status(1), libc::TP_STATUS_KERNEL);
    assert!(take(&mut ch, 64).is_empty());
    // The ring wraps: block 2, then block 0 again.
    ch.rx.ring.fake_fill(2, &[(b"c0", 2)]);
    ch.rx.ring.fake_fill(0, &[(b"d0", 2)]);
    assert_eq!(take(&mut ch, 64), [b"c0", b"d0"]);
    let st = ch.stats();
    assert_eq!(
        (st.rx_frames, st.rx_bytes, st.rx_dropped, st.empty_polls),
        (6, 12, 0, 1)
    );
}

#[test]
fn batch_count_caps_the_batch() {
    let mut ch = channel(2, 4, 2);
    ch.rx.ring.fake_fill(0, &[(b"1", 1), (b"2", 1), (b"3", 1)]);
    assert_eq!(take(&mut ch, 64).len(), 2);
    assert_eq!(take(&mut ch, 64).len(), 1);
}

#[test]
fn truncated_and_corrupt_frames_are_dropped_and_counted() {
    let mut ch = channel(2, 4, 64);
    // A frame cut short by the ring (snaplen < wire length) is dropped, not handed out.
    ch.rx
        .ring
        .fake_fill(0, &[(b"ok", 2), (b"cut", 3000), (b"ok2", 3)]);
    // A header pointing outside the block ends that block; the next block is fine.
    let offs = ch
        .rx
        .ring
        .fake_fill(1, &[(b"x0", 2), (b"x1", 2), (b"x2", 2)]);
    ch.rx.ring.fake_poke(1, offs[0], 1 << 20);
    assert_eq!(take(&mut ch, 64), [&b"ok"[..], b"ok2", b"x0"]);
    let st = ch.stats();
    assert_eq!((st.rx_frames, st.rx_dropped), (3, 3), "{st:?}");
    assert_eq!(ch.rx.ring.fake_status(1), libc::TP_STATUS_KERNEL);
}

#[test]
fn empty_block_is_released() {
    let mut ch = channel(2, 4, 64);
    ch.rx.ring.fake_fill(0, &[]);
    ch.rx.ring.fake_fill(1, &[(b"z", 1)]);
    assert_eq!(take(&mut ch, 64), [b"z"]);
    assert_eq!(ch.rx.ring.fake_status(0), libc::TP_STATUS_KERNEL);
}

#[test]
fn answers_from_the_callback_land_in_the_tx_ring_in_order() {
    let mut ch = channel(1, 2, 64);
    ch.rx
        .ring
        .fake_fill(0, &[(b"ping1", 5), (b"ping2", 5), (b"ping3", 5)]);
    let mut results = Vec::new();
    ch.rx_batch(64, &mut |f, tx| {
        results.push(tx.send(f.len(), &mut |b| b.copy_from_slice(f)));
    })
    .unwrap();
    assert_eq!(results, [Ok(()), Ok(()), Err(TxError::Full)]);
    let (status, bytes) = ch.tx.ring.fake_take(0, libc::TP_STATUS_AVAILABLE);
    assert_eq!(
        (status, &bytes[..]),
        (libc::TP_STATUS_SEND_REQUEST, &b"ping1"[..])
    );
    let (_, bytes) = ch.tx.ring.fake_take(1, libc::TP_STATUS_SEND_REQUEST);
    assert_eq!(bytes, b"ping2");
    // Slot 0 came back; slot 1 is still in flight, so the head (slot 0) is usable once.
    assert_eq!(ch.tx().send(3, &mut |b| b.copy_from_slice(b"new")), Ok(()));
    assert_eq!(ch.tx().send(3, &mut |_| {}), Err(TxError::Full));
    assert_eq!(ch.tx().send(1515, &mut |_| {}), Err(TxError::TooLarge));
    let st = ch.stats();
    assert_eq!(
        (st.tx_frames, st.tx_bytes, st.tx_dropped),
        (3, 13, 3),
        "{st:?}"
    );
    // The fake socket is /dev/null: the doorbell fails and says which call failed.
    let e = ch.tx().flush().unwrap_err();
    assert_eq!(e.op, "send(AF_PACKET tx ring)");
    assert_eq!(ch.stats().kicks, 1);
}
