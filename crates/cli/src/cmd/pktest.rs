//! `ulnet pktest FILE.pkt...`: runs packetdrill scripts against ulnet's TCP engine in
//! virtual time (see docs/pktest.md).

use std::path::PathBuf;

use ulnet_pktest::{run_file, to_json, ProfileKind, RunOptions, Summary};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scripts to run (packetdrill syntax).
    #[arg(required = true)]
    pub scripts: Vec<PathBuf>,
    /// Defaults the scripts assume: neutral (ulnet's own), linux, freebsd. Without it a
    /// script's `// pktest: profile=...` comment decides, else neutral.
    #[arg(long)]
    pub profile: Option<ProfileKind>,
    /// Let an outbound line match several consecutive segments (TSO super-segments),
    /// compare options ignoring order and padding, and skip lines the runner cannot honour
    /// (shell commands, Python blocks, unsupported calls), listing them.
    #[arg(long)]
    pub lenient: bool,
    /// Timing tolerance in microseconds (overrides the script's --tolerance_usecs).
    #[arg(long = "tolerance-usecs", alias = "tolerance_usecs")]
    pub tolerance_usecs: Option<u64>,
    /// Also check the TS ecr of outbound segments (packetdrill does not).
    #[arg(long)]
    pub ts_ecr: bool,
    /// Print one JSON document (every report and the summary) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the scripts; fails unless every one passed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let opts = RunOptions {
        profile: args.profile,
        lenient: args.lenient,
        tolerance_usecs: args.tolerance_usecs,
        check_ts_ecr: args.ts_ecr,
        ..RunOptions::default()
    };
    let reports: Vec<_> = args.scripts.iter().map(|p| run_file(p, &opts)).collect();
    let summary = Summary::of(&reports);
    if args.json {
        println!("{}", to_json(&reports));
    } else {
        for r in &reports {
            print!("{}", r.to_text());
        }
        println!("{}", summary.line());
    }
    if summary.all_passed() {
        Ok(())
    } else {
        anyhow::bail!(
            "{} of {} scripts did not pass",
            summary.scripts - summary.passed,
            summary.scripts
        )
    }
}
