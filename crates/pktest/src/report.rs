//! What a run says: per script pass, or the first mismatch with the expected and actual
//! segment in packetdrill syntax and a hint whether the difference is protocol behaviour
//! or platform policy; the lines skipped in lenient mode; a summary; all as text or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::lexer::Pos;
use crate::profile::ProfileKind;

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every event happened as written.
    Pass,
    /// The stack did something else than the script expected.
    Fail,
    /// The script could not be read, parsed, or run (unsupported feature).
    Error,
}

/// Which rule a failure broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The file could not be read.
    Io,
    /// Syntax error.
    Parse,
    /// An outbound packet differs from the script's.
    PacketMismatch,
    /// The script expected an outbound packet and none was sent in time.
    NoPacket,
    /// A packet or call happened outside its time window.
    Timing,
    /// A system call returned something else.
    SyscallMismatch,
    /// The script asks for something this runner cannot do.
    Unsupported,
}

/// The first thing that went wrong.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// Script line and column.
    pub line: u32,
    /// Column.
    pub col: u32,
    /// The script line.
    pub text: String,
    /// Which rule.
    pub kind: FailureKind,
    /// What is wrong, in one sentence.
    pub message: String,
    /// The expected segment or result, packetdrill syntax.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the stack did, packetdrill syntax (sequence numbers in script space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    /// Whether this looks like protocol behaviour or a platform policy, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Failure {
    /// A failure at `pos` with no packet detail.
    pub fn at(pos: Pos, text: &str, kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            line: pos.line,
            col: pos.col,
            text: text.to_string(),
            kind,
            message: message.into(),
            expected: None,
            actual: None,
            hint: None,
        }
    }
}

/// A line lenient mode did not run.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Script line.
    pub line: u32,
    /// The line.
    pub text: String,
    /// Why it was skipped.
    pub reason: String,
}

/// The result of one script.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptReport {
    /// The script's path or name.
    pub script: String,
    /// Profile used.
    pub profile: ProfileKind,
    /// Lenient mode on.
    pub lenient: bool,
    /// Outcome.
    pub status: Status,
    /// Events in the script.
    pub events: usize,
    /// Events run to completion.
    pub events_run: usize,
    /// Virtual time at the end, in microseconds.
    pub virtual_usecs: u64,
    /// Lines skipped (lenient mode).
    pub skipped: Vec<Skipped>,
    /// Notes that did not fail the script (ignored options, unmatched trailing segments).
    pub warnings: Vec<String>,
    /// The first failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

impl ScriptReport {
    /// The human-readable report: one status line, then details.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let tag = match self.status {
            Status::Pass => "PASS ",
            Status::Fail => "FAIL ",
            Status::Error => "ERROR",
        };
        let _ = writeln!(
            s,
            "{tag} {} (profile {}{}, {}/{} events, {:.6} s virtual)",
            self.script,
            self.profile,
            if self.lenient { ", lenient" } else { "" },
            self.events_run,
            self.events,
            self.virtual_usecs as f64 / 1e6
        );
        if let Some(f) = &self.failure {
            let _ = writeln!(s, "  {}:{}:{}: {}", self.script, f.line, f.col, f.message);
            let _ = writeln!(s, "    script line: {}", f.text);
            if let Some(e) = &f.expected {
                let _ = writeln!(s, "    expected: {e}");
            }
            if let Some(a) = &f.actual {
                let _ = writeln!(s, "    actual:   {a}");
            }
            if let Some(h) = &f.hint {
                let _ = writeln!(s, "    hint: {h}");
            }
        }
        for k in &self.skipped {
            let _ = writeln!(s, "  skipped line {}: {} ({})", k.line, k.text, k.reason);
        }
        for w in &self.warnings {
            let _ = writeln!(s, "  note: {w}");
        }
        s
    }
}

/// Totals over several scripts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Scripts run.
    pub scripts: usize,
    /// Passed.
    pub passed: usize,
    /// Failed (stack behaviour differs).
    pub failed: usize,
    /// Could not run (I/O, syntax, unsupported).
    pub errors: usize,
    /// Lines skipped in lenient mode, over all scripts.
    pub skipped_lines: usize,
}

impl Summary {
    /// Adds up `reports`.
    pub fn of(reports: &[ScriptReport]) -> Summary {
        let mut s = Summary {
            scripts: reports.len(),
            ..Summary::default()
        };
        for r in reports {
            match r.status {
                Status::Pass => s.passed += 1,
                Status::Fail => s.failed += 1,
                Status::Error => s.errors += 1,
            }
            s.skipped_lines += r.skipped.len();
        }
        s
    }

    /// `pktest: 12 scripts, 11 passed, 1 failed, 0 errors, 0 lines skipped`.
    pub fn line(&self) -> String {
        format!(
            "pktest: {} scripts, {} passed, {} failed, {} errors, {} lines skipped",
            self.scripts, self.passed, self.failed, self.errors, self.skipped_lines
        )
    }

    /// True when every script passed.
    pub fn all_passed(&self) -> bool {
        self.passed == self.scripts
    }
}

/// The JSON document `--json` prints: every report and the summary.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    /// Per script.
    pub scripts: &'a [ScriptReport],
    /// Totals.
    pub summary: Summary,
}

/// Renders `reports` as pretty JSON.
pub fn to_json(reports: &[ScriptReport]) -> String {
    let doc = JsonReport {
        scripts: reports,
        summary: Summary::of(reports),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
