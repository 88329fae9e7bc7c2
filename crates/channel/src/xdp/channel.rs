//! [`XdpChannel`]: an AF_XDP socket on one queue of one interface, fed by the steering
//! program.
//!
//! UMEM partition: the first half of the frames belongs to receive (they circulate
//! fill ring → kernel → rx ring → callback → fill ring), the second half to transmit
//! (free list → tx ring → kernel → completion ring → free list). The fill and completion
//! rings are sized to hold every frame of their half, so returning a frame never fails.
//!
//! Per batch, not per frame: one release store per ring, one fill-ring submit, and a
//! system call only when the kernel asked for a wake-up (need_wakeup) and descriptors
//! are waiting for it. In copy mode the kernel sends at most 32 descriptors per `sendto`
//! (`TX_BATCH_SIZE` in net/xdp/xsk.c) unless `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17+)
//! raises that to the ring size, which we ask for; `flush` keeps kicking until the tx
//! ring is drained either way (docs/LINUX-NOTES.md: otherwise latency balloons to seconds).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

use super::options::{XdpOptions, ZeroCopy};
use super::program::Steer;
use super::steer::{self, Attached, SteeringMaps, XdpMode};
use crate::bursts::{BurstTx, Bursts};
use crate::ring::umem::{Frame, Umem};
use crate::ring::{Consumer, Layout, Producer};
use crate::sys::bpf::{Program, XdpLink};
use crate::sys::mmap::Mmap;
use crate::sys::xsk::{self, RingOffset, XdpDesc, XdpStatistics, XskSocket};
use crate::{Capabilities, Channel, Error, Gso, Result, RxParts, Stats, Tx, TxError};

/// Descriptors one copy-mode `sendto` processes (net/xdp/xsk.c `TX_BATCH_SIZE`).
const KERNEL_TX_BATCH: u32 = 32;
/// Most buffers of one received frame handed over where they lie
/// ([`Channel::rx_batch_parts`]): a 64 KB TSO frame over veth comes in 17 (Linux's
/// `MAX_SKB_FRAGS` fragments and the head); a frame in more is gathered.
const MAX_PARTS: usize = 18;

/// Largest multi-buffer frame we reassemble or split: veth's largest MTU (65535) plus
/// Ethernet and VLAN headers. A frags-aware program on veth takes an MTU up to one page
/// plus `MAX_SKB_FRAGS` (17) pages, so the link, not this, is the limit.
const MAX_JUMBO_LEN: usize = 65535 + 18;
/// `XDP_PACKET_HEADROOM`: in copy mode the kernel writes received data this far into
/// the frame.
const XDP_PACKET_HEADROOM: u32 = 256;

fn invalid(op: &'static str, hint: &'static str) -> Error {
    Error::new(op, std::io::Error::from_raw_os_error(libc::EINVAL)).with_hint(hint)
}

fn layout(off: &RingOffset, size: u32) -> Layout {
    Layout {
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        desc: off.desc as usize,
        size,
    }
}

fn map_ring<D>(
    sock: &XskSocket,
    off: &RingOffset,
    size: u32,
    pgoff: i64,
) -> Result<(Mmap, Layout)> {
    use std::os::fd::AsFd;
    let l = layout(off, size);
    let m = Mmap::shared(sock.as_fd(), l.region_len::<D>(), pgoff)?;
    Ok((m, l))
}

/// The transmit half: free frames, the tx ring and the completion ring.
#[derive(Debug)]
pub struct XdpTx {
    sock: Arc<XskSocket>,
    umem: Arc<Umem>,
    ring: Producer<Mmap, XdpDesc>,
    completion: Consumer<Mmap, u64>,
    free: Vec<Frame>,
    scratch: Vec<u8>,
    max_frame_len: usize,
    /// Kick only when the kernel set `XDP_RING_NEED_WAKEUP` (bound with need_wakeup).
    need_wakeup: bool,
    /// Descriptors one kick sends at most (copy mode).
    kick_budget: u32,
    frames: u64,
    bytes: u64,
    dropped: u64,
    kicks: u64,
    bad_completions: u64,
    /// Jumbo frames written through `scratch` because their frames were not consecutive.
    scattered: u64,
    /// TCP bursts go out here (`XdpOptions::gso`).
    bursts: Bursts,
}

impl XdpTx {
    /// Moves completed frames back to the free list.
    fn reclaim(&mut self) {
        let n = self.completion.available(self.free.capacity() as u32);
        for _ in 0..n {
            let Some(addr) = self.completion.pop() else {
                break;
            };
            match self.umem.reclaim(addr) {
                Some((f, _)) => self.free.push(f),
                None => self.bad_completions += 1,
            }
        }
        if n > 0 {
            self.completion.release();
        }
    }

    fn kick(&mut self) -> Result<()> {
        self.kicks += 1;
        self.sock.kick_tx()
    }
}

impl BurstTx for XdpTx {
    fn bursts(&mut self) -> &mut Bursts {
        &mut self.bursts
    }

    fn drain_ring(&mut self) -> bool {
        // What was queued on the AF_XDP ring goes first, so a burst never overtakes the
        // segments (or ACKs) queued before it.
        !((self.ring.pending() > 0 || self.ring.in_flight() > 0) && self.flush().is_err())
    }

    fn count(&mut self, len: usize, sent: bool) {
        if sent {
            self.frames += 1;
            self.bytes += len as u64;
        } else {
            self.dropped += 1;
        }
    }
}

impl Tx for XdpTx {
    fn send(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        if len > self.max_frame_len {
            self.dropped += 1;
            return Err(TxError::TooLarge);
        }
        let fs = self.umem.frame_size() as usize;
        let parts = len.div_ceil(fs).max(1);
        if self.free.len() < parts {
            self.reclaim();
        }
        if self.free.len() < parts || (self.ring.free(parts as u32) as usize) < parts {
            self.dropped += 1;
            return Err(TxError::Full);
        }
        if parts == 1 {
            let Some(mut frame) = self.free.pop() else {
                return Err(TxError::Full);
            };
            fill(&mut self.umem.bytes_mut(&mut frame)[..len]);
            let addr = self.umem.lend(frame);
            self.ring.push(XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            });
        } else {
            // A jumbo frame goes out as one descriptor per UMEM frame, XDP_PKT_CONTD on
            // all but the last (multi-buffer tx). When the frames at the top of the free
            // list are consecutive (the usual case: completions come back in the order
            // the frames were sent, and the list hands out its top), the frame is
            // written across them in place; otherwise through the scratch buffer and
            // copied, one extra copy of the frame.
            let top = self.free.len() - parts;
            let run = &mut self.free[top..];
            if let Some(buf) = self.umem.run_mut(run) {
                fill(&mut buf[..len]);
            } else {
                self.scattered += 1;
                let buf = &mut self.scratch[..len];
                fill(buf);
                for (chunk, frame) in buf.chunks(fs).zip(run.iter_mut()) {
                    self.umem.bytes_mut(frame)[..chunk.len()].copy_from_slice(chunk);
                }
            }
            for (i, frame) in self.free.drain(top..).enumerate() {
                let addr = self.umem.lend(frame);
                let part = if i + 1 < parts { fs } else { len - i * fs };
                let options = if i + 1 < parts { xsk::XDP_PKT_CONTD } else { 0 };
                self.ring.push(XdpDesc {
                    addr,
                    len: part as u32,
                    options,
                });
            }
        }
        self.frames += 1;
        self.bytes += len as u64;
        Ok(())
    }

    fn send_gso(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        self.burst(len, |b| b.send_filled(len, gso, fill))
    }

    fn send_gso_parts(
        &mut self,
        head: &[u8],
        payload: &[u8],
        gso: Gso,
    ) -> std::result::Result<(), TxError> {
        self.burst(head.len() + payload.len(), |b| {
            b.send_parts(head, payload, gso)
        })
    }

    fn flush(&mut self) -> Result<()> {
        if self.ring.pending() > 0 {
            self.ring.submit();
        }
        if self.need_wakeup && !self.ring.needs_wakeup() {
            self.reclaim();
            return Ok(());
        }
        // Nothing for the kernel to take: a kick would be a system call for nothing.
        // (Completions need no kick: copy mode posts them when the skb is freed.)
        let mut left = self.ring.in_flight();
        if left == 0 {
            self.reclaim();
            return Ok(());
        }
        // Copy mode sends at most `kick_budget` descriptors per kick: kick until the
        // ring is drained, bounded by what is in flight (plus one for a kick that
        // makes no progress because the device queue is busy).
        let mut budget = left.div_ceil(self.kick_budget) + 1;
        while budget > 0 {
            budget -= 1;
            self.kick()?;
            let now = self.ring.in_flight();
            if now == 0 || now >= left {
                break;
            }
            left = now;
        }
        self.reclaim();
        Ok(())
    }
}

// The runtime may move a channel to its own thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<XdpChannel>();
};

/// An AF_XDP channel with its steering program attached.
///
/// Dropping it detaches the program (the BPF link closes), unbinds the socket and frees
/// the UMEM; a crash does the same, since the kernel closes the descriptors.
#[derive(Debug)]
pub struct XdpChannel {
    // Field order is drop order: the program leaves the interface first.
    _link: XdpLink,
    _prog: Program,
    maps: SteeringMaps,
    rx: Consumer<Mmap, XdpDesc>,
    fill: Producer<Mmap, u64>,
    tx: XdpTx,
    sock: Arc<XskSocket>,
    umem: Arc<Umem>,
    scratch: Vec<u8>,
    /// Frames whose descriptors were invalid or whose parts overflowed `scratch`.
    bad_rx: u64,
    rx_frames: u64,
    rx_bytes: u64,
    empty_polls: u64,
    kicks: u64,
    caps: Capabilities,
    need_wakeup: bool,
    zero_copy: bool,
    attached: Attached,
    multi_buffer: bool,
    ifindex: u32,
}

impl XdpChannel {
    /// Opens the channel on interface `ifname` in network namespace `netns` (as in
    /// `ip netns add NAME`; `None` for the calling thread's): UMEM, rings, bind
    /// (zero-copy first unless told otherwise), steering maps, program (native first
    /// unless told otherwise), attach. Only opening happens inside the namespace: the
    /// channel works from any thread afterwards.
    ///
    /// # Errors
    /// The first step that failed, with a hint: missing privileges (`EPERM`), no such
    /// interface or namespace (`ENODEV`/`ENOENT`), another XDP program attached
    /// (`EBUSY`), MTU too large without multi-buffer (`ERANGE`), zero-copy refused
    /// when forced (`EOPNOTSUPP`), invalid sizes (`EINVAL`).
    pub fn open(ifname: &str, netns: Option<&str>, opts: &XdpOptions) -> Result<Self> {
        let _ns = match netns {
            Some(name) => Some(crate::sys::netns::enter(name)?),
            None => None,
        };
        Self::open_here(ifname, opts)
    }

    fn open_here(ifname: &str, opts: &XdpOptions) -> Result<Self> {
        if opts.frame_count < 2 || opts.frame_count & 1 != 0 {
            return Err(invalid(
                "XDP options",
                "frame_count must be even and at least 2",
            ));
        }
        for s in [opts.rx_ring_size, opts.tx_ring_size] {
            if !s.is_power_of_two() {
                return Err(invalid("XDP options", "ring sizes must be powers of two"));
            }
        }
        if opts.batch_count == 0 {
            return Err(invalid("XDP options", "batch_count must be at least 1"));
        }
        let ifindex = xsk::if_index(ifname)?;
        let mtu = xsk::if_mtu(ifname)? as usize;

        let (umem, mut frames) = Umem::new(opts.frame_count, opts.frame_size)?;
        let rx_count = opts.frame_count / 2;
        let tx_frames = frames.split_off(rx_count as usize);
        let rx_frames = frames;
        let fill_size = rx_count.next_power_of_two();
        let comp_size = (opts.frame_count - rx_count).next_power_of_two();

        let sock = XskSocket::new()?;
        sock.register_umem(umem.as_ptr(), umem.len(), opts.frame_size, 0)?;
        sock.set_ring_size(xsk::XDP_UMEM_FILL_RING, fill_size)?;
        sock.set_ring_size(xsk::XDP_UMEM_COMPLETION_RING, comp_size)?;
        sock.set_ring_size(xsk::XDP_RX_RING, opts.rx_ring_size)?;
        sock.set_ring_size(xsk::XDP_TX_RING, opts.tx_ring_size)?;
        let off = sock.mmap_offsets()?;
        let (fm, fl) = map_ring::<u64>(&sock, &off.fr, fill_size, xsk::XDP_UMEM_PGOFF_FILL_RING)?;
        let (cm, cl) = map_ring::<u64>(
            &sock,
            &off.cr,
            comp_size,
            xsk::XDP_UMEM_PGOFF_COMPLETION_RING,
        )?;
        let (rm, rl) =
            map_ring::<XdpDesc>(&sock, &off.rx, opts.rx_ring_size, xsk::XDP_PGOFF_RX_RING)?;
        let (tm, tl) =
            map_ring::<XdpDesc>(&sock, &off.tx, opts.tx_ring_size, xsk::XDP_PGOFF_TX_RING)?;
        let mut fill: Producer<Mmap, u64> = Producer::new(fm, fl);
        let completion: Consumer<Mmap, u64> = Consumer::new(cm, cl);
        let rx: Consumer<Mmap, XdpDesc> = Consumer::new(rm, rl);
        let tx_ring: Producer<Mmap, XdpDesc> = Producer::new(tm, tl);

        // Stock the fill ring before binding so the first frames have somewhere to go.
        for f in rx_frames {
            let addr = umem.lend(f);
            let pushed = fill.push(addr);
            debug_assert!(pushed, "fill ring sized for every rx frame");
        }
        fill.submit();

        let (zero_copy, multi_buffer) = bind(&sock, ifindex, opts, mtu)?;
        if opts.rx_super_frames && !multi_buffer {
            return Err(invalid(
                "XDP options",
                "rx_super_frames needs multi-buffer (XDP_USE_SG), which this kernel refused",
            ));
        }
        // One kick may then drain the whole tx ring in copy mode.
        let kick_budget = if !zero_copy && sock.set_tx_budget(opts.tx_ring_size)? {
            opts.tx_ring_size
        } else {
            KERNEL_TX_BATCH
        };

        let queue_count = opts
            .queue_id
            .checked_add(1)
            .ok_or_else(|| invalid("XDP options", "queue_id too large"))?;
        let maps = SteeringMaps::create(queue_count, opts.syn_policer.as_ref())?;
        for a in &opts.addresses {
            maps.add_address(*a)?;
        }
        for r in &opts.rules {
            maps.add_rule(*r)?;
        }
        maps.set_socket(opts.queue_id, sock.as_raw_fd())?;
        let prog = steer::load(&maps, !opts.rules.is_empty(), multi_buffer, Steer::Redirect)?;
        let xdp_mode = if opts.rx_super_frames {
            XdpMode::Generic
        } else {
            opts.mode
        };
        let (link, attached) = steer::attach(&prog, ifindex, xdp_mode, multi_buffer)?;

        let single = (opts.frame_size - XDP_PACKET_HEADROOM) as usize;
        // With multi-buffer, as large as the link's MTU allows (Ethernet header and one
        // VLAN tag included), within the reassembly buffer.
        let max_frame_len = if multi_buffer {
            (mtu + 18).clamp(single, MAX_JUMBO_LEN)
        } else {
            single
        };
        // The peer's super-frames are as large as an IP packet gets, whatever the MTU.
        let rx_max_len = if opts.rx_super_frames {
            MAX_JUMBO_LEN
        } else {
            max_frame_len
        };
        let mode = format!(
            "{}, {}{}",
            match attached {
                Attached::Native => "native",
                Attached::Generic => "generic",
            },
            if zero_copy { "zero-copy" } else { "copy" },
            if multi_buffer { ", multi-buffer" } else { "" },
        ) + if opts.rx_super_frames {
            ", the peer's super-frames whole"
        } else {
            ""
        } + &if kick_budget != KERNEL_TX_BATCH {
            format!(", {kick_budget} tx per kick")
        } else {
            String::new()
        };
        let bursts = Bursts::open(opts.gso, ifindex as i32)?;
        let mode = if opts.gso {
            mode + ", gso bursts via AF_PACKET"
        } else {
            mode
        };
        let mode = format!("{mode}, UMEM in {}", umem.pages());
        let caps = Capabilities {
            name: "xdp",
            mtu,
            max_frame_len,
            rx_checksum_verified: false,
            // The peer's super-frames always carry unfinished checksums (it left them to
            // the TSO that taking them whole skips).
            rx_checksum_unfinished: opts.rx_super_frames || crate::netif::is_veth(ifname),
            tx_checksum_offload: false,
            batch_count: opts.batch_count,
            gso_max_len: bursts.max_frame_len(),
            mode,
        };
        let sock = Arc::new(sock);
        let umem = Arc::new(umem);
        let tx = XdpTx {
            sock: sock.clone(),
            umem: umem.clone(),
            ring: tx_ring,
            completion,
            free: tx_frames,
            scratch: vec![0; if multi_buffer { max_frame_len } else { 0 }],
            max_frame_len,
            need_wakeup: opts.need_wakeup,
            kick_budget,
            frames: 0,
            bytes: 0,
            dropped: 0,
            kicks: 0,
            bad_completions: 0,
            scattered: 0,
            bursts,
        };
        Ok(XdpChannel {
            _link: link,
            _prog: prog,
            maps,
            rx,
            fill,
            tx,
            sock,
            umem,
            scratch: vec![0; if multi_buffer { rx_max_len } else { 0 }],
            bad_rx: 0,
            rx_frames: 0,
            rx_bytes: 0,
            empty_polls: 0,
            kicks: 0,
            caps,
            need_wakeup: opts.need_wakeup,
            zero_copy,
            attached,
            multi_buffer,
            ifindex,
        })
    }

    /// The steering maps, to add or remove addresses and rules while running.
    pub fn steering(&self) -> &SteeringMaps {
        &self.maps
    }

    /// The kernel's drop counters for the socket.
    ///
    /// # Errors
    /// `getsockopt(XDP_STATISTICS)`.
    pub fn xdp_statistics(&self) -> Result<XdpStatistics> {
        self.sock.statistics()
    }

    /// Multi-buffer frames sent through the scratch buffer (one extra copy) because the
    /// free frames at hand were not consecutive.
    pub fn tx_scattered(&self) -> u64 {
        self.tx.scattered
    }

    /// TCP bursts sent through the GSO socket (`XdpOptions::gso`).
    pub fn tx_gso_bursts(&self) -> u64 {
        self.tx.bursts.sent
    }

    /// Whether the socket runs zero-copy.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the program is attached natively (else generic mode).
    pub fn is_native(&self) -> bool {
        self.attached == Attached::Native
    }

    /// Whether multi-buffer (jumbo) frames are on.
    pub fn is_multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// The interface index the channel is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The number of descriptors forming the frame that starts at the next rx slot, and
    /// the first of them; `None` when its last descriptor has not arrived yet.
    fn frame_parts(&mut self) -> Option<(u32, XdpDesc)> {
        let first = self.rx.peek(0)?;
        let mut d = first;
        let mut n = 1;
        while d.options & xsk::XDP_PKT_CONTD != 0 && n < self.rx.size() {
            d = self.rx.peek(n)?;
            n += 1;
        }
        Some((n, first))
    }
}

/// Binds `sock`, trying zero-copy and multi-buffer as the options allow. Returns
/// (zero-copy, multi-buffer).
fn bind(sock: &XskSocket, ifindex: u32, opts: &XdpOptions, mtu: usize) -> Result<(bool, bool)> {
    let base = if opts.need_wakeup {
        xsk::XDP_USE_NEED_WAKEUP
    } else {
        0
    };
    let zc_modes: &[u16] = match opts.zero_copy {
        ZeroCopy::Auto => &[xsk::XDP_ZEROCOPY, xsk::XDP_COPY],
        ZeroCopy::On => &[xsk::XDP_ZEROCOPY],
        ZeroCopy::Off => &[xsk::XDP_COPY],
    };
    // Multi-buffer is needed only above one frame; where the kernel refuses it we can
    // still run single-buffer if the MTU fits.
    let fits_single = mtu + 18 <= (opts.frame_size - XDP_PACKET_HEADROOM) as usize;
    let sg_modes: &[bool] = match (opts.multi_buffer, fits_single && !opts.rx_super_frames) {
        (true, true) => &[true, false],
        (true, false) => &[true],
        (false, _) => &[false],
    };
    let mut first_err = None;
    for &sg in sg_modes {
        for &zc in zc_modes {
            let flags = base | zc | if sg { xsk::XDP_USE_SG } else { 0 };
            match bind_when_released(sock, ifindex, opts.queue_id, flags) {
                Ok(()) => {
                    let zero_copy = sock.is_zero_copy().unwrap_or(zc == xsk::XDP_ZEROCOPY);
                    return Ok((zero_copy, sg));
                }
                // Only "not supported" is worth another combination.
                Err(e)
                    if matches!(
                        e.source.raw_os_error(),
                        Some(libc::EOPNOTSUPP | libc::EINVAL)
                    ) =>
                {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(bind_hint(e)),
            }
        }
    }
    Err(bind_hint(first_err.unwrap_or_else(|| {
        invalid("bind(AF_XDP)", "no bind mode to try")
    })))
}

/// How long a bind waits for the queue's previous socket to be released.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Binds, waiting while the queue is busy for at most [`RELEASE_WAIT`]: the kernel
/// unbinds a closed AF_XDP socket from its queue asynchronously (the release is deferred
/// past an RCU grace period), so a channel opened right after another one closed, in
/// this process or another (`ulnet ping` then `ulnet serve` on one interface), sees
/// `EBUSY` for a few milliseconds. A queue held by a live socket is still refused, after
/// the wait.
fn bind_when_released(sock: &XskSocket, ifindex: u32, queue: u32, flags: u16) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        match sock.bind(ifindex, queue, flags) {
            Err(e)
                if e.source.raw_os_error() == Some(libc::EBUSY)
                    && start.elapsed() < RELEASE_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

fn bind_hint(e: Error) -> Error {
    match e.source.raw_os_error() {
        Some(libc::EOPNOTSUPP) => e.with_hint(
            "the driver refuses this AF_XDP mode; allow copy mode (zero_copy: Auto or Off)",
        ),
        Some(libc::EBUSY) => e.with_hint("another AF_XDP socket is bound to this queue"),
        Some(libc::EINVAL) => {
            e.with_hint("no such queue on this interface, or the mode is unsupported")
        }
        Some(libc::ENETDOWN) => e.with_hint("the interface is down; `ip link set dev IF up`"),
        Some(libc::EPERM) => e.with_hint("AF_XDP needs root or CAP_NET_ADMIN+CAP_NET_RAW+CAP_BPF"),
        _ => e,
    }
}

impl XdpChannel {
    /// The receive loop of [`Channel::rx_batch`] (`gather`: a frame in several buffers
    /// is copied into `scratch` and handed whole) and [`Channel::rx_batch_parts`] (its
    /// buffers are handed as they lie, up to [`MAX_PARTS`]; more are gathered).
    fn rx_frames(&mut self, max_count: usize, gather: bool, f: &mut RxParts<'_>) -> Result<usize> {
        let max = max_count.min(self.caps.batch_count);
        let mut count = 0;
        // One reference-count bump per batch lets frames borrow the UMEM while the
        // callback borrows the transmit half.
        let umem = Arc::clone(&self.umem);
        while count < max {
            let Some((parts, d)) = self.frame_parts() else {
                break;
            };
            // The next frame's first part starts on its way into this core's cache while
            // this one is processed (its payload is cold: the peer's core wrote it).
            if let Some(next) = self.rx.peek(parts) {
                umem.prefetch(next.addr, next.len);
            }
            if parts == 1 {
                self.rx.advance(1);
                match umem.reclaim(d.addr) {
                    Some((frame, off)) => {
                        let bytes = umem.bytes(&frame);
                        let end = off as usize + d.len as usize;
                        if let Some(data) = bytes.get(off as usize..end) {
                            self.rx_frames += 1;
                            self.rx_bytes += u64::from(d.len);
                            f(data, &[], &mut self.tx);
                        } else {
                            self.bad_rx += 1;
                        }
                        let a = umem.lend(frame);
                        let _ = self.fill.push(a);
                    }
                    None => self.bad_rx += 1,
                }
            } else if !gather && parts as usize <= MAX_PARTS {
                // Multi-buffer, handed over where it lies: every part's frame is held
                // until the callback returns, then all go back to the fill ring.
                let mut held: [Option<(Frame, u32, u32)>; MAX_PARTS] = [const { None }; MAX_PARTS];
                let mut ok = true;
                for (i, slot) in held.iter_mut().enumerate().take(parts as usize) {
                    let Some(d) = self.rx.peek(i as u32) else {
                        ok = false;
                        break;
                    };
                    match umem.reclaim(d.addr) {
                        Some((frame, off)) => *slot = Some((frame, off, d.len)),
                        None => ok = false,
                    }
                }
                self.rx.advance(parts);
                let mut pieces: [&[u8]; MAX_PARTS] = [&[]; MAX_PARTS];
                let mut len = 0usize;
                for (piece, slot) in pieces.iter_mut().zip(&held).take(parts as usize) {
                    let Some((frame, off, n)) = slot else {
                        ok = false;
                        break;
                    };
                    match umem
                        .bytes(frame)
                        .get(*off as usize..*off as usize + *n as usize)
                    {
                        Some(b) => *piece = b,
                        None => ok = false,
                    }
                    len += *n as usize;
                }
                if ok && len <= self.scratch.len() {
                    self.rx_frames += 1;
                    self.rx_bytes += len as u64;
                    f(pieces[0], &pieces[1..parts as usize], &mut self.tx);
                } else {
                    self.bad_rx += 1;
                }
                for (frame, _, _) in held.into_iter().flatten() {
                    let a = umem.lend(frame);
                    let _ = self.fill.push(a);
                }
            } else {
                // Multi-buffer: gather the parts into the scratch buffer.
                let mut len = 0usize;
                let mut ok = true;
                for i in 0..parts {
                    let Some(d) = self.rx.peek(i) else { break };
                    match umem.reclaim(d.addr) {
                        Some((frame, off)) => {
                            let src = umem
                                .bytes(&frame)
                                .get(off as usize..off as usize + d.len as usize);
                            match (src, self.scratch.get_mut(len..len + d.len as usize)) {
                                (Some(s), Some(dst)) if ok => dst.copy_from_slice(s),
                                _ => ok = false,
                            }
                            len += d.len as usize;
                            let a = umem.lend(frame);
                            let _ = self.fill.push(a);
                        }
                        None => ok = false,
                    }
                }
                self.rx.advance(parts);
                if ok {
                    self.rx_frames += 1;
                    self.rx_bytes += len as u64;
                    f(&self.scratch[..len], &[], &mut self.tx);
                } else {
                    self.bad_rx += 1;
                }
            }
            count += 1;
        }
        if count == 0 {
            self.empty_polls += 1;
        } else {
            self.rx.release();
            self.fill.submit();
        }
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kicks += 1;
            self.sock.kick_rx()?;
        }
        Ok(count)
    }
}

impl Channel for XdpChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> Result<usize> {
        self.rx_frames(max_count, true, &mut |frame, _, tx| f(frame, tx))
    }

    fn rx_batch_parts(&mut self, max_count: usize, f: &mut RxParts<'_>) -> Result<usize> {
        self.rx_frames(max_count, false, f)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        &mut self.tx
    }

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn stats(&self) -> Stats {
        // The kernel's counters need a system call; stats are not on the data path.
        let k = self.sock.statistics().unwrap_or_default();
        Stats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            rx_dropped: self.bad_rx + k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs,
            rx_policed: self.maps.syn_dropped().unwrap_or(0),
            tx_frames: self.tx.frames,
            tx_bytes: self.tx.bytes,
            tx_dropped: self.tx.dropped + k.tx_invalid_descs + self.tx.bad_completions,
            kicks: self.kicks + self.tx.kicks,
            empty_polls: self.empty_polls,
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.sock.as_fd())
    }

    fn prepare_wait(&mut self) -> Result<()> {
        // Every rx frame is back on the fill ring after each batch, so only the
        // transmit side can have work pending.
        self.tx.flush()?;
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kicks += 1;
            self.sock.kick_rx()?;
        }
        Ok(())
    }

    /// A frame on the receive ring, or a fill ring the kernel asks to be woken for
    /// (`rx_batch` kicks it): two loads from the rings' shared memory.
    fn rx_ready(&mut self) -> bool {
        self.rx.available(1) > 0 || (self.need_wakeup && self.fill.needs_wakeup())
    }
}
