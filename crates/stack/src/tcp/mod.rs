//! TCP: a complete RFC 9293 engine, sans-I/O.
//!
//! Read first: RFC 9293 (the protocol), RFC 7323 (window scale, timestamps, PAWS),
//! RFC 2018 and 2883 (SACK, D-SACK), RFC 6298 (retransmission timer), RFC 5681 and 6582
//! (congestion control, NewReno), RFC 6675 (SACK loss recovery), RFC 9438 (CUBIC),
//! RFC 5961 (blind in-window attacks), RFC 6528 (ISNs), RFC 1122 §4.2 (host requirements).

pub mod congestion;
pub mod isn;
pub mod reassembly;
pub mod rtt;
pub mod sack;
