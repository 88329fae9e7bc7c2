//! Links `ulnet-stack` into a `#![no_std]` crate (see Cargo.toml for why this proves the
//! stack does not need std). Uses a little of the engine so the link is real.
#![no_std]
#![forbid(unsafe_code)]

use ulnet_stack::tcp::{Tcp, TcpConfig};

/// Builds an engine from a fixed secret: what an embedded user would do at start-up.
pub fn engine() -> Tcp {
    Tcp::new(TcpConfig::default(), [7; 16])
}

/// A `no_std` program supplies its own panic handler; with std in the graph this
/// definition collides with std's (E0152).
#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
