//! Waiting for duplicate address detection (RFC 4862 §5.4) before the stack is used.
//!
//! An IPv6 address is tentative while DAD runs (one solicitation and a second's wait by
//! default): it answers nothing and sends nothing, so a connection or a ping started
//! then would be lost. Linux makes `bind(2)` to a tentative address fail
//! (EADDRNOTAVAIL); ulnet instead has its setup wait: [`Runtime::settle_addresses`] runs
//! the loop until every IPv6 address is usable, and reports a duplicate as an error.

use std::io;
use std::time::Duration;

use ulnet_channel::Channel;
use ulnet_stack::iface::{AddrState, Interface};
use ulnet_stack::tcp::Event;
use ulnet_stack::time::Instant;

use super::{App, Runtime};

/// An app that is done once no IPv6 address is tentative, or at `deadline`.
struct UntilSettled {
    deadline: Option<Instant>,
    timeout: Duration,
    done: bool,
}

impl App for UntilSettled {
    fn poll(&mut self, now: Instant, iface: &mut Interface, _events: &[Event]) {
        let deadline = *self.deadline.get_or_insert(now + self.timeout);
        let tentative = iface
            .ipv6_addresses()
            .any(|a| a.state == AddrState::Tentative);
        self.done = !tentative || now >= deadline;
    }

    fn poll_at(&self) -> Option<Instant> {
        self.deadline
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

impl<C: Channel> Runtime<C> {
    /// Runs the loop until duplicate address detection has finished for every IPv6
    /// address (at once without IPv6 or with DAD off), at most `timeout`.
    ///
    /// # Errors
    /// `AddrInUse` naming the addresses another node on the link holds (RFC 4862
    /// §5.4.5: they are never used); `TimedOut` when an address is still tentative
    /// after `timeout`; a channel system call failed.
    pub fn settle_addresses(&mut self, timeout: Duration) -> io::Result<()> {
        let mut app = UntilSettled {
            deadline: None,
            timeout,
            done: false,
        };
        self.run(&mut app)?;
        let iface = self.iface();
        let names = |state| {
            iface
                .ipv6_addresses()
                .filter(|a| a.state == state)
                .map(|a| a.addr.to_string())
                .collect::<Vec<_>>()
        };
        let duplicated = names(AddrState::Duplicated);
        if !duplicated.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "duplicate address detection: another node on the link uses {} \
                     (RFC 4862 §5.4.5; the address is not used)",
                    duplicated.join(", ")
                ),
            ));
        }
        let tentative = names(AddrState::Tentative);
        if !tentative.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "duplicate address detection did not finish within {timeout:?} for {}",
                    tentative.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// How long [`settle_addresses`](Self::settle_addresses) may take with this
    /// interface's limits: every DAD solicitation and its wait, plus a second.
    pub fn settle_timeout(&self) -> Duration {
        let iface = self.iface();
        let l = &iface.config().limits;
        l.dad_retrans_interval * (u32::from(l.dad_transmits) + 1) + Duration::from_secs(1)
    }
}
