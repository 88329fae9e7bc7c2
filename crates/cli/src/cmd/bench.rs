//! `ulnet bench`: the seed experiments, ulnet against the kernel in one run, with a report.
//!
//! ```text
//! ulnet bench [EXPERIMENT...] [--quick|--full] [--rounds N] [--out DIR] [--backend B]... [--ipv6]
//!             [--case ID]... [--system ID]...
//! ulnet bench list
//! ulnet bench report DIR      # rewrite DIR's report from its results.json
//! ```

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use ulnet::runtime::Backend;
use ulnet_bench::experiments::{self, Experiment};
use ulnet_bench::harness::{sysinfo, Plan, Profile, Progress};
use ulnet_bench::results::Results;
use ulnet_bench::{report, run};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Run `ulnet bench list` for the experiments and the seeds they re-run.")]
pub struct Args {
    /// Experiments to run (all when none is named); `list` lists them; `report DIR`
    /// rewrites a run's report from its results.json.
    pub experiments: Vec<String>,
    /// Scaled-down sizes: the whole run in about 10 minutes on a 2-core machine.
    #[arg(long, conflicts_with_all = ["full", "smoke"])]
    pub quick: bool,
    /// Every variant and longer windows: the whole run in under 30 minutes.
    #[arg(long, conflicts_with = "smoke")]
    pub full: bool,
    /// Seconds per experiment, to prove the harness works (CI); figures mean nothing.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Rounds per system (each round runs every system once, alternating); at least 3
    /// for figures worth reading.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Output directory (default bench-results/<timestamp>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Only these ulnet backends where an experiment compares backends (repeatable).
    #[arg(long = "backend")]
    pub backends: Vec<Backend>,
    /// Over IPv6 (the testbed's 2001:2:0:<slot>::/64) instead of IPv4, for ulnet and the
    /// kernel alike: hurd-tcp, latency and udp-echo; the other experiments refuse it.
    #[arg(long)]
    pub ipv6: bool,
    /// Only this case of the experiments run, by id (repeatable; the ids are in
    /// results.json and in the message a name that matches nothing gets): e.g. `rx-9000`.
    #[arg(long = "case", value_name = "ID")]
    pub cases: Vec<String>,
    /// Only this system, by id (repeatable): e.g. `kernel-default`, `ulnet-xdp`.
    #[arg(long = "system", value_name = "ID")]
    pub systems: Vec<String>,
}

fn profile(a: &Args) -> Profile {
    if a.smoke {
        Profile::Smoke
    } else if a.quick {
        Profile::Quick
    } else if a.full {
        Profile::Full
    } else {
        Profile::Default
    }
}

fn list() {
    println!("{:<16} {:<5} what", "experiment", "seed");
    for e in experiments::all() {
        println!("{:<16} {:<5} {}", e.name(), e.seed(), e.title());
    }
}

fn rewrite_report(dir: &str) -> anyhow::Result<()> {
    let dir = PathBuf::from(dir);
    let text = std::fs::read_to_string(dir.join("results.json"))
        .with_context(|| format!("reading {}", dir.join("results.json").display()))?;
    let results: Results = serde_json::from_str(&text).context("parsing results.json")?;
    let files = report::write(&results, &dir)?;
    print!("{}", report::terminal(&results));
    println!(
        "\nwrote {} files; report: {}",
        files.len(),
        dir.join("report.html").display()
    );
    Ok(())
}

/// Removes the testbeds this process made, on Ctrl-C (the guards' Drop does not run when
/// the process is killed by the signal's default action).
fn install_interrupt_cleanup() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        let tag = format!("-{}-", std::process::id());
        if let Ok(names) = ulnet_bench::testbed::list() {
            for n in names.iter().filter(|n| n.contains(&tag)) {
                let _ = ulnet_bench::testbed::down(n);
            }
        }
        eprintln!("\nulnet bench: interrupted; this run's testbeds removed");
        std::process::exit(130);
    })
    .context("installing the SIGINT/SIGTERM handler")
}

/// A `--case` or `--system` that measured nothing (a typo, or an id of an experiment not
/// run) is said, with the ids the experiments run have.
fn warn_unmatched(plan: &Plan, results: &Results) {
    let exps = &results.experiments;
    let measured = |f: &dyn Fn(&ulnet_bench::results::Measurement) -> bool| {
        exps.iter().flat_map(|e| e.measurements.iter()).any(f)
    };
    let ids = |of: &dyn Fn(&ulnet_bench::results::ExperimentResult) -> Vec<&str>| {
        exps.iter()
            .flat_map(of)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(", ")
    };
    for c in &plan.cases {
        if !measured(&|m| &m.case == c) {
            let here = ids(&|e| e.cases.iter().map(|c| c.id.as_str()).collect());
            eprintln!("ulnet bench: --case {c} measured nothing; cases here: {here}");
        }
    }
    for s in &plan.systems {
        if !measured(&|m| &m.system == s) {
            let here = ids(&|e| e.systems.iter().map(|s| s.id.as_str()).collect());
            eprintln!("ulnet bench: --system {s} measured nothing; systems here: {here}");
        }
    }
}

/// Runs `ulnet bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.experiments.first().map(String::as_str) {
        Some("list") => {
            list();
            return Ok(());
        }
        Some("report") => {
            let Some(dir) = args.experiments.get(1) else {
                bail!("`ulnet bench report DIR`: name the run's directory");
            };
            return rewrite_report(dir);
        }
        _ => {}
    }
    let chosen: Vec<&'static dyn Experiment> = if args.experiments.is_empty() {
        experiments::all()
            .into_iter()
            .filter(|e| !args.ipv6 || e.supports_ipv6())
            .collect()
    } else {
        let mut v = Vec::new();
        for name in &args.experiments {
            match experiments::find(name) {
                Some(e) => v.push(e),
                None => bail!(
                    "no experiment `{name}`; there are: {}",
                    experiments::all()
                        .iter()
                        .map(|e| e.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        v
    };
    if args.ipv6 {
        let v4_only: Vec<&str> = chosen
            .iter()
            .filter(|e| !e.supports_ipv6())
            .map(|e| e.name())
            .collect();
        if !v4_only.is_empty() {
            bail!(
                "--ipv6: {} run over IPv4 only; over IPv6: {}",
                v4_only.join(", "),
                experiments::all()
                    .iter()
                    .filter(|e| e.supports_ipv6())
                    .map(|e| e.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let profile = profile(&args);
    let rounds = args.rounds.unwrap_or(match profile {
        Profile::Smoke => 1,
        _ => 3,
    });
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(sysinfo::timestamp_dir()));
    let plan = Plan {
        profile,
        rounds,
        backends: args.backends.clone(),
        out: out.clone(),
        ipv6: args.ipv6,
        cases: args.cases.clone(),
        systems: args.systems.clone(),
    };
    run::preflight(&chosen)?;
    install_interrupt_cleanup()?;
    let estimate = run::estimate(&plan, &chosen);
    println!(
        "ulnet bench: {} experiment{} ({}), profile {profile}, {rounds} round{} per system; about {} min {} s. Output: {}",
        chosen.len(),
        if chosen.len() == 1 { "" } else { "s" },
        chosen.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
        if rounds == 1 { "" } else { "s" },
        estimate.as_secs() / 60,
        estimate.as_secs() % 60,
        out.display()
    );
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let progress = Progress::new(estimate);
    let results = run::run(&plan, &chosen, command, &progress)?;
    progress.finish();
    let files = report::write(&results, &out)?;
    print!("{}", report::terminal(&results));
    warn_unmatched(&plan, &results);
    println!(
        "\nulnet bench: done in {:.0} s; {} files in {}; open {}",
        results.meta.elapsed_s,
        files.len() + 1,
        out.display(),
        out.join("report.html").display()
    );
    let failed: Vec<&str> = results
        .experiments
        .iter()
        .filter(|r| !r.errors.is_empty())
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "measurements failed in: {} (see the report)",
            failed.join(", ")
        );
    }
    Ok(())
}
