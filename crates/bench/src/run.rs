//! Running a set of experiments: the checks before anything starts (privileges, tools),
//! the time estimate, pinning, each experiment in turn with `results.json` rewritten
//! after each (so an interrupted run keeps what it measured), and the report at the end.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::experiments::Experiment;
use crate::harness::{self, sysinfo, Ctx, Plan, Progress};
use crate::preflight;
use crate::results::{Results, SCHEMA_VERSION};

/// The sum of the experiments' estimates for `plan`.
pub fn estimate(plan: &Plan, exps: &[&'static dyn Experiment]) -> Duration {
    exps.iter().map(|e| e.estimate(plan)).sum()
}

/// Checks, before anything runs, that the run can happen: root's network privileges and
/// every tool the experiments name.
///
/// # Errors
/// One message naming everything that is missing and the package that brings it.
pub fn preflight(exps: &[&'static dyn Experiment]) -> io::Result<()> {
    let mut missing = Vec::new();
    if let Err(e) = preflight::require_net_admin() {
        missing.push(e.to_string());
    }
    let mut tools: Vec<&str> = exps
        .iter()
        .flat_map(|e| e.tools().iter().copied())
        .collect();
    tools.sort_unstable();
    tools.dedup();
    for t in tools {
        if let Err(e) = preflight::require_tool(t) {
            missing.push(e.to_string());
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "cannot run: {} (scripts/setup.sh installs the tools; run as root)",
            missing.join("; ")
        )))
    }
}

/// Runs `exps` in order under `plan`, writing `results.json` into `plan.out` after each.
/// Experiments that fail keep their error in the results; the run goes on.
///
/// # Errors
/// The output directory could not be written.
pub fn run(
    plan: &Plan,
    exps: &[&'static dyn Experiment],
    command: String,
    progress: &Progress,
) -> io::Result<Results> {
    std::fs::create_dir_all(&plan.out)?;
    let start = Instant::now();
    let mut meta = sysinfo::meta();
    meta.profile = plan.profile.name().into();
    meta.rounds = plan.rounds;
    meta.command = command;
    let mut results = Results {
        schema: SCHEMA_VERSION,
        meta,
        experiments: Vec::new(),
    };
    // Everything this thread starts from now on (ulnet's runtime and app threads, kernel
    // socket threads of the system under test) inherits the SUT core; load threads move
    // themselves to the load core.
    harness::pin_sut()?;
    for e in exps {
        let mut ctx = Ctx::new(plan, progress, e.name(), e.seed(), e.title());
        ctx.status("starting");
        let outcome = e.run(&mut ctx);
        let mut r = ctx.finish();
        if let Err(err) = outcome {
            progress.line(&format!("{:<15} FAILED: {err}", e.name()));
            r.errors.push(format!("experiment stopped: {err}"));
        }
        results.experiments.push(r);
        results.meta.elapsed_s = start.elapsed().as_secs_f64();
        write_json(&results, &plan.out.join("results.json"))?;
    }
    harness::unpin()?;
    Ok(results)
}

/// Writes `results` as pretty JSON to `path`.
///
/// # Errors
/// The file could not be written.
pub fn write_json(results: &Results, path: &PathBuf) -> io::Result<()> {
    let text = serde_json::to_string_pretty(results).map_err(io::Error::other)?;
    std::fs::write(path, text)
}
