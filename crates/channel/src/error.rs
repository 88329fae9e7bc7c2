//! The channel error: an `io::Error` with the operation that failed and what to do.

use std::fmt;
use std::io;

/// A channel operation failed; `op` names the failing system call or step.
#[derive(Debug)]
pub struct Error {
    /// The failing system call or step, e.g. `"bind(AF_XDP)"`.
    pub op: &'static str,
    /// The error the kernel returned.
    pub source: io::Error,
    /// What the user can do about it, when known.
    pub hint: Option<&'static str>,
}

impl Error {
    /// Wraps the last OS error for `op`.
    pub fn last_os_error(op: &'static str) -> Self {
        Error {
            op,
            source: io::Error::last_os_error(),
            hint: None,
        }
    }

    /// Wraps `source` for `op`.
    pub fn new(op: &'static str, source: io::Error) -> Self {
        Error {
            op,
            source,
            hint: None,
        }
    }

    /// `EINVAL` for `op`: an argument or setting refused before (or instead of) a system
    /// call. Name the rule that was broken with [`Error::with_hint`].
    pub(crate) fn invalid(op: &'static str) -> Self {
        Error::new(op, io::Error::from_raw_os_error(libc::EINVAL))
    }

    /// Adds advice for the user.
    #[must_use]
    pub fn with_hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.source)?;
        if let Some(hint) = self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.source.kind(), e)
    }
}

/// Channel results.
pub type Result<T> = std::result::Result<T, Error>;
