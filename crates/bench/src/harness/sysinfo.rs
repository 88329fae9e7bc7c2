//! What every result records about the machine and the code: kernel, CPU model, cores,
//! commit, clock source and whether the TSC is invariant.

use std::collections::BTreeMap;
use std::process::Command;

use crate::results::Meta;

/// The value of the first `/proc/cpuinfo` line starting with `key`.
fn cpuinfo(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// The checkout's commit (short hash, `-dirty` when the tree has changes), or `unknown`
/// when not run from a git checkout.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(h) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{h}-dirty")
            } else {
                h
            }
        }
        None => "unknown".into(),
    }
}

/// The kernel release.
pub fn kernel() -> String {
    let u = rustix::system::uname();
    u.release().to_string_lossy().into_owned()
}

/// Now, UTC, RFC 3339 to the second.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// `secs` since the Unix epoch as RFC 3339 UTC (civil-from-days, H. Hinnant's algorithm).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// A file stem for the run's output directory: `YYYYMMDD-HHMMSS`.
pub fn timestamp_dir() -> String {
    now_rfc3339()
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_owned()
}

/// The machine and the code, for [`Meta`]; the caller fills in the run's own fields.
pub fn meta() -> Meta {
    let mut extra = BTreeMap::new();
    let flags = cpuinfo("flags").unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    extra.insert(
        "tsc".into(),
        match (has("constant_tsc"), has("nonstop_tsc")) {
            (true, true) => "invariant (constant_tsc, nonstop_tsc)".into(),
            (true, false) => "constant_tsc only".into(),
            _ => "not invariant".into(),
        },
    );
    if let Ok(cs) =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    {
        extra.insert("clocksource".into(), cs.trim().to_owned());
    }
    if let Some(mhz) = cpuinfo("cpu MHz") {
        extra.insert("cpu_mhz".into(), mhz);
    }
    extra.insert("ulnet_version".into(), env!("CARGO_PKG_VERSION").into());
    Meta {
        started: now_rfc3339(),
        commit: commit(),
        kernel: kernel(),
        cpu_model: cpuinfo("model name").unwrap_or_else(|| "unknown".into()),
        cores: super::online_cpus() as u32,
        pinning: super::pinning_text(),
        extra,
        ..Meta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_523_696), "2026-11-24T12:34:56Z");
    }
}
