//! The bytes a simulated connection sends: a seeded pseudo-random stream addressed by
//! offset (so any stretch can be produced on its own), and the hex form of digests.

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective mixer, so
/// distinct counters give distinct, well-spread words.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// One connection's payload stream: byte `i` is byte `i % 8` of word `i / 8`, and word
/// `w` is a mix of the stream key and `w`.
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    key: u64,
}

impl Stream {
    /// The stream of connection `index` in a run seeded with `seed`.
    pub fn new(seed: u64, index: u64) -> Stream {
        Stream {
            key: mix(seed ^ mix(index.wrapping_add(1).wrapping_mul(GOLDEN))),
        }
    }

    fn word(&self, w: u64) -> [u8; 8] {
        mix(self.key.wrapping_add(w.wrapping_mul(GOLDEN))).to_le_bytes()
    }

    /// Writes the stream's bytes from `offset` on into `buf`.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let mut pos = 0;
        let mut at = offset;
        // An unaligned head, then whole words, then a tail.
        while pos < buf.len() {
            let w = self.word(at / 8);
            let skip = (at % 8) as usize;
            let n = (8 - skip).min(buf.len() - pos);
            buf[pos..pos + n].copy_from_slice(&w[skip..skip + n]);
            pos += n;
            at += n as u64;
        }
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_split_gives_the_same_bytes() {
        let s = Stream::new(7, 3);
        let mut whole = vec![0u8; 1000];
        s.fill(0, &mut whole);
        for cut in [1usize, 3, 8, 13, 500, 999] {
            let mut a = vec![0u8; cut];
            let mut b = vec![0u8; 1000 - cut];
            s.fill(0, &mut a);
            s.fill(cut as u64, &mut b);
            assert_eq!([a, b].concat(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn streams_differ_by_seed_and_index() {
        let mut x = [0u8; 32];
        let mut y = [0u8; 32];
        let mut z = [0u8; 32];
        Stream::new(1, 0).fill(0, &mut x);
        Stream::new(1, 1).fill(0, &mut y);
        Stream::new(2, 0).fill(0, &mut z);
        assert_ne!(x, y);
        assert_ne!(x, z);
        // Not trivially periodic: all 256 byte values show up over a few KB.
        let mut seen = [false; 256];
        let mut buf = vec![0u8; 4096];
        Stream::new(1, 0).fill(0, &mut buf);
        buf.iter().for_each(|&b| seen[usize::from(b)] = true);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn hex_digits() {
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
    }
}
