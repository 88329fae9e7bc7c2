//! Outbound segments in script space: mapping the stack's segment into the script's
//! numbering, printing it in packetdrill syntax, and comparing it with the script's line
//! field by field (the first difference wins, as in packetdrill's `verify_tcp`), with a
//! hint whether the difference is protocol behaviour or platform policy.

use std::fmt::Write as _;
use std::net::SocketAddr;

use ulnet_wire::{TcpFlags, TcpOption, TcpOptions};

use crate::ast::{OptSpec, TcpSpec};

/// A segment the stack sent, as captured (live numbering).
#[derive(Debug, Clone)]
pub(crate) struct Seg {
    /// Virtual time it left, microseconds.
    pub at: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub urgent: u16,
    pub options: TcpOptions,
    pub len: u32,
}

/// A segment in script numbering, ready to print or compare.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScriptSeg {
    pub flags: TcpFlags,
    pub seq: u32,
    pub len: u32,
    pub ack: u32,
    pub win: u16,
    pub urg: u16,
    pub options: Vec<OptSpec>,
}

/// Script flag letters to bits.
pub(crate) fn parse_flags(s: &str) -> TcpFlags {
    let mut f = TcpFlags::empty();
    for c in s.chars() {
        f |= match c {
            'F' => TcpFlags::FIN,
            'S' => TcpFlags::SYN,
            'R' => TcpFlags::RST,
            'P' => TcpFlags::PSH,
            '.' => TcpFlags::ACK,
            'U' => TcpFlags::URG,
            'E' => TcpFlags::ECE,
            'W' => TcpFlags::CWR,
            'A' => TcpFlags::AE,
            _ => TcpFlags::empty(),
        };
    }
    f
}

/// Bits to packetdrill's flag letters (`S.`, `P.`, `F.`, `R`, `.`).
pub(crate) fn flags_str(f: TcpFlags) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (TcpFlags::FIN, 'F'),
        (TcpFlags::SYN, 'S'),
        (TcpFlags::RST, 'R'),
        (TcpFlags::PSH, 'P'),
        (TcpFlags::URG, 'U'),
        (TcpFlags::ECE, 'E'),
        (TcpFlags::CWR, 'W'),
        (TcpFlags::AE, 'A'),
        (TcpFlags::ACK, '.'),
    ] {
        if f.contains(bit) {
            s.push(c);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

/// The options of `o` in emitted order, padding included, as script options.
pub(crate) fn option_list(o: &TcpOptions) -> Vec<OptSpec> {
    let mut v = Vec::new();
    o.for_each_emitted(|opt| {
        v.push(match opt {
            TcpOption::EndOfList => OptSpec::Eol,
            TcpOption::NoOperation => OptSpec::Nop,
            TcpOption::MaxSegmentSize(m) => OptSpec::Mss(m),
            TcpOption::WindowScale(w) => OptSpec::Wscale(w),
            TcpOption::SackPermitted => OptSpec::SackOk,
            TcpOption::Sack(b) => OptSpec::Sack(b.iter().map(|&(l, r)| (l.0, r.0)).collect()),
            TcpOption::Timestamp(t) => OptSpec::Ts(t.tsval, t.tsecr),
            TcpOption::Unknown { kind, .. } => OptSpec::Other(format!("kind{kind}")),
        })
    });
    v
}

fn opt_str(o: &OptSpec) -> String {
    match o {
        OptSpec::Nop => "nop".into(),
        OptSpec::Eol => "eol".into(),
        OptSpec::Mss(m) => format!("mss {m}"),
        OptSpec::Wscale(w) => format!("wscale {w}"),
        OptSpec::SackOk => "sackOK".into(),
        OptSpec::Sack(b) => {
            let mut s = "sack".to_string();
            for (l, r) in b {
                let _ = write!(s, " {l}:{r}");
            }
            s
        }
        OptSpec::Ts(v, e) => format!("TS val {v} ecr {e}"),
        OptSpec::Other(n) => n.clone(),
    }
}

/// `<mss 1460,sackOK,...>` (empty string when there are none).
pub(crate) fn options_str(opts: &[OptSpec]) -> String {
    if opts.is_empty() {
        return String::new();
    }
    let v: Vec<String> = opts.iter().map(opt_str).collect();
    format!(" <{}>", v.join(","))
}

/// Formats seconds like packetdrill (`0.100000`).
pub(crate) fn secs(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

impl ScriptSeg {
    /// Packetdrill syntax, without time and direction.
    pub(crate) fn render(&self) -> String {
        let mut s = format!(
            "{} {}:{}({})",
            flags_str(self.flags),
            self.seq,
            self.seq.wrapping_add(self.len),
            self.len
        );
        if self.flags.contains(TcpFlags::ACK) {
            let _ = write!(s, " ack {}", self.ack);
        }
        let _ = write!(s, " win {}", self.win);
        if self.urg != 0 {
            let _ = write!(s, " urg {}", self.urg);
        }
        s.push_str(&options_str(&self.options));
        s
    }
}

/// A script line's segment in packetdrill syntax (normalised).
pub(crate) fn render_spec(t: &TcpSpec) -> String {
    let f = parse_flags(&t.flags);
    let mut s = format!(
        "{} {}:{}({})",
        flags_str(f),
        t.seq,
        t.seq.wrapping_add(u32::from(t.len)),
        t.len
    );
    if let Some(a) = t.ack {
        let _ = write!(s, " ack {a}");
    }
    if let Some(w) = t.win {
        let _ = write!(s, " win {w}");
    }
    if t.urg != 0 {
        let _ = write!(s, " urg {}", t.urg);
    }
    match &t.options {
        None => s.push_str(" <...>"),
        Some(o) => s.push_str(&options_str(o)),
    }
    s
}

/// One difference between the script and the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    pub message: String,
    pub hint: String,
}

const PROTOCOL: &str = "protocol behaviour: the stack sent a different segment; check the \
                        RFC rule this line tests before suspecting the script";

/// How TS values are checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TsCheck {
    /// `--tcp_ts_tick_usecs`: check TS val within the tolerance.
    pub tick_usecs: Option<u64>,
    pub tolerance_usecs: u64,
    /// Check TS ecr exactly (packetdrill does not).
    pub ecr: bool,
}

/// Compares the stack's segment (in script space) with the script's line.
pub(crate) fn compare(
    spec: &TcpSpec,
    actual: &ScriptSeg,
    unordered: bool,
    ts: TsCheck,
) -> Result<(), Mismatch> {
    let want = parse_flags(&spec.flags);
    if want != actual.flags {
        let syn_rst = TcpFlags::SYN | TcpFlags::RST | TcpFlags::FIN | TcpFlags::ACK;
        let hint =
            if (want & syn_rst) == (actual.flags & syn_rst) && u32::from(spec.len) == actual.len {
                "flag policy: only PSH/URG/ECN bits differ (PSH placement is a sender policy)"
            } else {
                PROTOCOL
            };
        return Err(Mismatch {
            message: format!(
                "TCP flags: expected {} vs actual {}",
                flags_str(want),
                flags_str(actual.flags)
            ),
            hint: hint.into(),
        });
    }
    if spec.seq != actual.seq {
        return Err(Mismatch {
            message: format!(
                "sequence number: expected {} vs actual {}",
                spec.seq, actual.seq
            ),
            hint: PROTOCOL.into(),
        });
    }
    if u32::from(spec.len) != actual.len {
        let hint = if actual.len > 0 && spec.len > 0 {
            "segment sizing policy (MSS, TSO/GSO super-segments, Nagle, initial window): \
             --lenient merges consecutive segments that add up to the line"
        } else {
            PROTOCOL
        };
        return Err(Mismatch {
            message: format!(
                "payload length: expected {} vs actual {}",
                spec.len, actual.len
            ),
            hint: hint.into(),
        });
    }
    if want.contains(TcpFlags::ACK) {
        let exp = spec.ack.unwrap_or(0);
        if exp != actual.ack {
            return Err(Mismatch {
                message: format!("ack number: expected {exp} vs actual {}", actual.ack),
                hint: PROTOCOL.into(),
            });
        }
    }
    if let Some(w) = spec.win {
        if w != actual.win {
            return Err(Mismatch {
                message: format!("window: expected {w} vs actual {}", actual.win),
                hint: "receive-window policy (buffer sizes, window scale, receive-side SWS \
                       avoidance): platform-specific unless the line tests a zero window"
                    .into(),
            });
        }
    }
    if spec.urg != actual.urg {
        return Err(Mismatch {
            message: format!(
                "urgent pointer: expected {} vs actual {}",
                spec.urg, actual.urg
            ),
            hint: PROTOCOL.into(),
        });
    }
    if let Some(opts) = &spec.options {
        compare_options(opts, &actual.options, unordered, ts)?;
    }
    Ok(())
}

fn rank(o: &OptSpec) -> u8 {
    match o {
        OptSpec::Mss(_) => 0,
        OptSpec::SackOk => 1,
        OptSpec::Ts(..) => 2,
        OptSpec::Wscale(_) => 3,
        OptSpec::Sack(_) => 4,
        OptSpec::Other(_) => 5,
        OptSpec::Nop | OptSpec::Eol => 6,
    }
}

fn essential(v: &[OptSpec]) -> Vec<OptSpec> {
    let mut e: Vec<OptSpec> = v
        .iter()
        .filter(|o| !matches!(o, OptSpec::Nop | OptSpec::Eol))
        .cloned()
        .collect();
    e.sort_by_key(rank);
    e
}

fn same_kind(a: &OptSpec, b: &OptSpec) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn compare_options(
    want: &[OptSpec],
    got: &[OptSpec],
    unordered: bool,
    ts: TsCheck,
) -> Result<(), Mismatch> {
    let (w, g) = if unordered {
        (essential(want), essential(got))
    } else {
        (want.to_vec(), got.to_vec())
    };
    let shown = || {
        format!(
            "TCP options: expected <{}> vs actual <{}>",
            want.iter().map(opt_str).collect::<Vec<_>>().join(","),
            got.iter().map(opt_str).collect::<Vec<_>>().join(",")
        )
    };
    let layout_only = || {
        let (a, b) = (essential(want), essential(got));
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| opt_equal(x, y, ts))
    };
    if w.len() != g.len() || w.iter().zip(&g).any(|(a, b)| !same_kind(a, b)) {
        let hint = if layout_only() {
            "option layout policy: the same options in another order or padding; \
             --lenient (or the freebsd profile) compares them unordered"
                .to_string()
        } else {
            option_hint(want, got)
        };
        return Err(Mismatch {
            message: shown(),
            hint,
        });
    }
    for (a, b) in w.iter().zip(&g) {
        if !opt_equal(a, b, ts) {
            return Err(Mismatch {
                message: shown(),
                hint: option_hint(want, got),
            });
        }
    }
    Ok(())
}

fn opt_equal(want: &OptSpec, got: &OptSpec, ts: TsCheck) -> bool {
    match (want, got) {
        (OptSpec::Ts(wv, we), OptSpec::Ts(gv, ge)) => {
            let val_ok = ts.tick_usecs.is_none_or(|tick| {
                u64::from(wv.wrapping_sub(*gv).min(gv.wrapping_sub(*wv))).saturating_mul(tick)
                    <= ts.tolerance_usecs
            });
            val_ok && (!ts.ecr || we == ge)
        }
        _ => want == got,
    }
}

fn option_hint(want: &[OptSpec], got: &[OptSpec]) -> String {
    let find = |v: &[OptSpec], f: fn(&OptSpec) -> bool| v.iter().find(|o| f(o)).cloned();
    let mss = |o: &OptSpec| matches!(o, OptSpec::Mss(_));
    let ws = |o: &OptSpec| matches!(o, OptSpec::Wscale(_));
    let ts = |o: &OptSpec| matches!(o, OptSpec::Ts(..));
    let sack = |o: &OptSpec| matches!(o, OptSpec::Sack(_));
    if let (Some(a), Some(b)) = (find(want, mss), find(got, mss)) {
        if a != b {
            return "MSS policy (interface MTU / TCP_MAXSEG): platform-specific".into();
        }
    }
    if let (Some(a), Some(b)) = (find(want, ws), find(got, ws)) {
        if a != b {
            return "window-scale policy (receive buffer size): platform-specific; \
                    pick the profile the script was written for"
                .into();
        }
    }
    if let (Some(OptSpec::Ts(_, a)), Some(OptSpec::Ts(_, b))) = (find(want, ts), find(got, ts)) {
        if a != b {
            return "TS ecr differs: RFC 7323 §4.3 says which TSval to echo (protocol \
                    behaviour); packetdrill itself does not check ecr"
                .into();
        }
        return "TS val differs beyond --tcp_ts_tick_usecs × tolerance: timestamp clock policy"
            .into();
    }
    if find(want, sack).is_some() || find(got, sack).is_some() {
        return "SACK blocks differ: RFC 2018 §4 / RFC 2883 block generation (protocol \
                behaviour)"
            .into();
    }
    "option negotiation or selection differs: RFC 7323 §2.2/§3.2 and RFC 2018 §2 say which \
     options a segment may carry (protocol behaviour unless the platform disables them)"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        flags: &str,
        seq: u32,
        len: u16,
        ack: Option<u32>,
        opts: Option<Vec<OptSpec>>,
    ) -> TcpSpec {
        TcpSpec {
            flags: flags.into(),
            seq,
            len,
            ack,
            win: None,
            urg: 0,
            options: opts,
        }
    }

    const TS: TsCheck = TsCheck {
        tick_usecs: None,
        tolerance_usecs: 4000,
        ecr: false,
    };

    fn actual(flags: &str, opts: Vec<OptSpec>) -> ScriptSeg {
        ScriptSeg {
            flags: parse_flags(flags),
            seq: 0,
            len: 0,
            ack: 1,
            win: 65535,
            urg: 0,
            options: opts,
        }
    }

    #[test]
    fn flags_round_trip() {
        for f in ["S.", "S", ".", "P.", "F.", "R", "R."] {
            assert_eq!(flags_str(parse_flags(f)), f);
        }
    }

    #[test]
    fn options_exact_unordered_and_any() {
        let linux = vec![
            OptSpec::Mss(1460),
            OptSpec::SackOk,
            OptSpec::Ts(5, 0),
            OptSpec::Nop,
            OptSpec::Wscale(8),
        ];
        let bsd = vec![
            OptSpec::Mss(1460),
            OptSpec::Nop,
            OptSpec::Wscale(8),
            OptSpec::SackOk,
            OptSpec::Ts(100, 0),
        ];
        let a = actual("S.", linux.clone());
        assert!(compare(
            &spec("S.", 0, 0, Some(1), Some(linux.clone())),
            &a,
            false,
            TS
        )
        .is_ok());
        let e = compare(&spec("S.", 0, 0, Some(1), Some(bsd.clone())), &a, false, TS).unwrap_err();
        assert!(e.hint.contains("layout"), "{e:?}");
        assert!(compare(&spec("S.", 0, 0, Some(1), Some(bsd)), &a, true, TS).is_ok());
        assert!(compare(&spec("S.", 0, 0, Some(1), None), &a, false, TS).is_ok());
        let mut other = linux.clone();
        other[4] = OptSpec::Wscale(7);
        let e = compare(&spec("S.", 0, 0, Some(1), Some(other)), &a, false, TS).unwrap_err();
        assert!(e.hint.contains("window-scale"), "{e:?}");
        let mut ecr = linux;
        ecr[2] = OptSpec::Ts(5, 9);
        let strict = TsCheck { ecr: true, ..TS };
        assert!(compare(&spec("S.", 0, 0, Some(1), Some(ecr.clone())), &a, false, TS).is_ok());
        assert!(compare(&spec("S.", 0, 0, Some(1), Some(ecr)), &a, false, strict).is_err());
    }

    #[test]
    fn first_difference_is_reported() {
        let a = actual(".", vec![]);
        let e = compare(&spec("F.", 0, 0, Some(1), Some(vec![])), &a, false, TS).unwrap_err();
        assert!(e.message.starts_with("TCP flags"));
        let e = compare(&spec(".", 0, 0, Some(2), Some(vec![])), &a, false, TS).unwrap_err();
        assert_eq!(e.message, "ack number: expected 2 vs actual 1");
        let mut w = spec(".", 0, 0, Some(1), Some(vec![]));
        w.win = Some(100);
        assert!(compare(&w, &a, false, TS)
            .unwrap_err()
            .hint
            .contains("window"));
        assert_eq!(a.render(), ". 0:0(0) ack 1 win 65535");
    }
}
