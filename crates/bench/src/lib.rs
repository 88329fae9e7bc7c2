//! Testbed (network namespaces joined by veth pairs), CPU accounting and the seed
//! experiments that compare ulnet with the kernel.
//!
//! - [`testbed`]: build and remove test hosts; run, spawn and impair things inside them.
//! - [`exec`]: run programs (optionally in a namespace) with argument vectors, bounded
//!   waits and kill-on-drop guards.
//! - [`cpu`]: CPU time of this process, of children, and of the machine (softirq included).
//! - [`preflight`]: the tools and privileges the testbed needs, named when missing.
//! - feature `experiments` (what `ulnet bench` runs): [`harness`] (plan, recording
//!   context, alternation, CPU windows, pinning, progress), the seed experiments in
//!   `experiments`, raw [`results`], their [`summary`] statistics and the `report`
//!   (Markdown, HTML, CSV, JSON, SVG and PNG plots).
// `deny`, not `forbid`: the disk experiment's io_uring ring (experiments/disk.rs, module
// `ring`) is the one place allowed unsafe code, since io_uring's buffer registration and
// submissions hand the kernel raw pointers.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod cpu;
pub mod error;
pub mod exec;
#[cfg(feature = "experiments")]
pub mod experiments;
#[cfg(feature = "experiments")]
pub mod harness;
pub mod preflight;
#[cfg(feature = "experiments")]
pub mod report;
pub mod results;
#[cfg(feature = "experiments")]
pub mod run;
pub mod summary;
pub mod testbed;

pub use cpu::{CpuDelta, CpuSample, CpuTimes, SystemTimes};
pub use error::{Error, Result};
pub use exec::{netns_command, output_in, run_in, spawn_in, ChildGuard};
pub use testbed::{Builder, MacAddr, Side, SideId, Testbed, TestbedInfo};
