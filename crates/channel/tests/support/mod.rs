//! Shared plumbing for the channel crate's kernel interop tests (`packet`, `tap`, `xdp`):
//! namespaces and veth pairs ([`net`]) and hand-built UDP traffic ([`udp`]).
//!
//! Missing privileges or tools make the helpers panic with a message naming what is
//! missing: the tests fail, they never pass by skipping.
// Each test binary uses a different subset.
#![allow(dead_code)]

pub mod net;
pub mod udp;
