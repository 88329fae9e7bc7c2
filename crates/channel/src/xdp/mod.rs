//! AF_XDP channel with a flow-steering XDP program (in progress).

pub mod asm;
pub mod program;
pub mod steer;
