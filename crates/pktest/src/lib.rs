//! `ulnet pktest`: a packetdrill-compatible script runner that drives ulnet's TCP engine
//! directly, in virtual time: no TUN device, no root, fully deterministic.
//!
//! A script (packetdrill's language: timed packet lines, system calls, shell commands and
//! code blocks) is [parsed](parser::parse) into events and [run](runner::run_script)
//! against a fresh [`Tcp`](ulnet_stack::tcp::Tcp) engine configured by a
//! [profile](profile::Profile) (the defaults the script's platform has: Linux, FreeBSD, or
//! ulnet's own). The [report](report::ScriptReport) says pass, or names the first
//! mismatch with the expected and actual segment in packetdrill syntax and a hint whether
//! the difference is protocol behaviour or platform policy.
//!
//! What is modelled and what is not is listed in `docs/pktest.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod profile;
pub mod report;
pub mod runner;
mod segment;
mod syscall;

pub use parser::{parse, ParseError};
pub use profile::{Profile, ProfileKind};
pub use report::{to_json, FailureKind, ScriptReport, Status, Summary};
pub use runner::{run_file, run_script, run_source, RunOptions};
