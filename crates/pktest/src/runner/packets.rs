//! The packets of a script: inbound lines turned into segments the engine processes
//! (numbering mapped from the script's to the stack's), and outbound lines matched
//! against the next segment the stack sent, field by field, with the profile's
//! tolerances.

use super::*;

impl Interp {
    pub(super) fn new_remote_port(&mut self) -> u16 {
        let p = self.next_port;
        self.next_port = self.next_port.checked_add(1).unwrap_or(FIRST_REMOTE_PORT);
        p
    }

    pub(super) fn listener_port(&self) -> u16 {
        self.fds
            .values()
            .find_map(|f| match f.sock {
                Sock::Listener(..) => f.bound.map(|b| b.port()),
                _ => None,
            })
            .unwrap_or(DEFAULT_PORT)
    }

    pub(super) fn inbound_tcp(
        &mut self,
        t: &TcpSpec,
        ports: Option<(u16, u16)>,
        here: &Here<'_>,
    ) -> Res<()> {
        if self.conn.is_none() || self.listening {
            // Packetdrill's handle_listen_for_script_packet: a packet towards a listening
            // (or absent) socket starts a new connection from a fresh remote port.
            self.listening = false;
            let local = SocketAddr::new(self.local_ip, self.listener_port());
            let remote = SocketAddr::new(self.remote_ip, self.new_remote_port());
            self.conn = Some(Conn::new(local, remote));
        }
        let conn = self.conn.as_ref().expect("created above");
        let flags = parse_flags(&t.flags);
        let off = conn.offset();
        let mut options = TcpOptions::none();
        for o in t.options.as_deref().unwrap_or(&[]) {
            match o {
                OptSpec::Nop | OptSpec::Eol => {}
                OptSpec::Mss(m) => options.mss = Some(*m),
                OptSpec::Wscale(w) => options.window_scale = Some(*w),
                OptSpec::SackOk => options.sack_permitted = true,
                OptSpec::Sack(blocks) => {
                    let mut b = SackBlocks::new();
                    for &(l, r) in blocks {
                        if !b.push((
                            SeqNumber(l.wrapping_add(off)),
                            SeqNumber(r.wrapping_add(off)),
                        )) {
                            return self.unsupported(here, "more SACK blocks than fit in a header");
                        }
                    }
                    options.sack_blocks = b;
                }
                OptSpec::Ts(val, ecr) => {
                    let ecr = if flags.contains(TcpFlags::ACK) && *ecr != 0 {
                        match conn.ts_map.get(ecr) {
                            Some(live) => *live,
                            None => match conn.first_ts {
                                Some((s, l)) => ecr.wrapping_sub(s).wrapping_add(l),
                                None => {
                                    return Err(here.fail(
                                        FailureKind::Unsupported,
                                        format!(
                                            "unable to infer live TS ecr for script TS ecr {ecr}: no matching or \
                                             preceding outbound TS val"
                                        ),
                                    ))
                                }
                            },
                        }
                    } else {
                        *ecr
                    };
                    options.timestamp = Some(TcpTimestamp {
                        tsval: *val,
                        tsecr: ecr,
                    });
                }
                OptSpec::Other(n) => {
                    return self.unsupported(
                        here,
                        &format!("TCP option {n} (not modelled by the engine)"),
                    )
                }
            }
        }
        if flags.contains(TcpFlags::SYN) {
            let ws = options.window_scale.is_some();
            if let Some(c) = self.conn.as_mut() {
                c.peer_wscale = ws;
            }
        }
        let conn = self.conn.as_ref().expect("created above");
        let (sport, dport) = ports.unwrap_or((conn.remote.port(), conn.local.port()));
        let payload = vec![0u8; usize::from(t.len)];
        let seg = TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq: SeqNumber(t.seq),
            ack: SeqNumber(if flags.contains(TcpFlags::ACK) {
                t.ack.unwrap_or(0).wrapping_add(off)
            } else {
                t.ack.unwrap_or(0)
            }),
            flags,
            window: t.win.unwrap_or(0),
            urgent: t.urg,
            options,
            payload: &payload,
            payload_rest: &[],
        };
        let (src, dst) = (conn.remote.ip(), conn.local.ip());
        let now = self.instant();
        let mut replies: Vec<(IpAddr, IpAddr, TcpRepr<'static>)> = Vec::new();
        self.tcp.process(now, src, dst, &seg, &mut |s, d, r| {
            replies.push((
                s,
                d,
                TcpRepr {
                    payload: &[],
                    payload_rest: &[],
                    ..*r
                },
            ));
        });
        for (s, d, r) in replies {
            self.capture(s, d, &r);
        }
        self.settle();
        self.poll_pending()
    }

    /// An inbound ICMP error about the connection under test, handed to
    /// `Tcp::icmp_error` as the interface would: the echoed segment `[seq:end(len)]`
    /// (script numbering, our sequence space) is the quoted sequence number the engine
    /// validates (RFC 5927 §4.1). `unreachable frag_needed mtu N` without an echoed
    /// segment lowers the path MTU directly (`Tcp::set_path_mtu`), as before.
    pub(super) fn inbound_icmp(
        &mut self,
        kind: &str,
        code: Option<&str>,
        mtu: Option<u32>,
        echoed_seq: Option<u32>,
        here: &Here<'_>,
    ) -> Res<()> {
        use ulnet_stack::tcp::IcmpError;
        use ulnet_wire::Icmpv4DstUnreachable as U;
        // ICMPv6 Packet Too Big (RFC 4443 §3.2, RFC 8201) is IPv4's fragmentation-needed
        // for the engine: a smaller path MTU.
        let frag_needed = (kind == "unreachable"
            && matches!(code, Some("frag_needed") | Some("fragmentation_needed")))
            || kind == "packet_too_big";
        let Some(seq) = echoed_seq else {
            if let (true, Some(mtu)) = (frag_needed, mtu) {
                // RFC 1191: the path MTU towards the peer drops; the engine re-segments.
                self.tcp.set_path_mtu(self.remote_ip, mtu as usize);
                self.settle();
                return self.poll_pending();
            }
            return self.unsupported(
                here,
                "inbound ICMP without the echoed segment '[seq:end(len)]' (only 'unreachable \
                 frag_needed mtu N' can go without)",
            );
        };
        let err = match (kind, code.unwrap_or("")) {
            ("unreachable", "frag_needed" | "fragmentation_needed") | ("packet_too_big", _) => {
                IcmpError::FragmentationNeeded {
                    next_hop_mtu: mtu.unwrap_or(0).min(u32::from(u16::MAX)) as u16,
                    quoted_len: 65535,
                }
            }
            ("unreachable", c) => IcmpError::Unreachable(match c {
                "net_unreachable" => U::NetUnreachable,
                "host_unreachable" => U::HostUnreachable,
                "protocol_unreachable" => U::ProtoUnreachable,
                "port_unreachable" => U::PortUnreachable,
                "source_route_failed" => U::SrcRouteFailed,
                "net_unknown" => U::DstNetUnknown,
                "host_unknown" => U::DstHostUnknown,
                "source_host_isolated" => U::SrcHostIsolated,
                "net_prohibited" => U::NetProhibited,
                "host_prohibited" => U::HostProhibited,
                "net_unreachable_for_tos" => U::NetUnreachToS,
                "host_unreachable_for_tos" => U::HostUnreachToS,
                "packet_filtered" => U::CommProhibited,
                "precedence_violation" => U::HostPrecedenceViolation,
                "precedence_cutoff" => U::PrecedenceCutoff,
                _ => return self.unsupported(here, "this ICMP unreachable code"),
            }),
            ("time_exceeded", _) => IcmpError::TimeExceeded,
            _ => return self.unsupported(here, "this ICMP type"),
        };
        let Some(conn) = self.conn.as_ref() else {
            return self.unsupported(here, "inbound ICMP before any connection");
        };
        let (local, remote) = (conn.local, conn.remote);
        let seq = SeqNumber(seq.wrapping_add(conn.offset()));
        let now = self.instant();
        self.tcp.icmp_error(now, local, remote, seq, err);
        self.settle();
        self.poll_pending()
    }

    // ------------------------------------------------------------ outbound

    pub(super) fn describe(&self, s: &Seg) -> String {
        match &self.conn {
            Some(c) if s.src == c.local && s.dst == c.remote => {
                format!("{} > {}", secs(s.at), self.to_script(c, s).render())
            }
            _ => format!(
                "{} > {} (another connection: {} > {})",
                secs(s.at),
                seg_raw(s),
                s.src,
                s.dst
            ),
        }
    }

    pub(super) fn to_script(&self, c: &Conn, s: &Seg) -> ScriptSeg {
        let mut options = option_list(&s.options);
        for o in &mut options {
            if let OptSpec::Ts(val, _) = o {
                if let Some((sv, lv)) = c.first_ts {
                    *val = sv.wrapping_add(val.wrapping_sub(lv));
                }
            }
        }
        ScriptSeg {
            flags: s.flags,
            seq: s.seq.wrapping_sub(c.offset()),
            len: s.len,
            ack: s.ack,
            win: s.window,
            urg: s.urgent,
            options,
        }
    }

    /// Takes the next segment of the connection under test, advancing time up to
    /// `deadline` for one to appear. Segments of other connections are skipped (as
    /// packetdrill ignores packets not on the socket under test).
    pub(super) fn next_segment(&mut self, deadline: u64, here: &Here<'_>) -> Res<Option<Seg>> {
        loop {
            while let Some(s) = self.queue.pop_front() {
                let mine = match &self.conn {
                    Some(c) => s.src == c.local && s.dst == c.remote,
                    None => false,
                };
                if mine {
                    return Ok(Some(s));
                }
                let d = self.describe(&s);
                if self.report.warnings.len() < 50 {
                    self.report
                        .warnings
                        .push(format!("ignored a segment of another connection: {d}"));
                }
            }
            match self.next_wakeup() {
                Some(w) if w <= deadline => {
                    self.now = w.max(self.now);
                    self.settle();
                    self.poll_pending()?;
                    self.step_budget(here)?;
                }
                _ => return Ok(None),
            }
        }
    }

    pub(super) fn outbound_tcp(
        &mut self,
        ev: &Event,
        t: &TcpSpec,
        start: u64,
        end: u64,
        here: &Here<'_>,
    ) -> Res<()> {
        let expected = format!("{} > {}", secs(start), render_spec(t));
        if self.conn.is_none() {
            return Err(here.fail(
                FailureKind::NoPacket,
                "outbound packet expected but no connection exists (no connect() and no inbound packet yet)",
            ));
        }
        let deadline = end.saturating_add(self.tol);
        let Some(first) = self.next_segment(deadline, here)? else {
            // Like packetdrill, look on for the segment that did come, to say when it came.
            let limit = self.now.saturating_add(self.horizon);
            if let Some(late) = self.next_segment(limit, here)? {
                let c = self.conn.clone().expect("checked above");
                let mut f = here.fail(
                    FailureKind::Timing,
                    format!(
                        "timing error: expected outbound packet at {} s (tolerance {} s) but the next \
                         segment came at {} s",
                        secs(start),
                        secs(self.tol),
                        secs(late.at)
                    ),
                );
                f.expected = Some(expected);
                f.actual = Some(format!(
                    "{} > {}",
                    secs(late.at),
                    self.to_script(&c, &late).render()
                ));
                f.hint = Some(
                    "timer policy (RTO, minimum RTO, delayed ACK, TIME-WAIT length) when the \
                     segment is the one expected; otherwise the stack sent nothing in time"
                        .into(),
                );
                return Err(f);
            }
            let mut f = here.fail(
                FailureKind::NoPacket,
                format!(
                    "expected an outbound packet by {} s; the stack sent nothing",
                    secs(deadline)
                ),
            );
            f.expected = Some(expected);
            f.hint = Some(
                "missing behaviour: nothing was sent even waiting the whole horizon (the stack \
                 had no timer left, or a state the script expects was never reached)"
                    .into(),
            );
            return Err(f);
        };
        let want_syn = parse_flags(&t.flags).contains(TcpFlags::SYN);
        if let Some(c) = self.conn.as_mut() {
            if first.flags.contains(TcpFlags::SYN) {
                c.our_wscale = first.options.window_scale;
            }
            if c.live_isn.is_none() && want_syn && first.flags.contains(TcpFlags::SYN) {
                c.live_isn = Some(first.seq);
                c.script_isn = Some(t.seq);
            }
            // Learn the script↔live TS val mapping (packetdrill's map_outbound_live_packet).
            if let (Some(OptSpec::Ts(sv, _)), Some(ts)) = (
                t.options
                    .as_deref()
                    .and_then(|o| o.iter().find(|x| matches!(x, OptSpec::Ts(..)))),
                first.options.timestamp,
            ) {
                c.ts_map.insert(*sv, ts.tsval);
                if c.first_ts.is_none() {
                    c.first_ts = Some((*sv, ts.tsval));
                }
            }
        }
        let conn = self.conn.clone().expect("checked above");
        let mut actual = self.to_script(&conn, &first);
        let mut at = first.at;
        // Lenient: a TSO super-segment in the script matches consecutive smaller segments.
        if self.lenient && u32::from(t.len) > actual.len && actual.len > 0 {
            while actual.len < u32::from(t.len) {
                let Some(next) = self.next_segment(deadline, here)? else {
                    break;
                };
                let n = self.to_script(&conn, &next);
                if n.seq != actual.seq.wrapping_add(actual.len) || n.flags.contains(TcpFlags::SYN) {
                    self.queue.push_front(next);
                    break;
                }
                actual.len += n.len;
                actual.flags |= n.flags & (TcpFlags::PSH | TcpFlags::FIN);
                actual.ack = n.ack;
                actual.win = n.win;
                at = next.at;
            }
        }
        if let Err(m) = compare(
            t,
            &actual,
            self.profile.unordered_options || self.lenient,
            self.ts,
        ) {
            let update = self.is_window_update(&conn, &actual);
            if update && self.lenient {
                // Lenient: an unexpected pure window update is receive-window policy; skip it.
                self.report.warnings.push(format!(
                    "line {}: skipped an unexpected window update {} > {}",
                    here.pos.line,
                    secs(at),
                    actual.render()
                ));
                if let Some(c) = self.conn.as_mut() {
                    c.last_out = Some((actual.ack, c.window_bytes(&actual)));
                }
                return self.outbound_tcp(ev, t, start, end, here);
            }
            let mut f = here.fail(
                FailureKind::PacketMismatch,
                format!("outbound packet mismatch: {}", m.message),
            );
            f.expected = Some(expected);
            f.actual = Some(format!("{} > {}", secs(at), actual.render()));
            f.hint = Some(if update {
                "receive-window update policy: the stack sent a pure window update (same ACK as its \
                 previous segment, larger window) that the script's platform does not send; \
                 --lenient skips such updates"
                    .into()
            } else {
                m.hint
            });
            return Err(f);
        }
        if let Some(c) = self.conn.as_mut() {
            c.last_out = Some((actual.ack, c.window_bytes(&actual)));
        }
        if !matches!(ev.when, When::Any) {
            if let Err(mut f) = self.check_time(start, end, at, "outbound packet", here) {
                f.expected = Some(expected);
                f.actual = Some(format!("{} > {}", secs(at), actual.render()));
                f.hint = Some(
                    "timer policy (RTO, minimum RTO, delayed ACK, pacing) when the segment itself is \
                     right; a protocol bug when the RFC fixes the time"
                        .into(),
                );
                return Err(f);
            }
        }
        Ok(())
    }
}

impl Interp {
    /// A bare ACK repeating the previous ACK number with a larger window.
    pub(super) fn is_window_update(&self, c: &Conn, a: &ScriptSeg) -> bool {
        a.len == 0
            && a.flags == TcpFlags::ACK
            && c.last_out
                .is_some_and(|(ack, win)| ack == a.ack && c.window_bytes(a) > win)
    }
}

pub(super) fn seg_raw(s: &Seg) -> String {
    ScriptSeg {
        flags: s.flags,
        seq: s.seq,
        len: s.len,
        ack: s.ack,
        win: s.window,
        urg: s.urgent,
        options: option_list(&s.options),
    }
    .render()
}
