//! The classic BPF program that splits received frames between the channel's two
//! receive rings: pure TCP ACKs to the ACK ring (TPACKET_V2, handed over frame by
//! frame), every other frame to the block ring (TPACKET_V3).
//!
//! Why: a TPACKET_V3 block reaches user space only when it is full or its retire timer
//! fires (at least 1 ms). A sender's ACK stream is a few hundred bytes a millisecond, so
//! every ACK waited for the timer and the connection's round trip grew from tens of
//! microseconds to up to a millisecond (measured: every block of a 20 Gb/s send over a
//! veth was retired by its timer, about 50 ACKs each). A pure ACK carries no data, so
//! handing it over before data that arrived earlier loses nothing: RFC 7323 §4.3
//! updates TS.Recent only from a segment at Last.ACK.sent, and an ACK for older data is
//! just an old ACK. SYN, FIN and RST segments, and any segment with payload, stay in
//! order with the data in the block ring.
//!
//! Both sockets run the same program with opposite verdicts, so each frame lands in
//! exactly one ring. Every load is guarded by a length check, because a load past the
//! end of a frame makes a classic BPF program return 0 (drop): a truncated or hostile
//! frame must still reach the block ring, where the stack drops and counts it.

/// `sock_filter` opcodes (include/uapi/linux/filter.h, bpf_common.h).
mod op {
    pub const LD_LEN: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_LEN) as u16;
    pub const LDH_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
    pub const LDB_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    pub const LDB_IND: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_IND) as u16;
    pub const LDX_MSH: u16 = (libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH) as u16;
    pub const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    pub const JEQ_X: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_X) as u16;
    pub const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    pub const JGE_X: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_X) as u16;
    pub const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    pub const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    pub const RSH_K: u16 = (libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K) as u16;
    pub const ADD_K: u16 = (libc::BPF_ALU | libc::BPF_ADD | libc::BPF_K) as u16;
    pub const ADD_X: u16 = (libc::BPF_ALU | libc::BPF_ADD | libc::BPF_X) as u16;
    pub const TAX: u16 = (libc::BPF_MISC | libc::BPF_TAX) as u16;
    pub const TXA: u16 = (libc::BPF_MISC | libc::BPF_TXA) as u16;
    pub const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
}

/// Bytes a socket keeps of an accepted frame: more than any frame, so all of it.
const KEEP_ALL: u32 = 0x0004_0000;

/// Where a jump goes.
#[derive(Clone, Copy)]
enum To {
    Next,
    Ack,
    Other,
    Ipv6,
}

/// One instruction before its jump offsets are resolved.
#[derive(Clone, Copy)]
struct Insn {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

const fn s(code: u16, k: u32) -> Insn {
    Insn {
        code,
        k,
        jt: To::Next,
        jf: To::Next,
    }
}

const fn j(code: u16, k: u32, jt: To, jf: To) -> Insn {
    Insn { code, k, jt, jf }
}

/// The program's body: it ends by jumping to the ACK or the other verdict. Offsets are
/// from the start of the Ethernet header (a `SOCK_RAW` packet socket's view; the kernel
/// keeps VLAN tags out of the frame data).
const BODY: [Insn; 39] = {
    use op::*;
    use To::*;
    [
        s(LD_LEN, 0),
        j(JGE_K, 14, Next, Other),
        s(LDH_ABS, 12), // EtherType
        j(JEQ_K, 0x0800, Next, Ipv6),
        // IPv4 (RFC 791 §3.1): a whole TCP datagram, not a fragment.
        s(LD_LEN, 0),
        j(JGE_K, 14 + 20, Next, Other),
        s(LDB_ABS, 14 + 9), // protocol
        j(JEQ_K, 6, Next, Other),
        s(LDH_ABS, 14 + 6),             // flags and fragment offset
        j(JSET_K, 0x3fff, Other, Next), // MF or an offset: a fragment
        s(LDX_MSH, 14),                 // X = IHL * 4
        s(TXA, 0),
        s(ADD_K, 14 + 20), // the end of a minimal TCP header
        s(TAX, 0),
        s(LD_LEN, 0),
        j(JGE_X, 0, Next, Other),
        s(LDX_MSH, 14),
        s(LDB_IND, 14 + 13),          // TCP flags (RFC 9293 §3.1)
        j(JSET_K, 0x07, Other, Next), // FIN, SYN or RST
        s(LDB_IND, 14 + 12),          // data offset
        s(AND_K, 0xf0),
        s(RSH_K, 2), // data offset * 4
        s(ADD_X, 0),
        s(TAX, 0),          // X = IP header + TCP header
        s(LDH_ABS, 14 + 2), // total length
        j(JEQ_X, 0, Ack, Other),
        // IPv6 (RFC 8200 §3): TCP right after the fixed header (extension headers and
        // everything else go to the block ring). A still holds the EtherType.
        j(JEQ_K, 0x86dd, Next, Other),
        s(LD_LEN, 0),
        j(JGE_K, 14 + 40 + 20, Next, Other),
        s(LDB_ABS, 14 + 6), // next header
        j(JEQ_K, 6, Next, Other),
        s(LDB_ABS, 14 + 40 + 13),
        j(JSET_K, 0x07, Other, Next),
        s(LDB_ABS, 14 + 40 + 12),
        s(AND_K, 0xf0),
        s(RSH_K, 2),
        s(TAX, 0),
        s(LDH_ABS, 14 + 4), // payload length
        j(JEQ_X, 0, Ack, Other),
    ]
};

/// Index of the IPv6 branch in [`BODY`].
const IPV6_AT: usize = 26;
/// Index of the two verdicts, after the body.
const ACK_AT: usize = BODY.len();
const OTHER_AT: usize = BODY.len() + 1;

/// The filter for one of the two sockets: `acks` keeps pure TCP ACKs and drops the
/// rest (the ACK ring), `!acks` the opposite (the block ring).
pub(crate) fn program(acks: bool) -> Vec<libc::sock_filter> {
    let target = |to: To, pc: usize| -> u8 {
        let at = match to {
            To::Next => pc + 1,
            To::Ack => ACK_AT,
            To::Other => OTHER_AT,
            To::Ipv6 => IPV6_AT,
        };
        // Every jump in BODY goes forward by less than 256 (checked by the tests).
        (at - pc - 1) as u8
    };
    let mut out: Vec<libc::sock_filter> = BODY
        .iter()
        .enumerate()
        .map(|(pc, i)| libc::sock_filter {
            code: i.code,
            jt: target(i.jt, pc),
            jf: target(i.jf, pc),
            k: i.k,
        })
        .collect();
    let (ack, other) = if acks { (KEEP_ALL, 0) } else { (0, KEEP_ALL) };
    out.push(libc::sock_filter {
        code: op::RET_K,
        jt: 0,
        jf: 0,
        k: ack,
    });
    out.push(libc::sock_filter {
        code: op::RET_K,
        jt: 0,
        jf: 0,
        k: other,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The classic BPF interpreter for the opcodes above, as the kernel runs them
    /// (`bpf_convert_filter` semantics: a load past the end returns 0). `None` when the
    /// program read out of bounds.
    fn run(prog: &[libc::sock_filter], pkt: &[u8]) -> Option<u32> {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let load = |at: usize, n: usize| -> Option<u32> {
            let b = pkt.get(at..at.checked_add(n)?)?;
            Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
        };
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                op::LD_LEN => a = pkt.len() as u32,
                op::LDH_ABS => a = load(i.k as usize, 2)?,
                op::LDB_ABS => a = load(i.k as usize, 1)?,
                op::LDB_IND => a = load(x as usize + i.k as usize, 1)?,
                op::LDX_MSH => x = (load(i.k as usize, 1)? & 0xf) * 4,
                op::AND_K => a &= i.k,
                op::RSH_K => a >>= i.k,
                op::ADD_K => a = a.wrapping_add(i.k),
                op::ADD_X => a = a.wrapping_add(x),
                op::TAX => x = a,
                op::TXA => a = x,
                op::RET_K => return Some(i.k),
                code => {
                    let hit = match code {
                        op::JEQ_K => a == i.k,
                        op::JEQ_X => a == x,
                        op::JGE_K => a >= i.k,
                        op::JGE_X => a >= x,
                        op::JSET_K => a & i.k != 0,
                        _ => panic!("opcode {code:#x} not interpreted"),
                    };
                    pc += usize::from(if hit { i.jt } else { i.jf });
                }
            }
        }
    }

    fn classify(pkt: &[u8]) -> (u32, u32) {
        (
            run(&program(true), pkt).expect("ACK program read out of bounds"),
            run(&program(false), pkt).expect("block program read out of bounds"),
        )
    }

    fn is_ack(pkt: &[u8]) -> bool {
        match classify(pkt) {
            (KEEP_ALL, 0) => true,
            (0, KEEP_ALL) => false,
            v => panic!("both or neither ring took the frame: {v:?}"),
        }
    }

    /// Ethernet + IPv4 (IHL words) + TCP (data offset words) + payload.
    fn v4(ihl: u8, doff: u8, flags: u8, payload: usize) -> Vec<u8> {
        let ip_len = usize::from(ihl) * 4;
        let tcp_len = usize::from(doff) * 4;
        let total = ip_len + tcp_len + payload;
        let mut p = vec![0u8; 14 + total];
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        p[14] = 0x40 | ihl;
        p[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        p[20] = 0x40; // DF
        p[23] = 6;
        p[14 + ip_len + 12] = doff << 4;
        p[14 + ip_len + 13] = flags;
        p
    }

    fn v6(doff: u8, flags: u8, payload: usize) -> Vec<u8> {
        let tcp_len = usize::from(doff) * 4;
        let mut p = vec![0u8; 14 + 40 + tcp_len + payload];
        p[12..14].copy_from_slice(&[0x86, 0xdd]);
        p[14] = 0x60;
        p[18..20].copy_from_slice(&((tcp_len + payload) as u16).to_be_bytes());
        p[20] = 6;
        p[14 + 40 + 12] = doff << 4;
        p[14 + 40 + 13] = flags;
        p
    }

    const ACK: u8 = 0x10;
    const PSH: u8 = 0x08;

    #[test]
    fn jumps_fit_and_go_forward() {
        for (pc, i) in BODY.iter().enumerate() {
            for to in [i.jt, i.jf] {
                let at = match to {
                    To::Next => pc + 1,
                    To::Ack => ACK_AT,
                    To::Other => OTHER_AT,
                    To::Ipv6 => IPV6_AT,
                };
                assert!(at > pc && at - pc - 1 < 256, "jump at {pc}");
            }
        }
        assert_eq!(BODY[IPV6_AT].k, 0x86dd);
    }

    #[test]
    fn pure_acks_go_to_the_ack_ring() {
        assert!(is_ack(&v4(5, 5, ACK, 0)));
        assert!(is_ack(&v4(5, 8, ACK, 0))); // timestamps
        assert!(is_ack(&v4(5, 15, ACK, 0))); // SACK blocks
        assert!(is_ack(&v4(6, 5, ACK, 0))); // IP options
        assert!(is_ack(&v4(5, 8, ACK | PSH | 0x40 | 0x80, 0))); // ECE, CWR
        assert!(is_ack(&v6(5, ACK, 0)));
        assert!(is_ack(&v6(8, ACK, 0)));
        // Ethernet padding after a short frame (60 bytes on the wire): the IP lengths
        // still say no payload.
        let mut padded = v4(5, 5, ACK, 0);
        padded.resize(60, 0);
        assert!(is_ack(&padded));
    }

    #[test]
    fn everything_else_goes_to_the_block_ring() {
        assert!(!is_ack(&v4(5, 8, ACK, 1)));
        assert!(!is_ack(&v4(5, 8, ACK | PSH, 1448)));
        assert!(!is_ack(&v6(8, ACK, 8948)));
        for flag in [0x01, 0x02, 0x04] {
            // FIN, SYN, RST stay in order with the data.
            assert!(!is_ack(&v4(5, 5, ACK | flag, 0)));
            assert!(!is_ack(&v6(5, ACK | flag, 0)));
        }
        let mut frag = v4(5, 5, ACK, 0);
        frag[20] = 0x20; // MF
        assert!(!is_ack(&frag));
        let mut frag = v4(5, 5, ACK, 0);
        frag[21] = 0x01; // an offset
        assert!(!is_ack(&frag));
        let mut udp = v4(5, 5, 0, 0);
        udp[23] = 17;
        assert!(!is_ack(&udp));
        let mut hop = v6(5, ACK, 0);
        hop[20] = 0; // a hop-by-hop extension header first
        assert!(!is_ack(&hop));
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!is_ack(&arp));
        // Frames cut inside the fixed headers. (Cut inside the TCP options, a frame
        // may go either way: the stack drops it as truncated in either ring.)
        let ack = v4(5, 8, ACK, 0);
        for n in 0..14 + 20 + 20 {
            assert!(!is_ack(&ack[..n]), "cut at {n}");
        }
        let ack = v6(8, ACK, 0);
        for n in 0..14 + 40 + 20 {
            assert!(!is_ack(&ack[..n]), "cut at {n}");
        }
    }

    proptest! {
        /// No frame, however malformed, makes either program read out of bounds (which
        /// would drop it from both rings uncounted), and exactly one ring takes it.
        #[test]
        fn every_frame_lands_in_exactly_one_ring(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..200),
            kind in 0u8..3,
        ) {
            if bytes.len() >= 24 {
                match kind {
                    0 => { bytes[12] = 0x08; bytes[13] = 0x00; bytes[23] = 6; }
                    1 => { bytes[12] = 0x86; bytes[13] = 0xdd; bytes[20] = 6; }
                    _ => {}
                }
            }
            is_ack(&bytes);
        }
    }
}
