//! Runs scripts given on the command line (development helper; the CLI is `ulnet pktest`).
use ulnet_pktest::{run_file, RunOptions};

fn main() {
    let mut opts = RunOptions::default();
    let mut files = Vec::new();
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--lenient" => opts.lenient = true,
            "--linux" => opts.profile = Some(ulnet_pktest::ProfileKind::Linux),
            "--freebsd" => opts.profile = Some(ulnet_pktest::ProfileKind::Freebsd),
            _ => files.push(a),
        }
    }
    for f in files {
        print!("{}", run_file(std::path::Path::new(&f), &opts).to_text());
    }
}
