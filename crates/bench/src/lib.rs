//! Testbed (network namespaces joined by veth pairs), CPU accounting and the seed
//! experiments that compare ulnet with the kernel.
#![forbid(unsafe_code)]
