//! Packet capture: a classic libpcap file writer and a [`Channel`] adapter that records
//! every frame a channel receives or transmits.
//!
//! Owns: [`PcapWriter`] (the file format) and [`Pcap`] (the adapter). In: frames
//! crossing the wrapped channel and a timestamp source; out: a capture that tcpdump,
//! Wireshark and tshark read. [`Pcap`] is the one capture path: `ulnet serve --pcap`
//! wraps its channel in it, and the simulator wraps each node's tapped endpoint in it
//! with the wire's virtual clock.
//!
//! Invariants: records go straight to the writer (give it a `BufWriter`), so memory does
//! not grow with the capture; a write error never disturbs the data path: the adapter
//! stops recording, keeps the first error for [`Pcap::capture_error`] and carries on.
//!
//! Why no crate: the classic format is a 24-byte file header and a 16-byte record
//! header per frame, fixed since libpcap 0.4 (1998) and documented in
//! draft-ietf-opsawg-pcap; writing it is about forty lines that borrow the frame
//! straight from the ring with no allocation. The candidate crate, `pcap-file`, has
//! its stable 2.x line unmaintained since 2022 and 3.x only in release candidates, and
//! would bring proc-macro dependencies for a format we only write. The tests read the
//! files back both with a small reader and with tshark, so the writer is checked
//! against an independent implementation.
//!
//! Classic pcap records carry no direction; use a capture per channel (or tshark's
//! MAC-address filters) to tell received from transmitted frames.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Capabilities, Channel, Gso, Stats, Tx, TxError};

/// `LINKTYPE_ETHERNET`: IEEE 802.3 frames without preamble or FCS
/// (draft-ietf-opsawg-pcaplinktype §2.1, value 1).
pub const LINKTYPE_ETHERNET: u32 = 1;

/// The default snapshot length: the most bytes of a frame stored. tcpdump's default,
/// larger than any jumbo frame, so nothing is cut.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// File header magic for microsecond timestamps (draft-ietf-opsawg-pcap §4).
const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// File header magic for nanosecond timestamps (draft-ietf-opsawg-pcap §4).
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;

/// The resolution of the timestamps in a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Microseconds: readable by every pcap tool ever written.
    Micros,
    /// Nanoseconds: what the simulator's virtual clock resolves; read by libpcap 1.5+
    /// and Wireshark.
    Nanos,
}

/// Writes a classic pcap capture (`LINKTYPE_ETHERNET`, little-endian) to `W`.
///
/// Every [`PcapWriter::write_frame`] writes one record straight to `W`; wrap files in a
/// [`BufWriter`] (as [`PcapWriter::create`] does) so that costs no system call per frame.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    writer: W,
    precision: Precision,
    snaplen: u32,
    frames: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the file header.
    ///
    /// # Errors
    /// Creating the file or writing the header failed.
    pub fn create(path: impl AsRef<Path>, precision: Precision) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?), precision)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `writer` with [`DEFAULT_SNAPLEN`].
    ///
    /// # Errors
    /// Writing the header failed.
    pub fn new(writer: W, precision: Precision) -> io::Result<Self> {
        PcapWriter::with_snaplen(writer, precision, DEFAULT_SNAPLEN)
    }

    /// Writes the file header to `writer`; frames longer than `snaplen` bytes are
    /// stored cut to `snaplen` (their original length is kept in the record).
    ///
    /// # Errors
    /// Writing the header failed.
    pub fn with_snaplen(mut writer: W, precision: Precision, snaplen: u32) -> io::Result<Self> {
        let magic = match precision {
            Precision::Micros => MAGIC_MICROS,
            Precision::Nanos => MAGIC_NANOS,
        };
        // draft-ietf-opsawg-pcap §4: magic, version 2.4, two reserved words (once
        // thiszone and sigfigs, always zero), snaplen, link type.
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&magic.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        header[16..20].copy_from_slice(&snaplen.to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        writer.write_all(&header)?;
        Ok(PcapWriter {
            writer,
            precision,
            snaplen,
            frames: 0,
        })
    }

    /// Appends one frame seen at `timestamp` (since the Unix epoch for real clocks, or
    /// since the start of a simulation). Seconds past 2106 saturate.
    ///
    /// # Errors
    /// Writing to the underlying writer failed; the file may then end in a partial
    /// record.
    pub fn write_frame(&mut self, timestamp: Duration, frame: &[u8]) -> io::Result<()> {
        let secs = u32::try_from(timestamp.as_secs()).unwrap_or(u32::MAX);
        let fraction = match self.precision {
            Precision::Micros => timestamp.subsec_micros(),
            Precision::Nanos => timestamp.subsec_nanos(),
        };
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl_len = orig_len.min(self.snaplen);
        // draft-ietf-opsawg-pcap §5: seconds, fraction, captured length, original length.
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&secs.to_le_bytes());
        record[4..8].copy_from_slice(&fraction.to_le_bytes());
        record[8..12].copy_from_slice(&incl_len.to_le_bytes());
        record[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.writer.write_all(&record)?;
        self.writer.write_all(&frame[..incl_len as usize])?;
        self.frames += 1;
        Ok(())
    }

    /// Flushes the underlying writer.
    ///
    /// # Errors
    /// The writer's flush failed.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// Frames written so far.
    pub fn frame_count(&self) -> u64 {
        self.frames
    }

    /// The timestamp resolution of this capture.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.writer
    }

    /// Flushes and returns the underlying writer.
    ///
    /// # Errors
    /// The writer's flush failed.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.writer.flush()?;
        Ok(self.writer)
    }
}

/// The wall clock as a pcap timestamp source: the time since the Unix epoch (zero if
/// the system clock is set before 1970).
pub fn system_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The recording half of [`Pcap`]: the writer, the clock and the first error.
#[derive(Debug)]
struct Recorder<W: Write, F> {
    writer: PcapWriter<W>,
    clock: F,
    error: Option<io::Error>,
}

impl<W: Write, F: FnMut() -> Duration> Recorder<W, F> {
    fn record(&mut self, frame: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let now = (self.clock)();
        if let Err(e) = self.writer.write_frame(now, frame) {
            self.error = Some(e);
        }
    }
}

/// Wraps a channel and records every frame it receives or transmits into a pcap
/// capture, timestamped by `clock` (e.g. [`system_clock`], or a simulated wire's
/// virtual time: `move || wire.now()`).
///
/// Received frames are recorded as they are handed to the program; transmitted ones
/// as they are written into a transmit buffer (a frame the channel refuses with a
/// [`TxError`] is not recorded).
///
/// ```
/// use ulnet_channel::pcap::{Pcap, PcapWriter, Precision};
/// use ulnet_channel::sim::{LinkConfig, Wire};
/// use ulnet_channel::Channel;
///
/// let (wire, a, _b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
/// let clock = { let wire = wire.clone(); move || wire.now() };
/// let mut a = Pcap::new(a, PcapWriter::new(Vec::new(), Precision::Nanos)?, clock);
/// a.tx().send(60, &mut |frame| frame.fill(0))?;
/// let (_, writer) = a.into_parts();
/// assert_eq!(writer.frame_count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Pcap<C, W: Write, F> {
    inner: C,
    recorder: Recorder<W, F>,
}

impl<C: Channel, W: Write, F: FnMut() -> Duration> Pcap<C, W, F> {
    /// Records `inner`'s frames into `writer`, stamping each with `clock()`.
    pub fn new(inner: C, writer: PcapWriter<W>, clock: F) -> Self {
        Pcap {
            inner,
            recorder: Recorder {
                writer,
                clock,
                error: None,
            },
        }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// The wrapped channel, mutably (frames sent through it directly are not recorded).
    pub fn inner_mut(&mut self) -> &mut C {
        &mut self.inner
    }

    /// The capture writer.
    pub fn writer(&self) -> &PcapWriter<W> {
        &self.recorder.writer
    }

    /// The first error writing the capture; recording stopped there.
    pub fn capture_error(&self) -> Option<&io::Error> {
        self.recorder.error.as_ref()
    }

    /// Flushes the capture so that a reader sees every frame recorded so far.
    ///
    /// # Errors
    /// The first write error recorded earlier (as a new error of the same kind and
    /// message), or the flush failing.
    pub fn flush_capture(&mut self) -> io::Result<()> {
        if let Some(e) = &self.recorder.error {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        self.recorder.writer.flush()
    }

    /// Unwraps into the channel and the capture writer (not flushed).
    pub fn into_parts(self) -> (C, PcapWriter<W>) {
        (self.inner, self.recorder.writer)
    }
}

/// The transmit half handed to an `rx_batch` callback: records, then forwards.
struct RecordingTx<'a, W: Write, F> {
    inner: &'a mut dyn Tx,
    recorder: &'a mut Recorder<W, F>,
}

impl<W: Write, F: FnMut() -> Duration> Tx for RecordingTx<'_, W, F> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        let recorder = &mut *self.recorder;
        self.inner.send(len, &mut |buf| {
            fill(buf);
            recorder.record(buf);
        })
    }

    fn send_gso(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TxError> {
        let recorder = &mut *self.recorder;
        self.inner.send_gso(len, gso, &mut |buf| {
            fill(buf);
            recorder.record(buf);
        })
    }

    fn flush(&mut self) -> crate::Result<()> {
        self.inner.flush()
    }
}

impl<C: Channel, W: Write, F: FnMut() -> Duration> Pcap<C, W, F> {
    /// The channel's transmit half, recording what it sends.
    fn recording_tx(&mut self) -> RecordingTx<'_, W, F> {
        RecordingTx {
            inner: self.inner.tx(),
            recorder: &mut self.recorder,
        }
    }
}

impl<C: Channel, W: Write, F: FnMut() -> Duration> Tx for Pcap<C, W, F> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        self.recording_tx().send(len, fill)
    }

    fn send_gso(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TxError> {
        self.recording_tx().send_gso(len, gso, fill)
    }

    fn flush(&mut self) -> crate::Result<()> {
        self.inner.tx().flush()
    }
}

impl<C: Channel, W: Write, F: FnMut() -> Duration> Channel for Pcap<C, W, F> {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> crate::Result<usize> {
        let recorder = &mut self.recorder;
        self.inner.rx_batch(max_count, &mut |frame, tx| {
            recorder.record(frame);
            f(
                frame,
                &mut RecordingTx {
                    inner: tx,
                    recorder: &mut *recorder,
                },
            );
        })
    }

    fn tx(&mut self) -> &mut dyn Tx {
        self
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn stats(&self) -> Stats {
        self.inner.stats()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.wait_fd()
    }

    fn prepare_wait(&mut self) -> crate::Result<()> {
        self.inner.prepare_wait()
    }

    fn rx_ready(&mut self) -> bool {
        self.inner.rx_ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{LinkConfig, Wire};
    use std::process::Command;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A record read back: (seconds, fraction, captured bytes, original length).
    type Record = (u32, u32, Vec<u8>, u32);

    /// Reads a little-endian classic pcap: (magic, snaplen, link type, records).
    fn read_pcap(bytes: &[u8]) -> (u32, u32, u32, Vec<Record>) {
        let u32_at = |off: usize| u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
        let u16_at = |off: usize| u16::from_le_bytes(bytes[off..off + 2].try_into().unwrap());
        assert_eq!((u16_at(4), u16_at(6)), (2, 4), "version 2.4");
        assert_eq!((u32_at(8), u32_at(12)), (0, 0), "reserved words");
        let mut records = Vec::new();
        let mut off = 24;
        while off < bytes.len() {
            let incl = u32_at(off + 8) as usize;
            let data = bytes[off + 16..off + 16 + incl].to_vec();
            records.push((u32_at(off), u32_at(off + 4), data, u32_at(off + 12)));
            off += 16 + incl;
        }
        assert_eq!(off, bytes.len(), "no trailing partial record");
        (u32_at(0), u32_at(16), u32_at(20), records)
    }

    #[test]
    fn writes_and_reads_back_micros() {
        let mut w = PcapWriter::new(Vec::new(), Precision::Micros).unwrap();
        w.write_frame(Duration::new(3, 123_456_789), &[1, 2, 3])
            .unwrap();
        w.write_frame(Duration::from_secs(1_700_000_000), &[9; 60])
            .unwrap();
        assert_eq!(w.frame_count(), 2);
        let (magic, snaplen, link, recs) = read_pcap(&w.into_inner().unwrap());
        assert_eq!((magic, snaplen, link), (0xa1b2_c3d4, DEFAULT_SNAPLEN, 1));
        assert_eq!(recs[0], (3, 123_456, vec![1, 2, 3], 3));
        assert_eq!(recs[1], (1_700_000_000, 0, vec![9; 60], 60));
    }

    #[test]
    fn writes_nanos_and_cuts_at_snaplen() {
        let mut w = PcapWriter::with_snaplen(Vec::new(), Precision::Nanos, 4).unwrap();
        assert_eq!(w.precision(), Precision::Nanos);
        w.write_frame(Duration::new(0, 999_999_999), &[5, 6, 7, 8, 9, 10])
            .unwrap();
        let (magic, snaplen, _, recs) = read_pcap(w.get_ref());
        assert_eq!((magic, snaplen), (0xa1b2_3c4d, 4));
        assert_eq!(recs, vec![(0, 999_999_999, vec![5, 6, 7, 8], 6)]);
    }

    fn vec_writer() -> PcapWriter<Vec<u8>> {
        PcapWriter::new(Vec::new(), Precision::Nanos).unwrap()
    }

    #[test]
    fn adapter_records_both_directions_in_virtual_time() {
        let cfg = LinkConfig::new().delay(Duration::from_millis(2));
        let (wire, mut a, b) = Wire::pair(1, cfg.clone(), cfg);
        let clock = {
            let wire = wire.clone();
            move || wire.now()
        };
        let mut b = Pcap::new(b, vec_writer(), clock);
        for i in 0..3u8 {
            a.tx().send(60, &mut |f| f.fill(i)).unwrap();
        }
        a.tx().flush().unwrap();
        wire.advance_to(Duration::from_millis(2));
        // b answers each frame from the receive callback, and sends one more on its own.
        let n = b
            .rx_batch(8, &mut |f, tx| {
                tx.send(f.len(), &mut |out| {
                    out.copy_from_slice(f);
                    out[0] ^= 0x80;
                })
                .unwrap();
            })
            .unwrap();
        assert_eq!(n, 3);
        wire.advance_to(Duration::from_millis(3));
        b.tx().send(42, &mut |f| f.fill(0xee)).unwrap();
        assert_eq!(b.tx().send(5000, &mut |_| {}), Err(TxError::TooLarge));
        b.tx().flush().unwrap();
        assert_eq!(a.rx_batch(8, &mut |_, _| {}).unwrap(), 0);
        wire.advance_to(Duration::from_millis(5));
        assert_eq!(a.rx_batch(8, &mut |_, _| {}).unwrap(), 4);

        assert!(b.capture_error().is_none());
        assert_eq!(b.stats().rx_frames, 3);
        assert_eq!(b.capabilities().name, "sim");
        assert!(b.wait_fd().is_none());
        let (_, writer) = b.into_parts();
        let (_, _, _, recs) = read_pcap(&writer.into_inner().unwrap());
        let summary: Vec<(u32, u32, u8, usize)> = recs
            .iter()
            .map(|(s, ns, d, len)| (*s, *ns, d[0], *len as usize))
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 2_000_000, 0, 60),
                (0, 2_000_000, 0x80, 60),
                (0, 2_000_000, 1, 60),
                (0, 2_000_000, 0x81, 60),
                (0, 2_000_000, 2, 60),
                (0, 2_000_000, 0x82, 60),
                (0, 3_000_000, 0xee, 42),
            ]
        );
    }

    /// A writer that accepts `room` bytes, then fails.
    struct Failing {
        room: usize,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::other("disk full"));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_stop_recording_but_not_the_channel() {
        let (wire, mut a, b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
        let writer = PcapWriter::new(Failing { room: 24 + 16 + 60 }, Precision::Micros).unwrap();
        let mut b = Pcap::new(b, writer, system_clock);
        for _ in 0..3 {
            a.tx().send(60, &mut |f| f.fill(1)).unwrap();
        }
        a.tx().flush().unwrap();
        assert_eq!(b.rx_batch(8, &mut |_, _| {}).unwrap(), 3);
        assert_eq!(b.writer().frame_count(), 1);
        assert_eq!(
            b.capture_error().map(io::Error::to_string).as_deref(),
            Some("disk full")
        );
        assert!(b.flush_capture().is_err());
        b.tx().send(60, &mut |f| f.fill(2)).unwrap();
        b.tx().flush().unwrap();
        assert_eq!(a.rx_batch(8, &mut |_, _| {}).unwrap(), 1);
        assert_eq!(wire.link_stats(1, 0).delivered, 1);
    }

    /// RFC 1071 Internet checksum over `chunks`.
    fn checksum(chunks: &[&[u8]]) -> u16 {
        let mut sum = 0u32;
        for chunk in chunks {
            for pair in chunk.chunks(2) {
                let hi = u32::from(pair[0]) << 8;
                sum += hi | pair.get(1).map_or(0, |&lo| u32::from(lo));
            }
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// An Ethernet II / IPv4 (RFC 791) / UDP (RFC 768) frame with valid checksums.
    fn udp_frame(src_port: u16, payload: &[u8]) -> Vec<u8> {
        let src = [198, 18, 0, 1];
        let dst = [198, 18, 0, 2];
        let udp_len = (8 + payload.len()) as u16;
        let mut udp = Vec::new();
        udp.extend_from_slice(&src_port.to_be_bytes());
        udp.extend_from_slice(&9u16.to_be_bytes());
        udp.extend_from_slice(&udp_len.to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&udp_len.to_be_bytes());
        let sum = checksum(&[&pseudo, &udp]);
        udp[6..8].copy_from_slice(&(if sum == 0 { 0xffff } else { sum }).to_be_bytes());

        let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0];
        ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let sum = checksum(&[&ip]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());

        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&udp);
        frame
    }

    /// Removes the file when the test ends, pass or fail.
    struct TempFile(std::path::PathBuf);

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn temp_file(tag: &str) -> TempFile {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("ulnet-pcap-{tag}-{}-{n}.pcap", std::process::id());
        TempFile(std::env::temp_dir().join(name))
    }

    fn tshark(args: &[&str]) -> String {
        let out = Command::new("tshark")
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("tshark is required for this test (apt-get install tshark): {e}")
            });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tshark {args:?} failed: {stderr}");
        String::from_utf8(out.stdout).expect("tshark prints UTF-8")
    }

    fn check_with_tshark(precision: Precision, stamps: [&str; 3]) {
        let file = temp_file(if precision == Precision::Nanos {
            "ns"
        } else {
            "us"
        });
        let mut w = PcapWriter::create(&file.0, precision).unwrap();
        for i in 0..3u16 {
            let payload = format!("ulnet frame {i}");
            let t =
                Duration::new(1_700_000_000, 0) + Duration::from_nanos(1_500_123 * u64::from(i));
            w.write_frame(t, &udp_frame(40_000 + i, payload.as_bytes()))
                .unwrap();
        }
        w.into_inner().unwrap();
        let path = file.0.to_str().unwrap();
        let fields = tshark(&[
            "-r",
            path,
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "eth.type",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
            "-e",
            "udp.checksum.status",
            "-e",
            "_ws.expert.severity",
        ]);
        let lines: Vec<&str> = fields.lines().collect();
        assert_eq!(lines.len(), 3, "{fields}");
        for (i, line) in lines.iter().enumerate() {
            let len = 14 + 20 + 8 + format!("ulnet frame {i}").len();
            let expect = format!(
                "{}|{len}|0x0800|198.18.0.1|198.18.0.2|1|{}|9|1|",
                stamps[i],
                40_000 + i
            );
            assert_eq!(*line, expect);
        }
        let bad = tshark(&["-r", path, "-Y", "_ws.malformed || _ws.expert"]);
        assert_eq!(bad, "", "tshark flagged frames");
    }

    #[test]
    fn tshark_reads_the_capture_micros() {
        check_with_tshark(
            Precision::Micros,
            [
                "1700000000.000000000",
                "1700000000.001500000",
                "1700000000.003000000",
            ],
        );
    }

    #[test]
    fn tshark_reads_the_capture_nanos() {
        check_with_tshark(
            Precision::Nanos,
            [
                "1700000000.000000000",
                "1700000000.001500123",
                "1700000000.003000246",
            ],
        );
    }
}
