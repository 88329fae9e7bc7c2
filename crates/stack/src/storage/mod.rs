//! Bounded storage the stack allocates once and reuses: byte rings for socket buffers,
//! item rings for packet queues. Nothing here grows after creation; operations that do
//! not fit are clipped or refused, never a panic.

mod ring;
mod ring_buffer;

pub use ring::Ring;
pub use ring_buffer::RingBuffer;
