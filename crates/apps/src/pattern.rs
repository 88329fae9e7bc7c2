//! The deterministic byte pattern that `http /bytes/N`, `chargen` and the bulk client
//! send, and that `discard` and the bulk client check: byte `i` of a stream is
//! `BLOCK[i mod PERIOD]`, with the block filled once by a xorshift generator.
//!
//! The period is a prime (65 521), so no power-of-two slip (a lost or repeated window, a
//! buffer-sized copy bug) can line the stream up with itself again. Sending is a slice of
//! one precomputed block: no per-byte work.

use std::sync::OnceLock;

/// The pattern's period, in bytes.
pub const PERIOD: usize = 65_521;
/// The longest slice [`slice()`] hands out.
pub const MAX_CHUNK: usize = 64 * 1024;

fn block() -> &'static [u8] {
    static BLOCK: OnceLock<Box<[u8]>> = OnceLock::new();
    BLOCK.get_or_init(|| {
        let mut b = vec![0u8; PERIOD + MAX_CHUNK];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for v in b.iter_mut().take(PERIOD) {
            // xorshift64 (Marsaglia 2003).
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = (x >> 32) as u8;
        }
        // The tail repeats the pattern so any slice of up to MAX_CHUNK is contiguous.
        // MAX_CHUNK exceeds PERIOD, so it wraps more than once: copy byte by byte from
        // the period, not one block move (a move would copy the unfilled tail's zeros).
        for i in PERIOD..b.len() {
            b[i] = b[i - PERIOD];
        }
        b.into_boxed_slice()
    })
}

/// The pattern bytes at stream offsets `offset..offset + len` (`len` is capped at
/// [`MAX_CHUNK`]).
pub fn slice(offset: u64, len: usize) -> &'static [u8] {
    let start = (offset % PERIOD as u64) as usize;
    &block()[start..start + len.min(MAX_CHUNK)]
}

/// Writes the pattern for stream offsets `offset..offset + out.len()` into `out`.
pub fn fill(mut offset: u64, out: &mut [u8]) {
    for chunk in out.chunks_mut(MAX_CHUNK) {
        chunk.copy_from_slice(slice(offset, chunk.len()));
        offset += chunk.len() as u64;
    }
}

/// Whether `data` is the pattern at stream offset `offset`.
pub fn matches(mut offset: u64, data: &[u8]) -> bool {
    data.chunks(MAX_CHUNK).all(|chunk| {
        let ok = chunk == slice(offset, chunk.len());
        offset += chunk.len() as u64;
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(offset: u64, len: usize) -> Vec<u8> {
        let b = block();
        (0..len as u64)
            .map(|i| b[((offset + i) % PERIOD as u64) as usize])
            .collect()
    }

    #[test]
    fn every_slice_start_gives_the_cyclic_pattern() {
        // Regression: a slice starting within MAX_CHUNK - PERIOD bytes of the period's
        // end once read zeros from an unfilled tail (seen as 2-15 zero bytes in 100 MB
        // HTTP bodies).
        for start in (0..40).chain(PERIOD as u64 - 40..PERIOD as u64 + 40) {
            assert_eq!(
                slice(start, MAX_CHUNK),
                &naive(start, MAX_CHUNK)[..],
                "{start}"
            );
        }
        assert!(block()[PERIOD..].iter().any(|&x| x != 0));
    }

    #[test]
    fn slices_wrap_around_the_period_consistently() {
        let mut whole = vec![0u8; 3 * PERIOD + 17];
        fill(0, &mut whole);
        assert_eq!(whole[..PERIOD], whole[PERIOD..2 * PERIOD]);
        assert!(matches(0, &whole));
        assert!(matches(12_345, &whole[12_345..]));
        assert!(!matches(1, &whole[..100]));
        assert_eq!(slice(PERIOD as u64 - 3, 10), &whole[PERIOD - 3..PERIOD + 7]);
        assert_eq!(slice(0, 1 << 20).len(), MAX_CHUNK);
        // Not trivially periodic at powers of two.
        assert_ne!(whole[..64], whole[65_536..65_536 + 64]);
    }
}
