//! Runs the project's packetdrill scripts (`tests/pkt/*.pkt`) through the runner.
//!
//! Every script must pass, except those listed in `tests/pkt/KNOWN_FAILURES` with the
//! stack bug that makes them fail; a listed script that starts passing fails this test,
//! so the list stays honest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ulnet_pktest::{run_file, RunOptions, Status};

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pkt")
}

/// `name.pkt: why` lines; `#` comments.
fn known_failures(dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("KNOWN_FAILURES")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, why) = l
                .split_once(':')
                .expect("KNOWN_FAILURES lines are `name.pkt: bug`");
            assert!(
                !why.trim().is_empty(),
                "{name}: a known failure needs the bug written down"
            );
            (name.trim().to_string(), why.trim().to_string())
        })
        .collect()
}

#[test]
fn project_scripts() {
    let dir = suite_dir();
    let known = known_failures(&dir);
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/pkt exists")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pkt"))
        .collect();
    scripts.sort();
    assert!(
        scripts.len() >= 12,
        "the suite has {} scripts",
        scripts.len()
    );
    for name in known.keys() {
        assert!(
            dir.join(name).exists(),
            "KNOWN_FAILURES lists {name}, which does not exist"
        );
    }
    let mut problems = Vec::new();
    for path in &scripts {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let report = run_file(path, &RunOptions::default());
        print!("{}", report.to_text());
        match (known.get(&name), report.status) {
            (None, Status::Pass) => {}
            (None, _) => problems.push(format!("{name} failed:\n{}", report.to_text())),
            (Some(_), Status::Fail) => {}
            (Some(why), Status::Pass) => problems.push(format!(
                "{name} is listed in KNOWN_FAILURES ({why}) but now passes: remove it from the list"
            )),
            (Some(_), Status::Error) => problems.push(format!(
                "{name} (known failure) could not run:\n{}",
                report.to_text()
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
