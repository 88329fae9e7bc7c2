//! Stable-toolchain smoke fuzzing: drives every target in `ulnet_fuzz` with mutated seed
//! frames and random bytes from a seeded generator, bounded in iterations and time.
//!
//! Usage: `smoke [--iterations N] [--seconds S] [--seed X] [--write-seeds DIR] [TARGET...]`
//! A panic (a found bug) aborts the run with the failing input printed in hex, so it
//! can be replayed with `smoke --replay HEX TARGET`.

use std::panic;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ulnet_fuzz::{layer_for, mutate, seed_frames, Rng, Target, TARGETS};

struct Args {
    iterations: u64,
    seconds: u64,
    seed: u64,
    write_seeds: Option<String>,
    replay: Option<String>,
    targets: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        iterations: 200_000,
        seconds: 30,
        seed: 1,
        write_seeds: None,
        replay: None,
        targets: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--iterations" => {
                a.iterations = value("--iterations")?.parse().map_err(|e| format!("{e}"))?
            }
            "--seconds" => a.seconds = value("--seconds")?.parse().map_err(|e| format!("{e}"))?,
            "--seed" => a.seed = value("--seed")?.parse().map_err(|e| format!("{e}"))?,
            "--write-seeds" => a.write_seeds = Some(value("--write-seeds")?),
            "--replay" => a.replay = Some(value("--replay")?),
            "-h" | "--help" => {
                return Err("usage: smoke [--iterations N] [--seconds S] [--seed X] \
                            [--write-seeds DIR] [--replay HEX] [TARGET...]"
                    .into())
            }
            name if TARGETS.iter().any(|(n, _)| *n == name) => a.targets.push(name.into()),
            other => return Err(format!("unknown argument or target: {other}")),
        }
    }
    if a.targets.is_empty() {
        a.targets = TARGETS.iter().map(|(n, _)| (*n).to_string()).collect();
    }
    Ok(a)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("odd hex length".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let seeds = seed_frames();
    let targets: Vec<(&str, Target)> = TARGETS
        .iter()
        .filter(|(n, _)| args.targets.iter().any(|t| t == n))
        .copied()
        .collect();

    if let Some(dir) = &args.write_seeds {
        for (name, _) in &targets {
            let d = format!("{dir}/{name}");
            if let Err(e) = std::fs::create_dir_all(&d) {
                eprintln!("create {d}: {e}");
                return ExitCode::FAILURE;
            }
            for (i, frame) in seeds.iter().enumerate() {
                let path = format!("{d}/seed-{i}");
                if let Err(e) = std::fs::write(&path, layer_for(name, frame)) {
                    eprintln!("write {path}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        println!("wrote {} seeds per target under {dir}", seeds.len());
        return ExitCode::SUCCESS;
    }

    if let Some(h) = &args.replay {
        let input = match unhex(h) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("--replay: {e}");
                return ExitCode::from(2);
            }
        };
        for (name, target) in &targets {
            println!("replaying {} bytes on {name}", input.len());
            target(&input);
        }
        println!("no panic");
        return ExitCode::SUCCESS;
    }

    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut rng = Rng::new(args.seed);
    let mut runs = vec![0u64; targets.len()];
    let mut done = 0u64;
    while done < args.iterations && Instant::now() < deadline {
        // Check the clock every 1024 inputs, not every input.
        for _ in 0..1024 {
            if done == args.iterations {
                break;
            }
            let t = rng.below(targets.len());
            let (name, target) = targets[t];
            let mut input = if rng.below(8) == 0 {
                (0..rng.below(128)).map(|_| rng.next_u64() as u8).collect()
            } else {
                layer_for(name, &seeds[rng.below(seeds.len())]).to_vec()
            };
            mutate(&mut rng, &mut input);
            let result = panic::catch_unwind(|| target(&input));
            if result.is_err() {
                eprintln!(
                    "FAILED: target {name} panicked on input (replay with \
                     `smoke --replay {} {name}`)",
                    hex(&input)
                );
                return ExitCode::FAILURE;
            }
            runs[t] += 1;
            done += 1;
        }
    }
    for ((name, _), n) in targets.iter().zip(&runs) {
        println!("{name}: {n} inputs");
    }
    println!("smoke: {done} inputs, seed {}, no panic", args.seed);
    ExitCode::SUCCESS
}
