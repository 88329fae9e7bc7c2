//! Sleeping without burning CPU: `poll(2)` on the channel's wait descriptor and an
//! eventfd that [`Handle`](super::Handle)s write to wake the loop.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::time::Timespec;

/// A non-blocking eventfd at zero.
pub(super) fn eventfd() -> io::Result<OwnedFd> {
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
    )?)
}

/// Adds one to the eventfd, making it readable. A full counter (never in practice)
/// is readable already, so the error is moot.
pub(super) fn signal(fd: &OwnedFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Blocks until `channel` (if any) or `eventfd` is readable, or `timeout` passes
/// (`None`: no timeout). Drains the eventfd. A signal interrupting the wait counts as a
/// wake-up.
pub(super) fn sleep(
    channel: Option<BorrowedFd<'_>>,
    eventfd: &OwnedFd,
    timeout: Option<Duration>,
) -> io::Result<()> {
    let ts = timeout.map(|d| Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        // Round up so a deadline is never missed by a sub-microsecond remainder.
        tv_nsec: i64::from(d.subsec_nanos()).max(1),
    });
    let mut fds = [
        PollFd::new(eventfd, PollFlags::IN),
        PollFd::new(eventfd, PollFlags::IN),
    ];
    let count = match channel {
        Some(c) => {
            fds[1] = PollFd::from_borrowed_fd(c, PollFlags::IN);
            2
        }
        None => 1,
    };
    match rustix::event::poll(&mut fds[..count], ts.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    if !fds[0].revents().is_empty() {
        let mut buf = [0u8; 8];
        match rustix::io::read(eventfd, &mut buf) {
            Ok(_) | Err(rustix::io::Errno::AGAIN) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn eventfd_wakes_a_sleep_and_is_drained() {
        let e = eventfd().unwrap();
        signal(&e);
        let t = std::time::Instant::now();
        sleep(None, &e, Some(Duration::from_secs(5))).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        // Drained: a second sleep times out.
        let t = std::time::Instant::now();
        sleep(None, &e, Some(Duration::from_millis(20))).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_readable_channel_descriptor_wakes_a_sleep_in_place() {
        // The channel's descriptor is polled as borrowed, not duplicated: its readiness
        // (here another eventfd's) ends the sleep, and it is left unread for the channel.
        let e = eventfd().unwrap();
        let channel = eventfd().unwrap();
        signal(&channel);
        let t = std::time::Instant::now();
        sleep(Some(channel.as_fd()), &e, Some(Duration::from_secs(5))).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        let mut buf = [0u8; 8];
        rustix::io::read(&channel, &mut buf).unwrap();
        assert_eq!(u64::from_ne_bytes(buf), 1);
    }
}
