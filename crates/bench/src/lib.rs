//! Testbed (network namespaces joined by veth pairs), CPU accounting and the seed
//! experiments that compare ulnet with the kernel.
//!
//! - [`testbed`]: build and remove test hosts; run, spawn and impair things inside them.
//! - [`exec`]: run programs (optionally in a namespace) with argument vectors, bounded
//!   waits and kill-on-drop guards.
//! - [`cpu`]: CPU time of this process, of children, and of the machine (softirq included).
//! - [`preflight`]: the tools and privileges the testbed needs, named when missing.
//! - `scenarios` (feature `scenarios`): measurements of ulnet's data path against the
//!   raw channel and the kernel.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cpu;
pub mod error;
pub mod exec;
pub mod preflight;
#[cfg(feature = "scenarios")]
pub mod scenarios;
pub mod testbed;

pub use cpu::{CpuDelta, CpuSample, CpuTimes, SystemTimes};
pub use error::{Error, Result};
pub use exec::{netns_command, output_in, run_in, spawn_in, ChildGuard};
pub use testbed::{Builder, MacAddr, Side, SideId, Testbed, TestbedInfo};
