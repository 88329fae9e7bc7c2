//! A simulated wire in virtual time, with seeded, reproducible impairments.
//!
//! Owns: [`Wire`] (the virtual clock, the links and the frames in flight), its
//! [`Endpoint`]s (each a [`Channel`](crate::Channel)), and the per-direction
//! [`LinkConfig`] and [`LinkStats`]. In: frames an endpoint flushes; out: the same
//! frames, lost, duplicated, corrupted, delayed, reordered, rate-limited or dropped at a
//! full queue as configured, handed to the other endpoints once virtual time reaches
//! their delivery time.
//!
//! Invariants: nothing here reads a clock, so a run is a pure function of the seed and
//! the traffic (same seed, same sends, same virtual times: the same deliveries, bit for
//! bit, on every platform); every link holds at most its in-flight limit of frames, and
//! spare buffers are recycled through a bounded free list, so memory stays bounded
//! whatever the senders do.
//!
//! A harness runs many seconds of virtual time in milliseconds of real time by jumping
//! straight to the next thing that happens:
//!
//! ```text
//! loop {
//!     let t = min(stack.poll_at(), wire.next_event_micros());  // None = idle
//!     wire.advance_to_micros(t);
//!     endpoint.rx_batch(..); stack.poll(wire.now_micros()); endpoint.tx().flush();
//! }
//! ```

mod config;
mod endpoint;
mod link;
mod wire;

#[cfg(test)]
mod tests;

pub use config::{LinkConfig, DEFAULT_IN_FLIGHT_LIMIT};
pub use endpoint::Endpoint;
pub use link::LinkStats;
pub use wire::{Wire, DEFAULT_BATCH_COUNT, DEFAULT_MTU, DEFAULT_TX_QUEUE_COUNT};
