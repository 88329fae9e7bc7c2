//! Checks that the machine can host a testbed: the programs it runs and the privileges it
//! needs. A missing piece is an error naming it, never a silent skip (docs/STYLE.md 4.7).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Linux capability numbers (include/uapi/linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// The Debian package that provides `tool`, for error messages and scripts/setup.sh.
pub fn package_of(tool: &str) -> &'static str {
    match tool {
        "ip" | "tc" => "iproute2",
        "ping" => "iputils-ping",
        "ethtool" => "ethtool",
        "nft" => "nftables",
        "sysctl" | "ps" => "procps",
        "iperf3" => "iperf3",
        "socat" => "socat",
        "nc" => "netcat-openbsd",
        "curl" => "curl",
        "tshark" => "tshark",
        "tcpdump" => "tcpdump",
        "python3" => "python3",
        "sockperf" => "sockperf",
        "taskset" => "util-linux",
        _ => "unknown package",
    }
}

/// Finds `tool` the way `execvp` would: as given if it contains a `/`, else on `PATH`.
///
/// # Errors
/// [`Error::MissingTool`] when no executable file is found.
pub fn require_tool(tool: &str) -> Result<PathBuf> {
    let missing = || Error::MissingTool {
        tool: tool.to_owned(),
        package: package_of(tool),
    };
    if tool.contains('/') {
        return is_executable(Path::new(tool))
            .then(|| PathBuf::from(tool))
            .ok_or_else(missing);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(missing)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks that this process may create network namespaces and configure links in them:
/// `ip netns add` bind-mounts the namespace (CAP_SYS_ADMIN) and link set-up needs
/// CAP_NET_ADMIN.
///
/// # Errors
/// [`Error::NotPermitted`] naming the missing capability; [`Error::Io`] if
/// `/proc/self/status` cannot be read.
pub fn require_net_admin() -> Result<()> {
    const STATUS: &str = "/proc/self/status";
    let status = std::fs::read_to_string(STATUS).map_err(|e| Error::io(STATUS, e))?;
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| Error::Parse {
            command: format!("read {STATUS}"),
            why: "no CapEff line".into(),
        })?;
    for (cap, name) in [
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ] {
        if effective & (1 << cap) == 0 {
            return Err(Error::NotPermitted {
                what: format!("{name} (effective capabilities are {effective:#x})"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_program_on_path_and_names_a_missing_one() {
        assert!(require_tool("sh").is_ok());
        let err = require_tool("ulnet-no-such-tool").unwrap_err();
        assert!(matches!(err, Error::MissingTool { .. }), "{err}");
        assert!(err.to_string().contains("ulnet-no-such-tool"));
    }

    #[test]
    fn absolute_paths_are_checked_in_place() {
        assert!(require_tool("/bin/sh").is_ok());
        assert!(require_tool("/nonexistent/ip").is_err());
    }
}
