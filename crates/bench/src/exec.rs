//! Running programs, optionally inside a network namespace, and keeping the ones that run
//! in the background on a leash.
//!
//! Arguments are passed as an argument vector, never through a shell, so an address or a
//! name can never be read as shell syntax. `ip netns exec` replaces itself with the program
//! (it forks only in batch mode), so the pid of a spawned child is the program's own pid:
//! killing it kills the program, and [`crate::cpu`] can read its CPU time.

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::preflight::{package_of, require_tool};

/// How often a bounded wait polls the child.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Renders a command line for messages (arguments joined by spaces; not for execution).
pub fn command_line<I, S>(program: &str, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut line = program.to_owned();
    for arg in args {
        line.push(' ');
        line.push_str(&arg.as_ref().to_string_lossy());
    }
    line
}

fn describe(cmd: &Command) -> String {
    command_line(&cmd.get_program().to_string_lossy(), cmd.get_args())
}

fn spawn_error(cmd: &Command, source: std::io::Error) -> Error {
    let program = cmd.get_program().to_string_lossy().into_owned();
    if source.kind() == std::io::ErrorKind::NotFound {
        let package = package_of(&program);
        return Error::MissingTool {
            tool: program,
            package,
        };
    }
    Error::Spawn {
        command: describe(cmd),
        source,
    }
}

/// Runs `cmd` to completion, capturing its output, and fails unless it exited with 0.
///
/// # Errors
/// [`Error::MissingTool`] or [`Error::Spawn`] if it cannot start; [`Error::Command`]
/// (with its stderr) if it exits unsuccessfully.
pub fn run_command(cmd: &mut Command) -> Result<Output> {
    let output = output_command(cmd)?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(Error::Command {
            command: describe(cmd),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// Runs `cmd` to completion with stdin closed, capturing its output whatever its exit
/// status.
///
/// # Errors
/// [`Error::MissingTool`] or [`Error::Spawn`] if it cannot start.
pub fn output_command(cmd: &mut Command) -> Result<Output> {
    cmd.stdin(Stdio::null());
    cmd.output().map_err(|e| spawn_error(cmd, e))
}

/// Runs `program args` in the current namespace; see [`run_command`].
///
/// # Errors
/// As [`run_command`].
pub fn run<I, S>(program: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_command(&mut cmd)
}

/// Builds (without starting) `ip netns exec <ns> <program> <args>`.
pub fn netns_command<I, S>(ns: &str, program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]).args(args);
    cmd
}

/// Runs `program args` inside namespace `ns` and fails unless it exits with 0.
///
/// # Errors
/// [`Error::MissingTool`] if `program` (or `ip`) is not installed; otherwise as
/// [`run_command`].
pub fn run_in<I, S>(ns: &str, program: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    // `ip netns exec` reports a missing program only as exit status 255; look first so the
    // error names the tool.
    require_tool(program)?;
    run_command(&mut netns_command(ns, program, args))
}

/// Runs `program args` inside namespace `ns` and returns its output whatever its exit
/// status (for commands whose failure is an answer, such as `ping`).
///
/// # Errors
/// [`Error::MissingTool`] or [`Error::Spawn`] if it cannot start.
pub fn output_in<I, S>(ns: &str, program: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    require_tool(program)?;
    output_command(&mut netns_command(ns, program, args))
}

/// Starts `program args` inside namespace `ns` in the background, with stdin closed and
/// stdout and stderr piped (read them, or collect them with [`ChildGuard::wait_timeout`]
/// or [`ChildGuard::kill`]; a chatty child blocks once a pipe's 64 KiB fill up). The child
/// enters `ns` a moment after this returns (`ip` switches namespace, then execs). For other
/// stdio, build the command with [`netns_command`] and start it with [`ChildGuard::spawn`].
///
/// # Errors
/// [`Error::MissingTool`] or [`Error::Spawn`] if it cannot start.
pub fn spawn_in<I, S>(ns: &str, program: &str, args: I) -> Result<ChildGuard>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    require_tool(program)?;
    let mut cmd = netns_command(ns, program, args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    ChildGuard::spawn(cmd)
}

/// A background process that is killed (SIGKILL) and reaped when the guard is dropped, so a
/// failing test leaves no server behind and no zombie.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    command: String,
}

impl ChildGuard {
    /// Starts `cmd` exactly as configured (stdio included) and guards it.
    ///
    /// # Errors
    /// [`Error::MissingTool`] or [`Error::Spawn`] if it cannot start.
    pub fn spawn(mut cmd: Command) -> Result<Self> {
        let child = cmd.spawn().map_err(|e| spawn_error(&cmd, e))?;
        Ok(ChildGuard {
            child: Some(child),
            command: describe(&cmd),
        })
    }

    /// The command line, for messages.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The process id (the program's own: `ip netns exec` execs in place).
    pub fn id(&self) -> u32 {
        self.child_ref().id()
    }

    /// The guarded child, e.g. to take its stdout for streaming reads.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("ChildGuard holds its child until consumed")
    }

    fn child_ref(&self) -> &Child {
        self.child
            .as_ref()
            .expect("ChildGuard holds its child until consumed")
    }

    /// Reports the exit status if the child has exited, without blocking.
    ///
    /// # Errors
    /// [`Error::Spawn`] if waiting fails (it does not for a child of this process).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        let command = self.command.clone();
        self.child_mut()
            .try_wait()
            .map_err(|source| Error::Spawn { command, source })
    }

    /// Waits up to `timeout` for the child to exit and returns its status and whatever it
    /// wrote to piped stdout/stderr.
    ///
    /// # Errors
    /// [`Error::Timeout`] if it is still running at the deadline (it is then killed and
    /// reaped); [`Error::Spawn`] if waiting fails.
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<Output> {
        let child = self
            .child
            .take()
            .expect("ChildGuard holds its child until consumed");
        let (output, timed_out) = collect(child, Some(Instant::now() + timeout), &self.command)?;
        if timed_out {
            return Err(Error::Timeout {
                command: self.command.clone(),
                timeout,
            });
        }
        Ok(output)
    }

    /// Kills the child (SIGKILL) if it still runs, reaps it and returns what it wrote to
    /// piped stdout/stderr (useful to stop a server and read its log).
    ///
    /// # Errors
    /// [`Error::Spawn`] if waiting fails.
    pub fn kill(mut self) -> Result<Output> {
        let mut child = self
            .child
            .take()
            .expect("ChildGuard holds its child until consumed");
        // ESRCH/ECHILD here only mean it has already exited; wait() below reaps it either way.
        let _ = child.kill();
        collect(child, None, &self.command).map(|(output, _)| output)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> Option<JoinHandle<Vec<u8>>> {
    pipe.map(|mut pipe| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            // A read error ends the capture; what was read so far is still useful.
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    })
}

/// Waits for `child` (killing it at `deadline`), draining its pipes on threads so a full
/// pipe cannot stall it. Returns the output and whether the deadline fired.
fn collect(mut child: Child, deadline: Option<Instant>, command: &str) -> Result<(Output, bool)> {
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let wait_error = |source| Error::Spawn {
        command: command.to_owned(),
        source,
    };
    let mut timed_out = false;
    let status = match deadline {
        None => child.wait().map_err(wait_error)?,
        Some(deadline) => loop {
            if let Some(status) = child.try_wait().map_err(wait_error)? {
                break status;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                let _ = child.kill();
                break child.wait().map_err(wait_error)?;
            }
            std::thread::sleep(POLL_INTERVAL);
        },
    };
    let join = |h: Option<JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok((
        Output {
            status,
            stdout: join(stdout),
            stderr: join(stderr),
        },
        timed_out,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_command_reports_its_line_and_stderr() {
        let err = run("sh", ["-c", "echo oops >&2; exit 3"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sh -c"), "{text}");
        assert!(text.contains("oops"), "{text}");
    }

    #[test]
    fn missing_program_is_named() {
        let err = run("ulnet-no-such-program", ["x"]).unwrap_err();
        assert!(matches!(err, Error::MissingTool { .. }), "{err}");
    }

    #[test]
    fn arguments_are_not_shell_syntax() {
        let out = run("printf", ["%s", "$(echo no); rm -rf /nonexistent"]).unwrap();
        assert_eq!(out.stdout, b"$(echo no); rm -rf /nonexistent");
    }

    #[test]
    fn guard_collects_output_and_bounds_waits() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo hello"]).stdout(Stdio::piped());
        let out = ChildGuard::spawn(cmd)
            .unwrap()
            .wait_timeout(Duration::from_secs(10))
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hello\n");

        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let err = ChildGuard::spawn(cmd)
            .unwrap()
            .wait_timeout(Duration::from_millis(50))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }

    #[test]
    fn dropping_the_guard_kills_and_reaps() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let guard = ChildGuard::spawn(cmd).unwrap();
        let pid = guard.id();
        drop(guard);
        // Reaped: the pid no longer names a process of ours (not even a zombie).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        let ours = stat.is_ok_and(|s| s.contains("(sleep)"));
        assert!(!ours, "sleep {pid} survived its guard");
    }
}
