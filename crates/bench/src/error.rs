//! The one error type of the testbed and process helpers.
//!
//! Every variant names what failed in words a person can act on: the command line that was
//! run and what it wrote to stderr, or the tool or privilege that is missing. Tests print
//! these verbatim, so "it failed" is never all a CI log says.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Result alias for this crate's fallible operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while building, inspecting or tearing down a testbed, or while running a
/// command inside one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line, arguments separated by spaces (for display only).
        command: String,
        /// How it exited.
        status: ExitStatus,
        /// What it wrote to stderr, trimmed.
        stderr: String,
    },
    /// A command could not be started at all.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The error from `fork`/`exec`.
        source: std::io::Error,
    },
    /// A program the testbed needs is not installed.
    #[error("`{tool}` is not installed or not on PATH ({package}); run scripts/setup.sh")]
    MissingTool {
        /// The program name.
        tool: String,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The process lacks a capability the testbed needs.
    #[error("the testbed needs {what}; run the tests as root")]
    NotPermitted {
        /// The missing capability or privilege, in words.
        what: String,
    },
    /// A caller-supplied parameter is out of range or malformed.
    #[error("invalid testbed parameter: {0}")]
    Invalid(String),
    /// Every testbed subnet in 198.18.0.0/15 is taken by a live testbed.
    #[error("no free testbed subnet in 198.18.0.0/15: remove stale ones with `ulnet testbed down --all`")]
    NoFreeSubnet,
    /// A named testbed or namespace does not exist.
    #[error("no such testbed: {0}")]
    NotFound(String),
    /// A command's output did not have the expected shape.
    #[error("cannot parse the output of `{command}`: {why}")]
    Parse {
        /// The command line whose output was read.
        command: String,
        /// What was wrong with it.
        why: String,
    },
    /// A file under /proc, /run or /var/run could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A bounded wait for a child process ran out; the child was killed.
    #[error("`{command}` did not finish within {timeout:?} and was killed")]
    Timeout {
        /// The command line.
        command: String,
        /// The bound that was exceeded.
        timeout: Duration,
    },
}

impl Error {
    /// Wraps an I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
