//! TCP options: the raw option list ([`TcpOption`], [`TcpOptionsIter`]) and the summary
//! the stack works with ([`TcpOptions`]).
//!
//! Read first: RFC 9293 §3.2 (option format, MSS), RFC 7323 (window scale, timestamps),
//! RFC 2018 (SACK), RFC 6691 (MSS). Unknown options are skipped by their length; an
//! option whose length byte is impossible (below 2, past the header, or wrong for a
//! known kind) makes the whole header [`Error::Malformed`].

use core::fmt;

use crate::bytes::{get_u16, get_u32, set_u16, set_u32};
use crate::seq::SeqNumber;
use crate::{Error, Result};

mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// The most option bytes a TCP header can carry (data offset 15 × 4 − 20).
pub const MAX_OPTIONS_LEN: usize = 40;

/// The most SACK blocks one option can carry (2 + 8 × 4 = 34 ≤ 40, RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 4;

/// The timestamps option (RFC 7323 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpTimestamp {
    /// The sender's timestamp clock.
    pub tsval: u32,
    /// The echoed timestamp (meaningful when ACK is set).
    pub tsecr: u32,
}

/// Up to four SACK blocks `(left edge, right edge)` without allocation (RFC 2018 §3).
#[derive(Clone, Copy, Default)]
pub struct SackBlocks {
    blocks: [(SeqNumber, SeqNumber); MAX_SACK_BLOCKS],
    count: u8,
}

impl SackBlocks {
    /// No blocks.
    pub const fn new() -> SackBlocks {
        SackBlocks {
            blocks: [(SeqNumber(0), SeqNumber(0)); MAX_SACK_BLOCKS],
            count: 0,
        }
    }

    /// The first (at most four) blocks of `blocks`.
    pub fn from_slice(blocks: &[(SeqNumber, SeqNumber)]) -> SackBlocks {
        let mut s = SackBlocks::new();
        for &b in blocks.iter().take(MAX_SACK_BLOCKS) {
            s.push(b);
        }
        s
    }

    /// Appends a block; returns false (and drops it) when four are held already.
    pub fn push(&mut self, block: (SeqNumber, SeqNumber)) -> bool {
        let n = usize::from(self.count);
        if n == MAX_SACK_BLOCKS {
            return false;
        }
        self.blocks[n] = block;
        self.count += 1;
        true
    }

    /// Keeps only the first `count` blocks.
    pub fn truncate(&mut self, count: usize) {
        if count < usize::from(self.count) {
            for b in &mut self.blocks[count..] {
                *b = (SeqNumber(0), SeqNumber(0));
            }
            self.count = count as u8;
        }
    }

    /// Removes every block.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// The blocks held.
    pub fn as_slice(&self) -> &[(SeqNumber, SeqNumber)] {
        &self.blocks[..usize::from(self.count)]
    }

    /// The number of blocks held.
    pub const fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no block is held.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The blocks, in order.
    pub fn iter(&self) -> impl Iterator<Item = &(SeqNumber, SeqNumber)> + '_ {
        self.as_slice().iter()
    }
}

impl PartialEq for SackBlocks {
    fn eq(&self, other: &SackBlocks) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SackBlocks {}

impl core::hash::Hash for SackBlocks {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// One TCP option as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0).
    EndOfList,
    /// Padding (kind 1).
    NoOperation,
    /// Maximum segment size (kind 2, RFC 9293 §3.7.1).
    MaxSegmentSize(u16),
    /// Window scale shift count (kind 3, RFC 7323 §2). Raw: values above 14 are the
    /// stack's to clamp (RFC 7323 §2.3).
    WindowScale(u8),
    /// SACK permitted (kind 4, RFC 2018 §2).
    SackPermitted,
    /// SACK blocks (kind 5, RFC 2018 §3).
    Sack(SackBlocks),
    /// Timestamps (kind 8, RFC 7323 §3).
    Timestamp(TcpTimestamp),
    /// Any other option, with its data (after kind and length).
    Unknown {
        /// The option kind.
        kind: u8,
        /// The option data.
        data: &'a [u8],
    },
}

impl<'a> TcpOption<'a> {
    /// Reads the option at the start of `buf`; returns it and the bytes after it.
    ///
    /// # Errors
    /// [`Error::Truncated`] for an empty buffer; [`Error::Malformed`] when the length
    /// byte is missing, below 2, runs past the buffer, or is wrong for the kind.
    pub fn parse(buf: &'a [u8]) -> Result<(TcpOption<'a>, &'a [u8])> {
        let (&k, rest) = buf.split_first().ok_or(Error::Truncated)?;
        match k {
            kind::EOL => return Ok((TcpOption::EndOfList, rest)),
            kind::NOP => return Ok((TcpOption::NoOperation, rest)),
            _ => {}
        }
        let len = usize::from(*rest.first().ok_or(Error::Malformed)?);
        if len < 2 || len > buf.len() {
            return Err(Error::Malformed);
        }
        let data = &buf[2..len];
        let rest = &buf[len..];
        let opt = match (k, len) {
            (kind::MSS, 4) => TcpOption::MaxSegmentSize(get_u16(data, 0)),
            (kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(data[0]),
            (kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (kind::TIMESTAMP, 10) => TcpOption::Timestamp(TcpTimestamp {
                tsval: get_u32(data, 0),
                tsecr: get_u32(data, 4),
            }),
            (kind::SACK, 10 | 18 | 26 | 34) => {
                let mut blocks = SackBlocks::new();
                for b in data.chunks_exact(8) {
                    blocks.push((SeqNumber(get_u32(b, 0)), SeqNumber(get_u32(b, 4))));
                }
                TcpOption::Sack(blocks)
            }
            (
                kind::MSS
                | kind::WINDOW_SCALE
                | kind::SACK_PERMITTED
                | kind::TIMESTAMP
                | kind::SACK,
                _,
            ) => return Err(Error::Malformed),
            (kind, _) => TcpOption::Unknown { kind, data },
        };
        Ok((opt, rest))
    }

    /// The bytes this option takes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + 8 * b.len(),
            TcpOption::Timestamp(_) => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Writes the option at the start of `buf`; returns the bytes after it.
    ///
    /// # Panics
    /// When `buf` is shorter than [`buffer_len`](Self::buffer_len), or an unknown
    /// option's data is longer than 253 bytes.
    pub fn emit<'b>(&self, buf: &'b mut [u8]) -> &'b mut [u8] {
        let len = self.buffer_len();
        let (out, rest) = buf.split_at_mut(len);
        match *self {
            TcpOption::EndOfList => out[0] = kind::EOL,
            TcpOption::NoOperation => out[0] = kind::NOP,
            TcpOption::MaxSegmentSize(mss) => {
                out[0] = kind::MSS;
                set_u16(out, 2, mss);
            }
            TcpOption::WindowScale(shift) => {
                out[0] = kind::WINDOW_SCALE;
                out[2] = shift;
            }
            TcpOption::SackPermitted => out[0] = kind::SACK_PERMITTED,
            TcpOption::Sack(ref blocks) => {
                out[0] = kind::SACK;
                for (i, (l, r)) in blocks.iter().enumerate() {
                    set_u32(out, 2 + 8 * i, l.0);
                    set_u32(out, 6 + 8 * i, r.0);
                }
            }
            TcpOption::Timestamp(ts) => {
                out[0] = kind::TIMESTAMP;
                set_u32(out, 2, ts.tsval);
                set_u32(out, 6, ts.tsecr);
            }
            TcpOption::Unknown { kind, data } => {
                out[0] = kind;
                out[2..].copy_from_slice(data);
            }
        }
        if len > 1 {
            out[1] = u8::try_from(len).expect("TCP option over 255 bytes");
        }
        rest
    }
}

impl fmt::Display for TcpOption<'_> {
    /// tcpdump's spelling: `mss 1460`, `sackOK`, `TS val 1 ecr 0`, `nop`, `wscale 7`,
    /// `sack 2 {1:2}{5:9}`, `eol`, `unknown-N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TcpOption::EndOfList => f.write_str("eol"),
            TcpOption::NoOperation => f.write_str("nop"),
            TcpOption::MaxSegmentSize(m) => write!(f, "mss {m}"),
            TcpOption::WindowScale(s) => write!(f, "wscale {s}"),
            TcpOption::SackPermitted => f.write_str("sackOK"),
            TcpOption::Sack(b) => {
                write!(f, "sack {}", b.len())?;
                for (l, r) in b.iter() {
                    write!(f, " {{{l}:{r}}}")?;
                }
                Ok(())
            }
            TcpOption::Timestamp(ts) => write!(f, "TS val {} ecr {}", ts.tsval, ts.tsecr),
            TcpOption::Unknown { kind, .. } => write!(f, "unknown-{kind}"),
        }
    }
}

/// Iterates the options of a header; yields an error once and then stops. Stops after
/// [`TcpOption::EndOfList`] (what follows is padding).
#[derive(Debug, Clone)]
pub struct TcpOptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptionsIter<'a> {
    /// Iterates the option bytes `buf` (the header between byte 20 and the data offset).
    pub const fn new(buf: &'a [u8]) -> TcpOptionsIter<'a> {
        TcpOptionsIter { rest: buf }
    }
}

impl<'a> Iterator for TcpOptionsIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match TcpOption::parse(self.rest) {
            Ok((opt, rest)) => {
                self.rest = if opt == TcpOption::EndOfList {
                    &[]
                } else {
                    rest
                };
                Some(Ok(opt))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// The options of one segment, as the stack uses them. Duplicates: the last one wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpOptions {
    /// Maximum segment size (SYN only, RFC 9293 §3.7.1).
    pub mss: Option<u16>,
    /// Window scale shift, raw (SYN only, RFC 7323 §2.2).
    pub window_scale: Option<u8>,
    /// SACK permitted (SYN only, RFC 2018 §2).
    pub sack_permitted: bool,
    /// SACK blocks (RFC 2018 §3). On emit, only as many as fit in 40 option bytes.
    pub sack_blocks: SackBlocks,
    /// Timestamps (RFC 7323 §3).
    pub timestamp: Option<TcpTimestamp>,
}

impl TcpOptions {
    /// No options.
    pub const fn none() -> TcpOptions {
        TcpOptions {
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: SackBlocks::new(),
            timestamp: None,
        }
    }

    /// Reads the option bytes of a header, skipping unknown options.
    ///
    /// # Errors
    /// [`Error::Malformed`] for an impossible option length (see the module docs).
    pub fn parse(buf: &[u8]) -> Result<TcpOptions> {
        // Nearly every segment of an established connection carries exactly NOP, NOP,
        // timestamps: the layout RFC 7323 Appendix A recommends, and the one Linux (and
        // ulnet) sends. Read it straight off, as Linux's tcp_parse_aligned_timestamp
        // does; anything else goes through the general parser.
        if let [kind::NOP, kind::NOP, kind::TIMESTAMP, 10, ts @ ..] = buf {
            if ts.len() == 8 {
                let mut o = TcpOptions::none();
                o.timestamp = Some(TcpTimestamp {
                    tsval: get_u32(ts, 0),
                    tsecr: get_u32(ts, 4),
                });
                return Ok(o);
            }
        }
        Self::parse_listed(buf)
    }

    /// The general parser: every option in turn (see [`parse`](Self::parse)).
    fn parse_listed(buf: &[u8]) -> Result<TcpOptions> {
        let mut o = TcpOptions::none();
        for opt in TcpOptionsIter::new(buf) {
            match opt? {
                TcpOption::MaxSegmentSize(m) => o.mss = Some(m),
                TcpOption::WindowScale(s) => o.window_scale = Some(s),
                TcpOption::SackPermitted => o.sack_permitted = true,
                TcpOption::Sack(b) => o.sack_blocks = b,
                TcpOption::Timestamp(ts) => o.timestamp = Some(ts),
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(o)
    }

    /// Calls `f` with the options in the order they are emitted, NOP padding included,
    /// the layout Linux uses (so captures look familiar): MSS; SACK-permitted with
    /// timestamps (or NOP-padded); NOP + window scale; NOP NOP + SACK blocks, as many as
    /// fit in 40 bytes (RFC 2018 §3). Every group is a multiple of four bytes.
    pub fn for_each_emitted(&self, mut f: impl FnMut(TcpOption<'static>)) {
        let mut used = 0;
        if let Some(mss) = self.mss {
            f(TcpOption::MaxSegmentSize(mss));
            used += 4;
        }
        match (self.sack_permitted, self.timestamp) {
            (true, Some(ts)) => {
                f(TcpOption::SackPermitted);
                f(TcpOption::Timestamp(ts));
                used += 12;
            }
            (false, Some(ts)) => {
                f(TcpOption::NoOperation);
                f(TcpOption::NoOperation);
                f(TcpOption::Timestamp(ts));
                used += 12;
            }
            (true, None) => {
                f(TcpOption::NoOperation);
                f(TcpOption::NoOperation);
                f(TcpOption::SackPermitted);
                used += 4;
            }
            (false, None) => {}
        }
        if let Some(ws) = self.window_scale {
            f(TcpOption::NoOperation);
            f(TcpOption::WindowScale(ws));
            used += 4;
        }
        let room = (MAX_OPTIONS_LEN - used).saturating_sub(4) / 8;
        let n = self.sack_blocks.len().min(room);
        if n > 0 {
            let mut blocks = self.sack_blocks;
            blocks.truncate(n);
            f(TcpOption::NoOperation);
            f(TcpOption::NoOperation);
            f(TcpOption::Sack(blocks));
        }
    }

    /// The option bytes [`emit`](Self::emit) writes: a multiple of 4, at most 40.
    pub fn buffer_len(&self) -> usize {
        let mut len = 0;
        self.for_each_emitted(|o| len += o.buffer_len());
        len
    }

    /// Writes the options (see [`for_each_emitted`](Self::for_each_emitted)) at the
    /// start of `buf`; returns the number of bytes written.
    ///
    /// # Panics
    /// When `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let total = buf.len();
        let mut rest = buf;
        self.for_each_emitted(|o| {
            let r = core::mem::take(&mut rest);
            rest = o.emit(r);
        });
        total - rest.len()
    }
}

impl fmt::Display for TcpOptions {
    /// The emitted option list, tcpdump style, comma-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut result = Ok(());
        self.for_each_emitted(|o| {
            if result.is_ok() {
                result = if first {
                    write!(f, "{o}")
                } else {
                    write!(f, ",{o}")
                };
                first = false;
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The aligned-timestamp path reads what the general parser reads, for the layout
        /// it takes and for anything near it (longer, shorter, one byte off).
        #[test]
        fn aligned_timestamps_read_as_the_general_parser_does(
            tail in proptest::collection::vec(any::<u8>(), 0..30),
            flip in proptest::option::of((0usize..4, any::<u8>())),
        ) {
            let mut buf = vec![kind::NOP, kind::NOP, kind::TIMESTAMP, 10];
            if let Some((i, b)) = flip {
                buf[i] = b;
            }
            buf.extend_from_slice(&tail);
            prop_assert_eq!(TcpOptions::parse(&buf), TcpOptions::parse_listed(&buf));
        }
    }

    // The option layout of a Linux SYN (as in tests/captures.rs): mss 1460, sackOK,
    // TS val 1 ecr 0, nop, wscale 7.
    const LINUX_SYN: [u8; 20] = [
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    fn syn_options() -> TcpOptions {
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack_blocks: SackBlocks::new(),
            timestamp: Some(TcpTimestamp { tsval: 1, tsecr: 0 }),
        }
    }

    #[test]
    fn deconstruct_linux_syn() {
        assert_eq!(TcpOptions::parse(&LINUX_SYN).unwrap(), syn_options());
    }

    #[test]
    fn construct_linux_syn() {
        let mut buf = [0xffu8; 40];
        let o = syn_options();
        assert_eq!(o.buffer_len(), 20);
        assert_eq!(o.emit(&mut buf), 20);
        assert_eq!(buf[..20], LINUX_SYN);
        assert_eq!(o.to_string(), "mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7");
    }

    #[test]
    fn sack_blocks_clamped_to_fit() {
        let mut o = TcpOptions::none();
        o.timestamp = Some(TcpTimestamp { tsval: 5, tsecr: 6 });
        for i in 0..4 {
            o.sack_blocks
                .push((SeqNumber(i * 100), SeqNumber(i * 100 + 50)));
        }
        // 12 bytes of timestamps leave room for three blocks (4 + 24).
        assert_eq!(o.buffer_len(), 40);
        let mut buf = [0u8; 40];
        o.emit(&mut buf);
        let back = TcpOptions::parse(&buf).unwrap();
        assert_eq!(back.sack_blocks.len(), 3);
        assert_eq!(back.sack_blocks.as_slice(), &o.sack_blocks.as_slice()[..3]);
        o.timestamp = None;
        assert_eq!(o.buffer_len(), 36);
    }

    #[test]
    fn unknown_skipped_and_eol_stops() {
        // MD5 signature option (kind 19, 18 bytes), then MSS, then EOL and garbage.
        let mut buf = [0u8; 28];
        buf[0] = 19;
        buf[1] = 18;
        buf[18..22].copy_from_slice(&[2, 4, 0x02, 0x18]);
        buf[22] = 0;
        buf[23] = 0xee;
        let o = TcpOptions::parse(&buf).unwrap();
        assert_eq!(o.mss, Some(536));
        let opts: Vec<_> = TcpOptionsIter::new(&buf).collect();
        assert_eq!(opts.len(), 3);
        assert!(matches!(opts[0], Ok(TcpOption::Unknown { kind: 19, data }) if data.len() == 16));
    }

    #[test]
    fn malformed_lengths() {
        for bad in [
            &[2u8][..],                   // no length byte
            &[2, 1, 0, 0],                // length below 2
            &[2, 5, 0, 0, 0],             // wrong MSS length
            &[3, 2],                      // wrong window scale length
            &[4, 3, 0],                   // wrong SACK-permitted length
            &[8, 9, 0, 0, 0, 0, 0, 0, 0], // wrong timestamp length
            &[5, 2],                      // SACK with no block
            &[5, 6, 0, 0, 0, 0],          // SACK with half a block
            &[30, 10, 0, 0],              // length past the end
        ] {
            assert_eq!(TcpOptions::parse(bad), Err(Error::Malformed), "{bad:?}");
        }
        assert_eq!(
            TcpOptions::parse(&[1, 1, 0, 99, 99]),
            Ok(TcpOptions::none())
        );
    }
}
