use super::*;
use proptest::prelude::*;

const MSS: usize = 100;
/// Close to 2^32 so most tests cross the wrap.
const BASE: u32 = u32::MAX - 250;

fn sq(off: u32) -> SeqNumber {
    SeqNumber(BASE).add(off)
}

fn r(a: u32, b: u32) -> SeqRange {
    (sq(a), sq(b))
}

fn ranges(sb: &Scoreboard) -> Vec<SeqRange> {
    sb.ranges().collect()
}

#[test]
fn update_merges_and_counts_new_bytes_across_wrap() {
    let mut sb = Scoreboard::new(8);
    let una = sq(0);
    let u = sb.update(una, &[r(200, 300)]);
    assert_eq!(
        u,
        SackUpdate {
            newly_sacked_bytes: 100,
            dsack: false
        }
    );
    let u = sb.update(una, &[r(400, 500), r(200, 300)]);
    assert_eq!(u.newly_sacked_bytes, 100);
    let u = sb.update(una, &[r(250, 450)]);
    assert_eq!(u.newly_sacked_bytes, 100);
    assert_eq!(ranges(&sb), vec![r(200, 500)]);
    assert_eq!(sb.sacked_bytes(), 300);
    assert_eq!(sb.highest_sacked(), Some(sq(500)));
    // The wrap point is inside the range.
    assert!(sq(200).0 > sq(500).0);
    assert!(sb.is_sacked(sq(260)) && sb.is_sacked(sq(499)));
    assert!(!sb.is_sacked(sq(500)) && !sb.is_sacked(sq(199)));
    // The cumulative ACK moves into the range: it is trimmed, not counted as new.
    let u = sb.update(sq(300), &[]);
    assert_eq!(u.newly_sacked_bytes, 0);
    assert_eq!(ranges(&sb), vec![r(300, 500)]);
    sb.update(sq(600), &[]);
    assert!(sb.is_empty());
}

#[test]
fn dsack_rfc2883_section4() {
    let mut sb = Scoreboard::new(8);
    // First block below the cumulative ACK.
    let u = sb.update(sq(500), &[r(100, 200)]);
    assert!(u.dsack);
    assert!(sb.is_empty());
    // First block inside the second: reported duplicate of out-of-order data.
    let u = sb.update(sq(500), &[r(650, 700), r(600, 800)]);
    assert!(u.dsack);
    assert_eq!(u.newly_sacked_bytes, 200);
    assert_eq!(ranges(&sb), vec![r(600, 800)]);
    // Equal blocks count as "inside".
    let u = sb.update(sq(500), &[r(600, 800), r(600, 800)]);
    assert!(u.dsack && u.newly_sacked_bytes == 0);
    // Ordinary SACK.
    let u = sb.update(sq(500), &[r(900, 1000), r(600, 800)]);
    assert!(!u.dsack);
}

#[test]
fn hostile_blocks_are_ignored() {
    let mut sb = Scoreboard::new(8);
    let una = sq(0);
    let u = sb.update(una, &[(sq(300), sq(200))]);
    assert_eq!(u.newly_sacked_bytes, 0);
    sb.update(una, &[(sq(10), sq(10)), (sq(0), sq(0) + (1 << 30) + 1)]);
    assert!(sb.is_empty());
    // Beyond SND.NXT.
    let u = sb.update_checked(una, sq(1000), &[r(900, 1100), r(100, 200)]);
    assert_eq!(u.newly_sacked_bytes, 100);
    assert_eq!(ranges(&sb), vec![r(100, 200)]);
}

#[test]
fn bounded_keeps_lowest_ranges() {
    let mut sb = Scoreboard::new(2);
    let una = sq(0);
    sb.update(una, &[r(500, 600)]);
    sb.update(una, &[r(300, 400)]);
    sb.update(una, &[r(100, 200)]);
    assert_eq!(ranges(&sb), vec![r(100, 200), r(300, 400)]);
    let u = sb.update(una, &[r(700, 800)]);
    assert_eq!(u.newly_sacked_bytes, 0);
    assert_eq!(ranges(&sb), vec![r(100, 200), r(300, 400)]);
    let mut z = Scoreboard::new(0);
    z.update(una, &[r(1, 2)]);
    assert!(z.is_empty());
}

#[test]
fn is_lost_rfc6675() {
    let mut sb = Scoreboard::new(8);
    let una = sq(0);
    // Three discontiguous small SACKed ranges above 0.
    sb.update(una, &[r(100, 110), r(200, 210), r(300, 310)]);
    assert!(sb.is_lost(sq(0), MSS, 3));
    assert!(!sb.is_lost(sq(150), MSS, 3));
    // Bytes: more than 2 * MSS SACKed above.
    let mut sb = Scoreboard::new(8);
    sb.update(una, &[r(100, 301)]);
    assert!(sb.is_lost(sq(0), MSS, 3));
    assert!(!sb.is_lost(sq(100), MSS, 3));
    let mut sb = Scoreboard::new(8);
    sb.update(una, &[r(100, 300)]);
    assert!(!sb.is_lost(sq(0), MSS, 3));
}

#[test]
fn pipe_and_next_seg() {
    // Segments of 100 bytes 0..1000 sent; 100..200 lost, 300..400 lost; the rest SACKed
    // up to 800; 800..1000 in flight.
    let mut sb = Scoreboard::new(8);
    let una = sq(0);
    let nxt = sq(1000);
    sb.update(una, &[r(200, 300), r(400, 800)]);
    // Holes: 0..200 (lost: 500 bytes SACKed above), 300..400 (lost: 400 above),
    // 800..1000 (not lost).
    assert_eq!(sb.pipe(una, nxt, una, MSS), 200);
    // Rule 1: the first lost hole.
    assert_eq!(
        sb.next_seg(una, nxt, una, MSS, 0),
        Some(NextSeg::Retransmit {
            start: sq(0),
            end: sq(100)
        })
    );
    // After retransmitting 0..200, the next lost byte is 300.
    assert_eq!(
        sb.next_seg(una, nxt, sq(200), MSS, 5000),
        Some(NextSeg::Retransmit {
            start: sq(300),
            end: sq(400)
        })
    );
    // Retransmitted bytes count twice in the pipe.
    assert_eq!(sb.pipe(una, nxt, sq(200), MSS), 400);
    // Rule 2: nothing lost left, new data allowed.
    assert_eq!(
        sb.next_seg(una, nxt, sq(400), MSS, 5000),
        Some(NextSeg::NewData {
            start: nxt,
            end: sq(1100)
        })
    );
    assert_eq!(
        sb.next_seg(una, nxt, sq(400), MSS, 30),
        Some(NextSeg::NewData {
            start: nxt,
            end: sq(1030)
        })
    );
    // Nothing: holes below the highest SACK all retransmitted.
    assert_eq!(sb.next_seg(una, nxt, sq(400), MSS, 0), None);
    // Rule 3: a hole that is not lost (only one small SACK above it).
    let mut sb = Scoreboard::new(8);
    sb.update(una, &[r(500, 510)]);
    assert!(!sb.is_lost(sq(0), MSS, 3));
    assert_eq!(
        sb.next_seg(una, nxt, una, MSS, 0),
        Some(NextSeg::Retransmit {
            start: sq(0),
            end: sq(100)
        })
    );
    // Rescue: the last MSS ending at the highest un-SACKed byte.
    assert_eq!(sb.rescue_seg(una, nxt, MSS), Some(r(900, 1000)));
    assert_eq!(sb.rescue_seg(una, sq(50), MSS), Some(r(0, 50)));
    assert_eq!(sb.rescue_seg(una, una, MSS), None);
    assert_eq!(Scoreboard::new(4).next_seg(una, nxt, una, MSS, 10), None);
}

#[test]
fn sack_blocks_rfc2018_order() {
    let rcv = SeqNumber(u32::MAX - 50);
    let ranges = [
        (100usize, 200usize),
        (300, 400),
        (500, 600),
        (700, 800),
        (900, 1000),
    ];
    let at = |o: u32| rcv + o;
    let mut out = [(SeqNumber(0), SeqNumber(0)); 4];
    // The newest segment landed in 300..400: that block first, then highest first.
    let n = sack_blocks(ranges, rcv, Some((at(350), at(400))), None, 4, &mut out);
    assert_eq!(n, 4);
    assert_eq!(
        out,
        [
            (at(300), at(400)),
            (at(900), at(1000)),
            (at(700), at(800)),
            (at(500), at(600))
        ]
    );
    // Three beside timestamps.
    let n = sack_blocks(ranges, rcv, Some((at(950), at(1000))), None, 3, &mut out);
    assert_eq!(
        &out[..n],
        &[(at(900), at(1000)), (at(700), at(800)), (at(500), at(600))]
    );
    // D-SACK of a duplicate below RCV.NXT comes first.
    let d = (rcv - 100, rcv - 50);
    let n = sack_blocks(ranges, rcv, None, Some(d), 3, &mut out);
    assert_eq!(&out[..n], &[d, (at(900), at(1000)), (at(700), at(800))]);
    // D-SACK inside an out-of-order range: that range follows, even if equal.
    let d = (at(500), at(600));
    let n = sack_blocks(ranges, rcv, Some((at(500), at(600))), Some(d), 4, &mut out);
    assert_eq!(
        &out[..n],
        &[
            d,
            (at(500), at(600)),
            (at(900), at(1000)),
            (at(700), at(800))
        ]
    );
    // Nothing to report; zero limit.
    assert_eq!(sack_blocks([], rcv, None, None, 4, &mut out), 0);
    assert_eq!(sack_blocks(ranges, rcv, None, Some(d), 0, &mut out), 0);
}

/// Offsets 0..SPACE from BASE; the model is a bitmap of SACKed offsets.
const SPACE: u32 = 400;

fn model_ranges(bits: &[bool]) -> Vec<SeqRange> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            let s = i;
            while i < bits.len() && bits[i] {
                i += 1;
            }
            out.push(r(s as u32, i as u32));
        } else {
            i += 1;
        }
    }
    out
}

/// RFC 6675 IsLost, straight from the text over the bitmap (ranges as the
/// discontiguous-sequence unit, as the scoreboard documents).
fn model_is_lost(bits: &[bool], seq: usize, dupthresh: usize) -> bool {
    let above = &bits[(seq + 1).min(bits.len())..];
    let bytes = above.iter().filter(|&&b| b).count();
    let runs = above
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b && (i == 0 || !above[i - 1]))
        .count();
    runs >= dupthresh || bytes > (dupthresh - 1) * MSS
}

/// RFC 6675 SetPipe octet by octet.
fn model_pipe(bits: &[bool], una: usize, nxt: usize, high_rxt: usize) -> usize {
    (una..nxt)
        .filter(|&i| !bits[i])
        .map(|i| usize::from(!model_is_lost(bits, i, DUP_THRESH)) + usize::from(i < high_rxt))
        .sum()
}

proptest! {
    #[test]
    fn scoreboard_matches_bitmap(
        steps in proptest::collection::vec(
            (0u32..40, proptest::collection::vec((0u32..SPACE, 1u32..120), 0..4)),
            1..20,
        ),
        probe in 0u32..SPACE,
        high_rxt in 0u32..SPACE,
    ) {
        let mut sb = Scoreboard::new(64);
        let mut bits = vec![false; SPACE as usize + 120];
        let mut una = 0u32;
        let nxt = SPACE + 120;
        for (advance, blocks) in steps {
            una = (una + advance).min(SPACE);
            let blocks: Vec<SeqRange> = blocks.iter().map(|&(s, l)| r(s, s + l)).collect();
            let u = sb.update(sq(una), &blocks);
            for b in bits[..una as usize].iter_mut() {
                *b = false;
            }
            let dsack = blocks.first().is_some_and(|f| {
                f.0 < sq(una) || blocks.get(1).is_some_and(|s| f.0 >= s.0 && f.1 <= s.1)
            });
            prop_assert_eq!(u.dsack, dsack);
            let before = bits.iter().filter(|&&b| b).count();
            for &(s, e) in &blocks[usize::from(dsack)..] {
                let s = (s.diff(sq(0)).max(una as i32)) as usize;
                let e = e.diff(sq(0)) as usize;
                for b in bits.iter_mut().take(e).skip(s) {
                    *b = true;
                }
            }
            let after = bits.iter().filter(|&&b| b).count();
            prop_assert_eq!(u.newly_sacked_bytes, after - before);
            prop_assert_eq!(ranges(&sb), model_ranges(&bits));
            prop_assert_eq!(sb.sacked_bytes(), after);
        }
        for (i, &b) in bits.iter().enumerate() {
            prop_assert_eq!(sb.is_sacked(sq(i as u32)), b);
        }
        prop_assert_eq!(sb.is_lost(sq(probe), MSS, 3), model_is_lost(&bits, probe as usize, 3));
        let hr = high_rxt.max(una);
        prop_assert_eq!(
            sb.pipe(sq(una), sq(nxt), sq(hr), MSS),
            model_pipe(&bits, una as usize, nxt as usize, hr as usize)
        );
        // NextSeg rule 1 against a byte scan.
        let highest = bits.iter().rposition(|&b| b);
        let want = highest.and_then(|h| {
            let top = model_ranges(&bits).last().map(|x| x.0.diff(sq(0)) as usize).unwrap_or(h);
            (hr as usize..top).find(|&i| !bits[i] && model_is_lost(&bits, i, DUP_THRESH))
        });
        match sb.next_seg(sq(una), sq(nxt), sq(hr), MSS, 0) {
            Some(NextSeg::Retransmit { start, end }) => {
                let s = start.diff(sq(0)) as usize;
                let e = end.diff(sq(0)) as usize;
                if let Some(w) = want {
                    prop_assert_eq!(s, w);
                }
                prop_assert!(e > s && e - s <= MSS);
                prop_assert!(bits[s..e].iter().all(|&b| !b));
            }
            Some(NextSeg::NewData { .. }) => prop_assert!(false, "no new data was allowed"),
            None => prop_assert_eq!(want, None),
        }
    }
}

proptest! {
    /// Whatever the ranges, the blocks are valid: at most the limit, no duplicates apart
    /// from the D-SACK pair, each a real out-of-order range (or the D-SACK), the D-SACK
    /// first, the newest segment's range right after it, and as many as fit.
    #[test]
    fn sack_blocks_are_well_formed(
        raw in proptest::collection::vec((0usize..2000, 1usize..200), 0..8),
        last in proptest::option::of(0usize..2200),
        dup in proptest::option::of((0u32..3000, 1u32..100)),
        limit in 0usize..6,
        rcv in any::<u32>(),
    ) {
        let mut asm = crate::tcp::reassembly::Assembler::new(8);
        for (o, l) in raw {
            asm.add(o, l).unwrap();
        }
        let rcv = SeqNumber(rcv);
        let ranges: Vec<SeqRange> = asm
            .ranges()
            .map(|(s, e)| (rcv + s as u32, rcv + e as u32))
            .collect();
        let last = last.map(|o| (rcv + o as u32, rcv + o as u32 + 1));
        let dsack = dup.map(|(s, l)| (rcv - 1000 + s, rcv - 1000 + s + l));
        let mut out = [(SeqNumber(0), SeqNumber(0)); 4];
        let n = sack_blocks(asm.ranges(), rcv, last, dsack, limit, &mut out);
        let limit = limit.min(4);
        prop_assert!(n <= limit);
        let plain_start = usize::from(dsack.is_some() && limit > 0);
        if plain_start == 1 {
            prop_assert_eq!(out[0], dsack.unwrap());
        }
        let plain = &out[plain_start..n];
        for (i, b) in plain.iter().enumerate() {
            prop_assert!(ranges.contains(b));
            prop_assert!(!plain[..i].contains(b));
        }
        prop_assert_eq!(n, limit.min(plain_start + ranges.len()));
        let holding = |seq: SeqNumber| ranges.iter().copied().find(|r| seq.in_range(r.0, r.1));
        let mut expect_next = Vec::new();
        if let Some(r) = dsack.and_then(|d| holding(d.0)) {
            expect_next.push(r);
        }
        if let Some(r) = last.and_then(|l| holding(l.0)) {
            if !expect_next.contains(&r) {
                expect_next.push(r);
            }
        }
        for (got, want) in plain.iter().zip(&expect_next) {
            prop_assert_eq!(got, want);
        }
    }
}
