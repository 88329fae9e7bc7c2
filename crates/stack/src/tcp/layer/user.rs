//! The connection slab as the user calls see it (`api.rs`): finding the application's
//! connections and listeners by handle (generation-checked), adding and removing them,
//! closing and aborting, and the readiness events in order.

use super::*;

impl Tcp {
    /// The connection `h` names, while the application holds it (not yet accepted or
    /// already closed connections are not the application's).
    pub(in crate::tcp) fn user_sock(&self, h: SocketHandle) -> Option<&Socket> {
        let slot = self.slots.get(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.sock.as_deref().filter(|s| s.user_visible())
    }

    /// Runs `op` on the connection `h` names (as [`Tcp::user_sock`]), then settles it:
    /// timers, output and readiness follow whatever `op` did. `None` for a stale handle.
    pub(in crate::tcp) fn with_user_sock<R>(
        &mut self,
        h: SocketHandle,
        now: Instant,
        op: impl FnOnce(&mut Socket) -> R,
    ) -> Option<R> {
        self.with_user_sock_if(h, now, |s| (op(s), true))
    }

    /// [`Tcp::with_user_sock`] for an `op` that says whether it changed anything. One
    /// that did not is not settled: a SEND into a full buffer must not schedule output
    /// (there is nothing new to send, and an application retrying it would keep the
    /// dispatcher due at the same instant forever).
    pub(in crate::tcp) fn with_user_sock_if<R>(
        &mut self,
        h: SocketHandle,
        now: Instant,
        op: impl FnOnce(&mut Socket) -> (R, bool),
    ) -> Option<R> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let s = slot.sock.as_deref_mut().filter(|s| s.user_visible())?;
        let before = snapshot(s);
        let (r, changed) = op(s);
        if changed {
            self.settle(h.index, now, Some(before));
        }
        Some(r)
    }

    /// [`Tcp::with_user_sock_if`] for an `op` that needs the engine's context (the memory
    /// budget for SEND and buffer options).
    pub(in crate::tcp) fn with_user_sock_cx<R>(
        &mut self,
        h: SocketHandle,
        now: Instant,
        op: impl FnOnce(&mut Socket, &mut Cx<'_>) -> (R, bool),
    ) -> Option<R> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let s = slot.sock.as_deref_mut().filter(|s| s.user_visible())?;
        let before = snapshot(s);
        let mut cx = Cx {
            cfg: &self.cfg,
            stats: &mut self.stats,
            challenge: &mut self.challenge,
            mem: &mut self.mem,
        };
        let (r, changed) = op(s, &mut cx);
        if changed {
            self.settle(h.index, now, Some(before));
        }
        Some(r)
    }

    /// True when buffer memory is at its hard limit: new connections are refused.
    pub(in crate::tcp) fn mem_exhausted(&mut self) -> bool {
        let out = self.mem.exhausted();
        self.stats.mem_refused += u64::from(out);
        out
    }

    /// Places a new connection in the slab and hands the application its handle.
    pub(in crate::tcp) fn add_socket(&mut self, sock: Box<Socket>, now: Instant) -> SocketHandle {
        let idx = self.insert_socket(sock);
        self.settle(idx, now, None);
        self.handle_of(idx)
    }

    /// True when a connection or a TIME-WAIT record already holds the 4-tuple `t`.
    pub(in crate::tcp) fn tuple_in_use(&self, t: &FourTuple) -> bool {
        self.table.contains(t) || self.tw.contains(t)
    }

    /// True when no more connections fit.
    pub(in crate::tcp) fn table_full(&self) -> bool {
        self.table.is_full()
    }

    /// RFC 6056 port selection towards `remote` from `ip`: the first port whose 4-tuple is
    /// free (no connection, no TIME-WAIT record, no listener on it).
    pub(in crate::tcp) fn ephemeral_port(&mut self, ip: IpAddr, remote: SocketAddr) -> Option<u16> {
        let (table, tw, listen_map) = (&self.table, &self.tw, &self.listen_map);
        self.ports.next(ip, remote, |port| {
            let local = SocketAddr::new(ip, port);
            let t = FourTuple::new(local, remote);
            table.contains(&t) || tw.contains(&t) || listen_map.contains_key(&local)
        })
    }

    /// A control block in CLOSED for `tuple`, with the ISN, timestamp offset and MSS
    /// this engine gives it.
    pub(in crate::tcp) fn new_socket(&mut self, tuple: FourTuple, now: Instant) -> Box<Socket> {
        let iss = self.isn(&tuple, now);
        self.new_socket_with_iss(tuple, iss, now)
    }

    /// As [`Tcp::new_socket`] with the ISN chosen by the caller (a passive open's TIME-WAIT
    /// reuse rule, a SYN cookie).
    pub(in crate::tcp) fn new_socket_with_iss(
        &self,
        tuple: FourTuple,
        iss: SeqNumber,
        now: Instant,
    ) -> Box<Socket> {
        let mtu = self.mtu_for(tuple.remote().ip());
        Socket::new(
            &self.cfg,
            tuple,
            iss,
            self.ts_offset(&tuple),
            mtu,
            now,
            self.mem.under_pressure(),
        )
    }

    /// Registers a listener on `local`; `None` when one already owns it, or when the
    /// two wildcards of a port would overlap: as Linux with `bindv6only=0`, `[::]:p`
    /// (not v6-only) also holds `0.0.0.0:p` (RFC 3493 §5.3), so either refuses the
    /// other, in both orders.
    pub(in crate::tcp) fn add_listener(&mut self, l: Listener) -> Option<ListenerHandle> {
        if self.listen_map.contains_key(&l.local) {
            return None;
        }
        let port = l.local.port();
        let clash = match l.local.ip() {
            IpAddr::V4(a) if a.is_unspecified() => {
                self.listen_map.get(&any6(port)).is_some_and(|&i| {
                    self.listeners
                        .get(i as usize)
                        .and_then(|s| s.listener.as_ref())
                        .is_some_and(|x| !x.v6only)
                })
            }
            IpAddr::V6(a) if a.is_unspecified() && !l.v6only => {
                self.listen_map.contains_key(&any4(port))
            }
            _ => false,
        };
        if clash {
            return None;
        }
        let local = l.local;
        let index = match self.listeners.iter().position(|s| s.listener.is_none()) {
            Some(i) => {
                self.listeners[i].listener = Some(l);
                i
            }
            None => {
                self.listeners.push(ListenerSlot {
                    generation: 0,
                    listener: Some(l),
                    in_events: false,
                });
                self.listeners.len() - 1
            }
        };
        self.listen_map.insert(local, index as u32);
        Some(ListenerHandle {
            index: index as u32,
            generation: self.listeners[index].generation,
        })
    }

    /// Whether a listener holds `0.0.0.0` on `local`'s port (what a `[::]` listener on it
    /// may not overlap unless v6-only).
    pub(in crate::tcp) fn v4_wildcard_listening(&self, local: SocketAddr) -> bool {
        local.ip().is_unspecified()
            && local.is_ipv6()
            && self.listen_map.contains_key(&any4(local.port()))
    }

    pub(super) fn listener_slot(&mut self, l: ListenerHandle) -> Option<&mut ListenerSlot> {
        self.listeners
            .get_mut(l.index as usize)
            .filter(|s| s.generation == l.generation && s.listener.is_some())
    }

    /// The listener `l` names, shared; `None` for a stale handle.
    pub(in crate::tcp) fn listener_ref(&self, l: ListenerHandle) -> Option<&Listener> {
        self.listeners
            .get(l.index as usize)
            .filter(|s| s.generation == l.generation)
            .and_then(|s| s.listener.as_ref())
    }

    /// The listener `l` names; `None` for a stale handle.
    pub(in crate::tcp) fn listener_mut(&mut self, l: ListenerHandle) -> Option<&mut Listener> {
        self.listener_slot(l)?.listener.as_mut()
    }

    /// Takes the oldest established connection from `l`'s accept queue and gives it to
    /// the application. `Err(())` for a stale listener handle.
    pub(in crate::tcp) fn pop_accepted(
        &mut self,
        l: ListenerHandle,
        now: Instant,
    ) -> Result<Option<SocketHandle>, ()> {
        loop {
            let ls = self.listener_slot(l).ok_or(())?;
            ls.in_events = false;
            let Some(h) = ls
                .listener
                .as_mut()
                .and_then(|x| x.accept_queue.pop_front())
            else {
                return Ok(None);
            };
            let slot = &mut self.slots[h.index as usize];
            if slot.generation != h.generation {
                continue;
            }
            let Some(sock) = slot.sock.as_mut() else {
                continue;
            };
            sock.accepted();
            // The application may want to hear about data that arrived before accept.
            self.settle(h.index, now, None);
            return Ok(Some(h));
        }
    }

    /// Removes listener `l` (its handle goes stale) and resets the connections that came
    /// from it and were not accepted yet. `None` for a stale handle.
    pub(in crate::tcp) fn remove_listener(
        &mut self,
        l: ListenerHandle,
        now: Instant,
    ) -> Option<()> {
        let ls = self.listener_slot(l)?;
        let listener = ls.listener.take()?;
        ls.generation = ls.generation.wrapping_add(1);
        self.listen_map.remove(&listener.local);
        let children: Vec<u32> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.sock.as_ref().is_some_and(|k| k.origin() == Some(l)))
            .map(|(i, _)| i as u32)
            .collect();
        for idx in children {
            self.abort_idx(idx, now);
        }
        Some(())
    }

    /// ABORT of connection `h` (RFC 9293 §3.10.5): the RST, if any, is queued for the
    /// next dispatch and the connection is freed. `None` for a stale handle.
    pub(in crate::tcp) fn abort_user(&mut self, h: SocketHandle, now: Instant) -> Option<()> {
        self.user_sock(h)?;
        self.abort_idx(h.index, now);
        Some(())
    }

    pub(super) fn abort_idx(&mut self, idx: u32, now: Instant) {
        let Some(s) = self.slots[idx as usize].sock.as_mut() else {
            return;
        };
        let (local, remote) = (s.tuple().local().ip(), s.tuple().remote().ip());
        if let Some(rst) = s.abort(now) {
            if self.pending_rst.len() < MAX_PENDING_RST {
                self.pending_rst.push_back((local, remote, rst));
                self.stats.resets_sent += 1;
            }
        }
        s.orphan();
        self.settle(idx, now, None);
    }

    /// CLOSE of connection `h` (RFC 9293 §3.10.4); unread data makes it an abort (RFC
    /// 1122 §4.2.2.13). `None` for a stale handle.
    pub(in crate::tcp) fn close_user(&mut self, h: SocketHandle, now: Instant) -> Option<()> {
        let fin_wait2_timeout = self.cfg.fin_wait2_timeout;
        let s = self.user_sock(h)?;
        if s.close_resets() {
            self.abort_idx(h.index, now);
            return Some(());
        }
        let s = self.slots[h.index as usize].sock.as_mut()?;
        s.close(now, fin_wait2_timeout);
        self.settle(h.index, now, None);
        Some(())
    }

    /// Whether readiness changes are queued (some may be of sockets closed since).
    #[inline]
    pub(in crate::tcp) fn has_queued_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next readiness change, oldest first (each source at most once until taken).
    pub(in crate::tcp) fn take_event(&mut self) -> Option<Event> {
        while let Some(e) = self.events.pop_front() {
            match e {
                Event::Socket(h) => {
                    if let Some(slot) = self.slots.get_mut(h.index as usize) {
                        if slot.generation == h.generation && slot.in_events {
                            slot.in_events = false;
                            return Some(e);
                        }
                    }
                }
                Event::Listener(l) => {
                    if let Some(ls) = self.listeners.get_mut(l.index as usize) {
                        if ls.generation == l.generation && ls.in_events {
                            ls.in_events = false;
                            return Some(e);
                        }
                    }
                }
            }
        }
        None
    }
}

/// `0.0.0.0:port`.
fn any4(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED), port)
}

/// `[::]:port`.
fn any6(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), port)
}
