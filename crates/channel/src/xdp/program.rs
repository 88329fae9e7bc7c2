//! The flow-steering XDP program, emitted instruction by instruction (see `bpf/README.md`
//! for the same logic in prose).
//!
//! Verdicts: a frame that belongs to ulnet is redirected to the AF_XDP socket of its
//! receive queue through the XSKMAP; everything else gets `XDP_PASS`, so the host's own
//! traffic on the link keeps working. "Belongs to ulnet" means:
//! - ARP (Ethernet/IPv4) whose target protocol address is in the IPv4 address map;
//! - IPv4 whose destination is in the IPv4 address map, and, when flow rules are on,
//!   whose (protocol, destination port) or (protocol, any port) is in the rule map; a
//!   fragment with a nonzero offset carries no port and goes by address only;
//! - IPv6 whose destination is in the IPv6 address map (ulnet's addresses, link-local
//!   included, their solicited-node groups and all-nodes `ff02::1`, RFC 4291 §2.7.1),
//!   with the same rules, except that ICMPv6 (neighbour discovery, RFC 4861) and
//!   packets whose first next header is an extension header (fragments among them) go
//!   by address only.
//!
//! One 802.1Q/802.1ad tag is looked through. Every packet access is preceded by a
//! bounds check against `data_end`, which is what the verifier demands; a frame too
//! short for the header being read gets `XDP_PASS` and the kernel judges it.
//!
//! `bpf_redirect_map` is called with `XDP_PASS` in the flags: if no socket is bound on
//! the queue, the frame goes to the kernel instead of being dropped.
//!
//! The SYN policer (when the maps include one): a TCP segment to be steered that opens a
//! connection (SYN without ACK) passes a rate check first, because a SYN flood fills
//! the AF_XDP receive ring faster than ulnet empties it, and a full ring drops what
//! matters most: the segments of connections already open, a new client's request
//! among them. SYNs within a global rate pass whatever their source; above it, each
//! source (an IPv4 address, an IPv6 /64) gets a small rate of its own, so a flood from a
//! few hosts is dropped here, counted, while a host that was quiet still gets through.
//! Both checks are GCRA (the "virtual scheduling" form of a token bucket, ITU-T I.371):
//! one theoretical arrival time per bucket, no division in the program. The state is
//! shared by the CPUs without locks: concurrent SYNs may both pass where one should
//! have, which errs towards passing. A flood from sources spread over more addresses
//! than the source map holds is limited by ulnet's own capacity (SYN cookies, the
//! stack's); the global rate keeps the ring free up to that point.

use super::asm::{Alu, Asm, AsmError, Cond, Label, Reg, Size};
use crate::sys::bpf::BpfInsn;

/// `XDP_DROP`.
pub const XDP_DROP: i32 = 1;
/// `XDP_PASS`.
pub const XDP_PASS: i32 = 2;
/// `XDP_REDIRECT`.
pub const XDP_REDIRECT: i32 = 4;

const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_MAP_UPDATE_ELEM: i32 = 2;
const HELPER_KTIME_GET_NS: i32 = 5;
const HELPER_REDIRECT_MAP: i32 = 51;

/// TCP flags byte: SYN and ACK.
const TCP_SYN: i32 = 0x02;
const TCP_ACK: i32 = 0x10;

/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// EtherTypes as a little-endian `u16` load of the two wire bytes sees them.
const fn wire16(v: u16) -> i32 {
    v.swap_bytes() as i32
}
const ETH_P_IP: i32 = wire16(0x0800);
const ETH_P_ARP: i32 = wire16(0x0806);
const ETH_P_IPV6: i32 = wire16(0x86dd);
const ETH_P_8021Q: i32 = wire16(0x8100);
const ETH_P_8021AD: i32 = wire16(0x88a8);

/// IP protocol numbers whose header starts with (source port, destination port).
const PORT_PROTOCOLS: [i32; 4] = [
    6,   /* TCP */
    17,  /* UDP */
    132, /* SCTP */
    136, /* UDP-Lite */
];
/// IPv6 next-header values steered by address only: ICMPv6 (neighbour discovery, RFC
/// 4861, has no ports) and the extension headers of RFC 8200 §4 that can precede the
/// transport header (walking a chain is the stack's job, which bounds it; a fragment
/// after the first carries no port at all).
const IPV6_BY_ADDRESS: [i32; 5] = [
    58, /* ICMPv6 */
    0,  /* hop-by-hop options */
    43, /* routing */
    44, /* fragment */
    60, /* destination options */
];

/// Stack slots (offsets from r10).
const KEY_RULE: i16 = -8; // 4 bytes: proto, 0, port (network order)
const KEY_V4: i16 = -4; // 4 bytes
const KEY_V6: i16 = -24; // 16 bytes
const KEY_SRC: i16 = -32; // 8 bytes: IPv4 source and 0xffffffff, or the IPv6 source's /64
const VAL_TAT: i16 = -40; // 8 bytes: a new source's first theoretical arrival time
const KEY_ZERO: i16 = -44; // 4 bytes: index 0 of the policer's state

/// Byte offsets in the SYN policer's state (the one entry of its ARRAY map), all `u64`
/// in host order: the global bucket's theoretical arrival time (ns, `ktime_get_ns`), its
/// emission interval and tolerance (ns), a source's interval and tolerance, and the
/// count of SYNs dropped.
pub(crate) const SYN_TAT: i16 = 0;
pub(crate) const SYN_INTERVAL: i16 = 8;
pub(crate) const SYN_TOLERANCE: i16 = 16;
pub(crate) const SYN_SRC_INTERVAL: i16 = 24;
pub(crate) const SYN_SRC_TOLERANCE: i16 = 32;
pub(crate) const SYN_DROPPED: i16 = 40;
/// Size of the SYN policer's state.
pub const SYN_STATE_LEN: u32 = 48;

/// File descriptors of the maps the program refers to.
#[derive(Debug, Clone, Copy)]
pub struct MapFds {
    /// XSKMAP: rx queue index → AF_XDP socket.
    pub xsks: i32,
    /// HASH: IPv4 address (4 bytes, network order) → u8.
    pub addrs4: i32,
    /// HASH: IPv6 address (16 bytes) → u8.
    pub addrs6: i32,
    /// HASH: rule key (see [`rule_key`]) → u8.
    pub rules: i32,
    /// The SYN policer's maps, when it is on.
    pub syn: Option<SynMapFds>,
}

/// File descriptors of the SYN policer's maps.
#[derive(Debug, Clone, Copy)]
pub struct SynMapFds {
    /// ARRAY of one entry: the policer's parameters, global bucket and drop count
    /// (`SYN_STATE_LEN` bytes).
    pub state: i32,
    /// LRU_HASH: source key (8 bytes) → its bucket's theoretical arrival time (`u64`).
    pub sources: i32,
}

/// What the program does with a frame it steers. Tests replace the redirect with a
/// constant verdict so the classification can be run through `BPF_PROG_TEST_RUN`
/// without a bound socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// `bpf_redirect_map(xsks, rx_queue_index, XDP_PASS)`.
    Redirect,
    /// Return this XDP verdict.
    Verdict(i32),
}

/// The rule-map key for (protocol, destination port); port 0 means any port.
pub fn rule_key(protocol: u8, dst_port: u16) -> [u8; 4] {
    let p = dst_port.to_be_bytes();
    [protocol, 0, p[0], p[1]]
}

struct Gen {
    a: Asm,
    maps: MapFds,
    rules: bool,
    steer: Label,
    pass: Label,
    /// Shared transport-level checks (flow rules, SYN policer): r1 = protocol, r3 =
    /// pointer to the L4 header.
    l4: Label,
}

/// Emits the steering program. With `rules` false, every frame addressed to ulnet is
/// steered whatever its protocol and port.
///
/// # Errors
/// [`AsmError`] only for a bug in this generator.
pub fn steering_program(maps: MapFds, rules: bool, steer: Steer) -> Result<Vec<BpfInsn>, AsmError> {
    let mut a = Asm::new();
    let steer_l = a.label();
    let pass = a.label();
    let l4 = a.label();
    let mut g = Gen {
        a,
        maps,
        rules,
        steer: steer_l,
        pass,
        l4,
    };
    g.ethernet();
    g.tails(steer);
    g.a.finish()
}

impl Gen {
    /// r6 = ctx, r7 = data, r8 = data_end; dispatch on the EtherType.
    fn ethernet(&mut self) {
        let vlan = self.a.label();
        let a = &mut self.a;
        a.mov(Reg::R6, Reg::R1)
            .ldx(Size::W, Reg::R7, Reg::R6, MD_DATA)
            .ldx(Size::W, Reg::R8, Reg::R6, MD_DATA_END);
        self.need(14);
        self.a.ldx(Size::H, Reg::R1, Reg::R7, 12);
        self.a
            .jmp_imm(Cond::Eq, Reg::R1, ETH_P_8021Q, vlan)
            .jmp_imm(Cond::Eq, Reg::R1, ETH_P_8021AD, vlan);
        self.l3(14);
        self.a.bind(vlan);
        self.need(18);
        self.a.ldx(Size::H, Reg::R1, Reg::R7, 16);
        self.l3(18);
    }

    /// `if data + len > data_end goto pass` (clobbers r2).
    fn need(&mut self, len: i32) {
        self.a
            .mov(Reg::R2, Reg::R7)
            .alu_imm(Alu::Add, Reg::R2, len)
            .jmp(Cond::Gt, Reg::R2, Reg::R8, self.pass);
    }

    /// r1 = EtherType (wire order), L3 header at `l3`.
    fn l3(&mut self, l3: i16) {
        let (ip4, arp, ip6) = (self.a.label(), self.a.label(), self.a.label());
        self.a
            .jmp_imm(Cond::Eq, Reg::R1, ETH_P_IP, ip4)
            .jmp_imm(Cond::Eq, Reg::R1, ETH_P_ARP, arp)
            .jmp_imm(Cond::Eq, Reg::R1, ETH_P_IPV6, ip6)
            .ja(self.pass);
        self.a.bind(arp);
        self.arp(l3);
        self.a.bind(ip4);
        self.ipv4(l3);
        self.a.bind(ip6);
        self.ipv6(l3);
    }

    /// Looks up the key at `r10 + key` in `map`; goes to `pass` on a miss.
    fn lookup_or_pass(&mut self, map: i32, key: i16) {
        self.a
            .ld_map_fd(Reg::R1, map)
            .mov(Reg::R2, Reg::R10)
            .alu_imm(Alu::Add, Reg::R2, key.into())
            .call(HELPER_MAP_LOOKUP_ELEM)
            .jmp_imm(Cond::Eq, Reg::R0, 0, self.pass);
    }

    /// ARP for IPv4 over Ethernet (RFC 826): steer when the target protocol address is
    /// ours, requests and replies alike.
    fn arp(&mut self, l3: i16) {
        self.need(i32::from(l3) + 28);
        self.a
            .ldx(Size::H, Reg::R1, Reg::R7, l3 + 2)
            .jmp_imm(Cond::Ne, Reg::R1, ETH_P_IP, self.pass)
            .ldx(Size::B, Reg::R1, Reg::R7, l3 + 5)
            .jmp_imm(Cond::Ne, Reg::R1, 4, self.pass)
            .ldx(Size::W, Reg::R1, Reg::R7, l3 + 24)
            .stx(Size::W, Reg::R10, KEY_V4, Reg::R1);
        self.lookup_or_pass(self.maps.addrs4, KEY_V4);
        self.a.ja(self.steer);
    }

    /// IPv4 (RFC 791).
    fn ipv4(&mut self, l3: i16) {
        self.need(i32::from(l3) + 20);
        self.a
            .ldx(Size::B, Reg::R9, Reg::R7, l3)
            .mov(Reg::R1, Reg::R9)
            .alu_imm(Alu::Rsh, Reg::R1, 4)
            .jmp_imm(Cond::Ne, Reg::R1, 4, self.pass)
            // r9 = IHL in bytes, 20..=60: the verifier tracks this range for the
            // variable-offset L4 access below.
            .alu_imm(Alu::And, Reg::R9, 0xf)
            .jmp_imm(Cond::Lt, Reg::R9, 5, self.pass)
            .alu_imm(Alu::Lsh, Reg::R9, 2)
            .ldx(Size::W, Reg::R1, Reg::R7, l3 + 16)
            .stx(Size::W, Reg::R10, KEY_V4, Reg::R1);
        self.lookup_or_pass(self.maps.addrs4, KEY_V4);
        if self.maps.syn.is_some() {
            // The policer's key: the source address, marked as IPv4 in the high half.
            self.a
                .ldx(Size::W, Reg::R1, Reg::R7, l3 + 12)
                .stx(Size::W, Reg::R10, KEY_SRC, Reg::R1)
                .st_imm(Size::W, Reg::R10, KEY_SRC + 4, -1);
        }
        if !self.l4_checks() {
            self.a.ja(self.steer);
            return;
        }
        // Flags+fragment offset, loaded little-endian: the offset bits are 0xff1f. A
        // later fragment has no transport header: it goes by address only.
        self.a
            .ldx(Size::H, Reg::R1, Reg::R7, l3 + 6)
            .jmp_imm(Cond::Set, Reg::R1, 0xff1f, self.steer)
            .ldx(Size::B, Reg::R1, Reg::R7, l3 + 9)
            .mov(Reg::R3, Reg::R7)
            .alu_imm(Alu::Add, Reg::R3, l3.into())
            .alu(Alu::Add, Reg::R3, Reg::R9)
            .ja(self.l4);
    }

    /// Whether anything looks past the IP header (flow rules, the SYN policer).
    fn l4_checks(&self) -> bool {
        self.rules || self.maps.syn.is_some()
    }

    /// Copies `words` 32-bit words of the frame from offset `from` to the stack slot
    /// `to` (clobbers r1; the frame's bounds were checked by the caller).
    fn frame_to_stack(&mut self, from: i16, to: i16, words: i16) {
        for i in 0..words {
            self.a.ldx(Size::W, Reg::R1, Reg::R7, from + 4 * i).stx(
                Size::W,
                Reg::R10,
                to + 4 * i,
                Reg::R1,
            );
        }
    }

    /// IPv6 (RFC 8200).
    fn ipv6(&mut self, l3: i16) {
        self.need(i32::from(l3) + 40);
        self.a
            .ldx(Size::B, Reg::R1, Reg::R7, l3)
            .alu_imm(Alu::Rsh, Reg::R1, 4)
            .jmp_imm(Cond::Ne, Reg::R1, 6, self.pass);
        self.frame_to_stack(l3 + 24, KEY_V6, 4);
        self.lookup_or_pass(self.maps.addrs6, KEY_V6);
        if self.maps.syn.is_some() {
            // The policer's key: the source's /64, what one host usually holds.
            self.frame_to_stack(l3 + 8, KEY_SRC, 2);
        }
        if !self.l4_checks() {
            self.a.ja(self.steer);
            return;
        }
        self.a.ldx(Size::B, Reg::R1, Reg::R7, l3 + 6);
        for nh in IPV6_BY_ADDRESS {
            self.a.jmp_imm(Cond::Eq, Reg::R1, nh, self.steer);
        }
        self.a
            .mov(Reg::R3, Reg::R7)
            .alu_imm(Alu::Add, Reg::R3, i32::from(l3) + 40)
            .ja(self.l4);
    }

    /// The flow-rule check (r7 = protocol, r9 = L4 header): a match goes on to `matched`,
    /// a miss to `pass`.
    fn rule_check(&mut self, matched: Label) {
        let no_port = self.a.label();
        let has_port = self.a.label();
        self.a
            .st_imm(Size::W, Reg::R10, KEY_RULE, 0)
            .stx(Size::B, Reg::R10, KEY_RULE, Reg::R7);
        for p in PORT_PROTOCOLS {
            self.a.jmp_imm(Cond::Eq, Reg::R7, p, has_port);
        }
        self.a.ja(no_port);
        self.a.bind(has_port);
        self.a
            .mov(Reg::R2, Reg::R9)
            .alu_imm(Alu::Add, Reg::R2, 4)
            .jmp(Cond::Gt, Reg::R2, Reg::R8, self.pass)
            .ldx(Size::H, Reg::R2, Reg::R9, 2)
            .stx(Size::H, Reg::R10, KEY_RULE + 2, Reg::R2)
            .ld_map_fd(Reg::R1, self.maps.rules)
            .mov(Reg::R2, Reg::R10)
            .alu_imm(Alu::Add, Reg::R2, KEY_RULE.into())
            .call(HELPER_MAP_LOOKUP_ELEM)
            .jmp_imm(Cond::Ne, Reg::R0, 0, matched)
            // Fall back to the (protocol, any port) rule.
            .st_imm(Size::H, Reg::R10, KEY_RULE + 2, 0);
        self.a.bind(no_port);
        self.lookup_or_pass(self.maps.rules, KEY_RULE);
        // Falls through to `matched`.
    }

    /// The SYN policer (r7 = protocol, r9 = L4 header, the source key at `KEY_SRC`):
    /// anything but a SYN without ACK goes on to `steer`; a SYN passes the global bucket
    /// or, failing that, its source's, or is dropped and counted.
    fn syn_policer(&mut self, syn: SynMapFds) {
        let a = &mut self.a;
        let (per_source, new_source, drop) = (a.label(), a.label(), a.label());
        let steer = self.steer;
        a.jmp_imm(Cond::Ne, Reg::R7, 6, steer)
            // A header too short for its flags is the stack's to judge.
            .mov(Reg::R2, Reg::R9)
            .alu_imm(Alu::Add, Reg::R2, 14)
            .jmp(Cond::Gt, Reg::R2, Reg::R8, steer)
            .ldx(Size::B, Reg::R1, Reg::R9, 13)
            .alu_imm(Alu::And, Reg::R1, TCP_SYN | TCP_ACK)
            .jmp_imm(Cond::Ne, Reg::R1, TCP_SYN, steer)
            // r7 = now (ns); r9 = the policer's state (a missing map entry fails open).
            .call(HELPER_KTIME_GET_NS)
            .mov(Reg::R7, Reg::R0)
            .st_imm(Size::W, Reg::R10, KEY_ZERO, 0)
            .ld_map_fd(Reg::R1, syn.state)
            .mov(Reg::R2, Reg::R10)
            .alu_imm(Alu::Add, Reg::R2, KEY_ZERO.into())
            .call(HELPER_MAP_LOOKUP_ELEM)
            .jmp_imm(Cond::Eq, Reg::R0, 0, steer)
            .mov(Reg::R9, Reg::R0);
        gcra(
            a,
            Reg::R9,
            SYN_TAT,
            (SYN_INTERVAL, SYN_TOLERANCE),
            per_source,
            steer,
        );
        // Over the global rate: the source's own bucket.
        a.bind(per_source);
        a.ld_map_fd(Reg::R1, syn.sources)
            .mov(Reg::R2, Reg::R10)
            .alu_imm(Alu::Add, Reg::R2, KEY_SRC.into())
            .call(HELPER_MAP_LOOKUP_ELEM)
            .jmp_imm(Cond::Eq, Reg::R0, 0, new_source);
        gcra(
            a,
            Reg::R0,
            0,
            (SYN_SRC_INTERVAL, SYN_SRC_TOLERANCE),
            drop,
            steer,
        );
        // A source not seen (or evicted): its bucket starts with this SYN. A failed
        // insert only forgets the source.
        a.bind(new_source);
        a.ldx(Size::Dw, Reg::R1, Reg::R9, SYN_SRC_INTERVAL)
            .alu(Alu::Add, Reg::R1, Reg::R7)
            .stx(Size::Dw, Reg::R10, VAL_TAT, Reg::R1)
            .ld_map_fd(Reg::R1, syn.sources)
            .mov(Reg::R2, Reg::R10)
            .alu_imm(Alu::Add, Reg::R2, KEY_SRC.into())
            .mov(Reg::R3, Reg::R10)
            .alu_imm(Alu::Add, Reg::R3, VAL_TAT.into())
            .mov_imm(Reg::R4, 0)
            .call(HELPER_MAP_UPDATE_ELEM)
            .ja(steer);
        a.bind(drop);
        a.mov_imm(Reg::R1, 1)
            .atomic_add(Size::Dw, Reg::R9, SYN_DROPPED, Reg::R1)
            .mov_imm(Reg::R0, XDP_DROP)
            .exit();
    }

    /// The transport-level checks (r1 = protocol, r3 = L4 header), then the two exits.
    fn tails(&mut self, steer: Steer) {
        if self.l4_checks() {
            self.a.bind(self.l4);
            // Kept in callee-saved registers across the helper calls below (the frame's
            // start is not needed past this point): r7 = protocol, r9 = L4 header.
            self.a.mov(Reg::R7, Reg::R1).mov(Reg::R9, Reg::R3);
            let police = self.a.label();
            if self.rules {
                self.rule_check(police);
            }
            self.a.bind(police);
            if let Some(syn) = self.maps.syn {
                self.syn_policer(syn);
            }
            // Falls through to steer.
        } else {
            // No transport check is emitted; bind the label to keep the generator uniform.
            self.a.bind(self.l4);
        }
        self.a.bind(self.steer);
        match steer {
            Steer::Redirect => {
                self.a
                    .ld_map_fd(Reg::R1, self.maps.xsks)
                    .ldx(Size::W, Reg::R2, Reg::R6, MD_RX_QUEUE_INDEX)
                    .mov_imm(Reg::R3, XDP_PASS)
                    .call(HELPER_REDIRECT_MAP)
                    .exit();
            }
            Steer::Verdict(v) => {
                self.a.mov_imm(Reg::R0, v).exit();
            }
        }
        self.a.bind(self.pass);
        self.a.mov_imm(Reg::R0, XDP_PASS).exit();
    }
}

/// One GCRA check (r7 = now, r9 = the policer's state): the bucket's theoretical
/// arrival time is the `u64` at `bucket + tat`; its emission interval and tolerance are
/// at the state offsets `params`. `tat = max(tat, now)`; when `tat - now` exceeds the
/// tolerance the SYN goes to `over`, else `tat += interval` is stored and it goes to
/// `conforming`. Clobbers r1-r3.
fn gcra(a: &mut Asm, bucket: Reg, tat: i16, params: (i16, i16), over: Label, conforming: Label) {
    let (interval, tolerance) = params;
    let later = a.label();
    a.ldx(Size::Dw, Reg::R1, bucket, tat)
        .jmp(Cond::Ge, Reg::R1, Reg::R7, later)
        .mov(Reg::R1, Reg::R7);
    a.bind(later);
    a.mov(Reg::R2, Reg::R1)
        .alu(Alu::Sub, Reg::R2, Reg::R7)
        .ldx(Size::Dw, Reg::R3, Reg::R9, tolerance)
        .jmp(Cond::Gt, Reg::R2, Reg::R3, over)
        .ldx(Size::Dw, Reg::R3, Reg::R9, interval)
        .alu(Alu::Add, Reg::R1, Reg::R3)
        .stx(Size::Dw, bucket, tat, Reg::R1)
        .ja(conforming);
}

#[cfg(test)]
mod tests;
