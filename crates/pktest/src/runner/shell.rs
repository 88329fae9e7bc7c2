//! Shell lines (`` `...` ``) of a script. packetdrill runs them with `sh`; this runner
//! has no kernel to configure, so it interprets the few that matter to the engine and
//! knows which others are harmless:
//!
//! - `sysctl` assignments (and `echo V > /proc/sys/net/ipv4/...`) that change TCP
//!   behaviour are applied to the engine's configuration ([`TcpConfig`]): timestamps,
//!   SACK, window scaling, RACK, tail loss probes, the congestion control algorithm,
//!   SYN retries, retransmission limit, FIN-WAIT-2 timeout, challenge-ACK limit. The
//!   engine is rebuilt with the new configuration, so they must come before the
//!   script's first socket (where packetdrill scripts put them).
//! - Known-harmless lines run without effect in strict mode too: the suites' defaults
//!   file (`defaults.sh`, which sets Linux's defaults: the profile models them), and
//!   sysctls for things the engine does not have (`tcp_no_metrics_save`: it keeps no
//!   per-destination metrics).
//! - Anything else is a line the runner cannot interpret: strict mode stops there,
//!   `--lenient` skips it.
//!
//! [`TcpConfig`]: ulnet_stack::tcp::TcpConfig

use ulnet_stack::tcp::{Algorithm, Tcp};
use ulnet_stack::time::Duration;

use super::{Here, Interp, Res};
use crate::report::Skipped;

/// What one sysctl assignment does here.
enum Sysctl {
    /// Changed the configuration.
    Applied,
    /// Nothing to change in this engine.
    Harmless,
    /// Not understood (name or value).
    Unknown,
}

impl Interp {
    /// Runs a shell line: every command in it must be applied or known harmless.
    pub(crate) fn shell(&mut self, cmd: &str, here: &Here<'_>) -> Res<()> {
        let mut changed = false;
        for part in cmd.split([';', '\n']).flat_map(|p| p.split("&&")) {
            let part = part.trim();
            if part.is_empty() || part == "true" || part == ":" {
                continue;
            }
            if part.contains("defaults.sh") {
                self.note(
                    here,
                    &format!("`{part}`: the profile models the defaults it sets"),
                );
                continue;
            }
            let assignments = match sysctl_assignments(part) {
                Some(a) => a,
                None => return self.skip(here, &format!("shell command `{part}`")),
            };
            for (name, value) in assignments {
                match self.apply_sysctl(&name, &value) {
                    Sysctl::Applied => changed = true,
                    Sysctl::Harmless => {
                        self.note(here, &format!("sysctl {name}: no such behaviour in ulnet"))
                    }
                    Sysctl::Unknown => {
                        return self.skip(here, &format!("sysctl {name}={value}"));
                    }
                }
            }
        }
        if changed {
            if !self.fds.is_empty() {
                return self.skip(
                    here,
                    "a sysctl after the first socket (the engine is configured before it)",
                );
            }
            self.tcp = Tcp::new(self.profile.config.clone(), *super::ISN_KEY);
        }
        Ok(())
    }

    /// Records a line that ran without effect (listed with the skipped lines, so a reader
    /// sees it, but it is not a failure in strict mode).
    fn note(&mut self, here: &Here<'_>, why: &str) {
        self.report.skipped.push(Skipped {
            line: here.pos.line,
            text: here.text.to_string(),
            reason: format!("known harmless: {why}"),
        });
    }

    fn apply_sysctl(&mut self, name: &str, value: &str) -> Sysctl {
        let name = name
            .trim_start_matches("net.ipv4.")
            .trim_start_matches("net/ipv4/");
        let c = &mut self.profile.config;
        let num = value.trim().parse::<i64>().ok();
        let flag = num.map(|n| n != 0);
        match (name, num, flag) {
            ("tcp_timestamps", _, Some(on)) => c.timestamps = on,
            ("tcp_sack", _, Some(on)) => c.sack = on,
            ("tcp_window_scaling", _, Some(on)) => c.window_scaling = on,
            // Bit 0 of tcp_recovery is RACK loss detection (ip-sysctl.rst).
            ("tcp_recovery", Some(n), _) => c.rack = n & 1 != 0,
            // 3 (the default) and 4 enable tail loss probes; 0-2 do not.
            ("tcp_early_retrans", Some(n), _) => c.tail_loss_probe = n >= 3,
            ("tcp_syn_retries", Some(n), _) if (1..=127).contains(&n) => c.syn_retries = n as u8,
            ("tcp_retries2", Some(n), _) if (0..=255).contains(&n) => c.max_retransmits = n as u8,
            ("tcp_fin_timeout", Some(n), _) if n > 0 => {
                c.fin_wait2_timeout = Duration::from_secs(n as u64)
            }
            ("tcp_challenge_ack_limit", Some(n), _) if n >= 0 => {
                c.challenge_ack_limit = n.min(i64::from(u32::MAX)) as u32
            }
            ("tcp_congestion_control", _, _) => match value.trim().parse::<Algorithm>() {
                Ok(a) => c.congestion = a,
                Err(_) => return Sysctl::Unknown,
            },
            ("tcp_no_metrics_save", _, _) => return Sysctl::Harmless,
            _ => return Sysctl::Unknown,
        }
        Sysctl::Applied
    }
}

/// The `name=value` pairs of `sysctl [-q] [-w] [-e] name=value...`, or of
/// `echo V > /proc/sys/net/ipv4/NAME`; `None` when the command is neither.
fn sysctl_assignments(cmd: &str) -> Option<Vec<(String, String)>> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    match words.as_slice() {
        ["sysctl", rest @ ..] => {
            let mut out = Vec::new();
            for w in rest {
                if w.starts_with('-') {
                    if matches!(*w, "-q" | "-w" | "-e" | "-qw" | "-wq") {
                        continue;
                    }
                    return None;
                }
                let (n, v) = w.split_once('=')?;
                out.push((n.to_string(), v.trim_matches(['"', '\'']).to_string()));
            }
            (!out.is_empty()).then_some(out)
        }
        ["echo", v, ">", path] => {
            let name = path.strip_prefix("/proc/sys/net/ipv4/")?;
            Some(vec![(
                name.to_string(),
                v.trim_matches(['"', '\'']).to_string(),
            )])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::sysctl_assignments;

    #[test]
    fn sysctl_forms() {
        assert_eq!(
            sysctl_assignments("sysctl -q net.ipv4.tcp_timestamps=0 net.ipv4.tcp_sack=0"),
            Some(vec![
                ("net.ipv4.tcp_timestamps".into(), "0".into()),
                ("net.ipv4.tcp_sack".into(), "0".into())
            ])
        );
        assert_eq!(
            sysctl_assignments("echo 0 > /proc/sys/net/ipv4/tcp_window_scaling"),
            Some(vec![("tcp_window_scaling".into(), "0".into())])
        );
        assert_eq!(sysctl_assignments("tc qdisc add dev tun0 root netem"), None);
        assert_eq!(sysctl_assignments("sysctl -p /etc/x"), None);
    }
}
