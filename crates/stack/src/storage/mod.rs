//! Bounded storage: byte rings for socket buffers, item rings for packet queues, and the
//! stack-wide budget lazily allocated byte rings charge. Nothing here grows past the
//! bound given at creation; operations that do not fit are clipped or refused, never a
//! panic.

mod budget;
mod ring;
mod ring_buffer;

pub use budget::{MemBudget, MemLimits};
pub use ring::Ring;
pub use ring_buffer::{RingBuffer, MIN_STORAGE};
