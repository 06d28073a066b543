//! The block path of the cl100k and o200k matchers: 64 bytes of text at a time, classified
//! into bit masks (one bit per byte), from which every piece boundary is computed at once
//! instead of piece by piece.
//!
//! It only decides stretches of *plain* text: ASCII letters, digits, punctuation, runs of
//! spaces and tabs, runs of line breaks (`\r`, `\n`) and the letters of Latin-1 (U+00C0..U+00FF
//! but × and ÷). A line break after a space or tab, a run of spaces and tabs after a line break
//! that is not followed by a letter, digit or punctuation inside the block, an apostrophe that
//! could start a contraction (one before s, t, m, d, r, v or l in either case, before a
//! non-ASCII character but a Latin-1 letter, or at the block's end), another control
//! character, any other non-ASCII byte or, for o200k, a `/` after a line break ends the
//! stretch, and the matcher's other paths take over there. In plain text the patterns reduce
//! to a few rules on neighbouring bytes, each looking ahead at most one byte or one run of
//! blanks, and only inside the block (see `boundaries`), so a boundary found inside the stretch
//! is final; the piece that runs into the stretch's end is left to the caller, which continues
//! from its start.

/// Bit masks of the classes of 64 bytes (bit i: byte i).
#[derive(Default)]
struct Masks {
    upper: u64,
    lower: u64,
    digit: u64,
    space: u64,
    tab: u64,
    /// `\r` and `\n`.
    newline: u64,
    slash: u64,
    apostrophe: u64,
    /// The letters a contraction may start with after its apostrophe: s, t, m, d, r, v, l in
    /// either case (`'s`, `'t`, `'m`, `'d`, `'re`, `'ve`, `'ll`).
    contraction: u64,
    /// The lead byte 0xC3 of U+00C0..U+00FF, and the second bytes of its upper-case (U+00C0..
    /// U+00DE but ×) and lower-case (U+00DF..U+00FF but ÷) letters.
    latin: u64,
    latin_upper: u64,
    latin_lower: u64,
    /// Bytes that end plain text: controls but tabs and line breaks, DEL and non-ASCII bytes
    /// (but those of Latin-1 letters, see `boundaries`).
    stop: u64,
}

/// The masks of `bytes[..64]`; `WIDE` only where `wide_available`.
#[inline(always)]
fn classify<const WIDE: bool>(bytes: &[u8; 64]) -> Masks {
    #[cfg(target_arch = "x86_64")]
    {
        if WIDE {
            // SAFETY: WIDE is set only where the CPU has AVX-512BW (see `Preset::split`).
            unsafe { classify_avx512(bytes) }
        } else {
            classify_sse2(bytes)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        classify_bytes(bytes)
    }
}

/// `classify` one byte at a time: the definition the vector version must match.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytes(bytes: &[u8; 64]) -> Masks {
    let mut masks = Masks::default();
    for (index, &byte) in bytes.iter().enumerate() {
        let bit = 1u64 << index;
        match byte {
            b'A'..=b'Z' => masks.upper |= bit,
            b'a'..=b'z' => masks.lower |= bit,
            b'0'..=b'9' => masks.digit |= bit,
            b' ' => masks.space |= bit,
            b'\t' => masks.tab |= bit,
            b'\r' | b'\n' => masks.newline |= bit,
            b'/' => masks.slash |= bit,
            b'\'' => masks.apostrophe |= bit,
            0..=0x1F | 0x7F..=0xFF => masks.stop |= bit,
            _ => {}
        }
        if b"sStTmMdDrRvVlL".contains(&byte) {
            masks.contraction |= bit;
        }
        match byte {
            0xC3 => masks.latin |= bit,
            0x80..=0x9E if byte != 0x97 => masks.latin_upper |= bit,
            0x9F..=0xBF if byte != 0xB7 => masks.latin_lower |= bit,
            _ => {}
        }
    }
    masks
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify_sse2(bytes: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut masks = Masks::default();
    // SAFETY: SSE2 is part of x86-64; the loads read bytes[16k..16k + 16], inside the array.
    unsafe {
        let splat = |byte: u8| _mm_set1_epi8(byte as i8);
        // Signed compares: bytes from 0x80 up are negative, so below every ASCII bound.
        let between = |v: __m128i, low: u8, high: u8| {
            _mm_and_si128(_mm_cmpgt_epi8(v, splat(low - 1)), _mm_cmplt_epi8(v, splat(high + 1)))
        };
        for k in 0..4 {
            let v = _mm_loadu_si128(bytes.as_ptr().add(16 * k).cast());
            let bits = |m: __m128i| (_mm_movemask_epi8(m) as u32 as u64) << (16 * k);
            let space = _mm_cmpeq_epi8(v, splat(b' '));
            let tab = _mm_cmpeq_epi8(v, splat(b'\t'));
            let newline = _mm_or_si128(_mm_cmpeq_epi8(v, splat(b'\r')), _mm_cmpeq_epi8(v, splat(b'\n')));
            let blank = _mm_or_si128(space, tab);
            let stop = _mm_or_si128(
                _mm_andnot_si128(_mm_or_si128(blank, newline), _mm_cmplt_epi8(v, splat(0x21))),
                _mm_cmpeq_epi8(v, splat(0x7F)),
            );
            // Lower case: the letter itself or its upper case with bit 5 set.
            let folded = _mm_or_si128(v, splat(0x20));
            let contraction = b"stmdrvl".iter().fold(_mm_setzero_si128(), |all, &letter| {
                _mm_or_si128(all, _mm_cmpeq_epi8(folded, splat(letter)))
            });
            masks.upper |= bits(between(v, b'A', b'Z'));
            masks.lower |= bits(between(v, b'a', b'z'));
            masks.digit |= bits(between(v, b'0', b'9'));
            masks.space |= bits(space);
            masks.tab |= bits(tab);
            masks.newline |= bits(newline);
            masks.slash |= bits(_mm_cmpeq_epi8(v, splat(b'/')));
            masks.apostrophe |= bits(_mm_cmpeq_epi8(v, splat(b'\'')));
            masks.contraction |= bits(contraction);
            // Second bytes as signed numbers: 0x80..=0x9E are below 0x9F, 0x9F..=0xBF above 0x9E
            // and below 0xC0.
            masks.latin |= bits(_mm_cmpeq_epi8(v, splat(0xC3)));
            let upper_second = _mm_cmplt_epi8(v, splat(0x9F));
            masks.latin_upper |= bits(_mm_andnot_si128(_mm_cmpeq_epi8(v, splat(0x97)), upper_second));
            let lower_second = _mm_and_si128(_mm_cmpgt_epi8(v, splat(0x9E)), _mm_cmplt_epi8(v, splat(0xC0)));
            masks.latin_lower |= bits(_mm_andnot_si128(_mm_cmpeq_epi8(v, splat(0xB7)), lower_second));
            masks.stop |= bits(stop);
        }
    }
    masks
}

/// Whether this CPU has AVX-512BW, for `classify_avx512` (checked once, then a load).
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn wide_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512bw")
}

/// `classify` with AVX-512BW: each class is one or two compares of all 64 bytes into a mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
#[inline]
fn classify_avx512(bytes: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: the load reads bytes[..64], the whole array.
    let v = unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) };
    let splat = |byte: u8| _mm512_set1_epi8(byte as i8);
    let equal = |byte: u8| _mm512_cmpeq_epi8_mask(v, splat(byte));
    // Unsigned: low..=high is v - low <= high - low.
    let between = |low: u8, high: u8| _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, splat(low)), splat(high - low));
    let space = equal(b' ');
    let tab = equal(b'\t');
    let newline = equal(b'\r') | equal(b'\n');
    let stop = (_mm512_cmplt_epu8_mask(v, splat(0x20)) & !newline & !tab) | _mm512_cmpge_epu8_mask(v, splat(0x7F));
    // Lower case: the letter itself or its upper case with bit 5 set.
    let folded = _mm512_or_si512(v, splat(0x20));
    let contraction = b"stmdrvl".iter().fold(0, |all, &letter| all | _mm512_cmpeq_epi8_mask(folded, splat(letter)));
    Masks {
        upper: between(b'A', b'Z'),
        lower: between(b'a', b'z'),
        digit: between(b'0', b'9'),
        space,
        tab,
        newline,
        slash: equal(b'/'),
        apostrophe: equal(b'\''),
        contraction,
        latin: equal(0xC3),
        latin_upper: between(0x80, 0x9E) & !equal(0x97),
        latin_lower: between(0x9F, 0xBF) & !equal(0xB7),
        stop,
    }
}

/// The piece starts in the plain text at the start of `bytes` (itself a piece start): bit i is
/// set where a piece starts at byte i of the plain stretch (none past it); and whether the
/// stretch ends inside the block. `case_split`
/// (o200k) also starts a piece at an upper-case letter after a lower-case one, and takes
/// o200k's `[\r\n/]*` after punctuation into account.
#[inline(always)]
pub fn boundaries<const WIDE: bool>(bytes: &[u8; 64], case_split: bool) -> (u64, bool) {
    let Masks {
        mut upper,
        mut lower,
        digit,
        space,
        tab,
        newline,
        slash,
        apostrophe,
        contraction,
        latin,
        latin_upper,
        latin_lower,
        mut stop,
    } = classify::<WIDE>(bytes);
    // An apostrophe that cannot start a contraction is punctuation like any other: no
    // alternative treats it otherwise. That is known where the byte after it, inside the block,
    // is ASCII but not one of the contraction's letters, or starts a Latin-1 letter; other
    // non-ASCII letters may fold to one (`(?i)'s` matches "'ſ").
    stop |= apostrophe & !((!(contraction | stop) | latin) >> 1);
    // A Latin-1 letter (0xC3 and its second byte, inside the block) is a letter of its case on
    // both bytes: no rule starts a piece between two letter bytes of one case.
    let latin_upper = latin & latin_upper >> 1;
    let latin_lower = latin & latin_lower >> 1;
    let latin_letters = latin_upper | latin_upper << 1 | latin_lower | latin_lower << 1;
    upper |= latin_upper | latin_upper << 1;
    lower |= latin_lower | latin_lower << 1;
    stop &= !latin_letters;
    let letter = upper | lower;
    let blank = space | tab;
    let other = !(letter | digit | blank | newline | stop);
    // What follows a byte inside the block is known to be neither whitespace nor a stop byte
    // (which may be whitespace, like U+00A0).
    let before_solid = (letter | digit | other) >> 1;
    // Runs of blanks (spaces and tabs): their first and last bytes.
    let run_first = blank & !(blank << 1);
    let run_last = blank & !(blank >> 1);
    // Plain text ends at the first stop byte, at a line break after a blank (where the
    // whitespace alternatives take more than the blanks), and for o200k at a slash after a line
    // break (which its punctuation alternative may take with the breaks).
    let mut end = stop | newline & blank << 1;
    if case_split {
        end |= slash & newline << 1;
    }
    // A run of blanks after a line break starts a piece only where something solid follows the
    // run inside the block: before whitespace that runs on (a stop byte may be U+00A0) to a line
    // break or the end of the text, the line-break alternatives take it with the breaks. The
    // runs whose last blank has a solid follower, filled back to their first byte (an addition
    // on the reversed bits carries through each run).
    let after_break = run_first & newline << 1;
    let reversed = blank.reverse_bits();
    let carried = reversed.wrapping_add((run_last & before_solid).reverse_bits()) ^ reversed;
    let followed = (carried & reversed).reverse_bits();
    end |= after_break & !followed;
    let length = end.trailing_zeros();
    // A run of blanks starts a piece: before it stands a letter, digit, punctuation or line
    // break (or the start), none of which a piece continues with a blank. In a run of two or
    // more, `\s+(?!\S)` leaves the last blank to what follows it, so it starts a piece too when
    // something solid follows inside the block.
    let mut starts = 1 | run_first | run_last & blank << 1 & before_solid;
    // A run of letters starts a piece, unless a blank or a lone punctuation character that
    // starts a piece (after a letter, digit or tab, or at the start) comes right before it: the
    // patterns' optional `[^\r\n\p{L}\p{N}]` in front of a word takes it. A space before a
    // punctuation character joins it (` ?[^\s\p{L}\p{N}]+`); a tab does not.
    let letter_runs = letter & !(letter << 1);
    let lone_other = other << 1 & !(other << 2) & !(space << 2);
    starts |= letter_runs & !(blank << 1) & !lone_other;
    if case_split {
        // o200k's words are `[upper]*[lower]+` or `[upper]+[lower]*`.
        starts |= upper & lower << 1;
    }
    // A run of punctuation starts a piece unless a space comes before it (` ?[^\s\p{L}\p{N}]+`).
    starts |= other & !(other << 1) & !(space << 1);
    // A run of line breaks is one piece (`\s*[\r\n]`, which backs off to the run's last break
    // when something other than whitespace follows), but after punctuation, whose alternative
    // ends with `[\r\n]*`, it continues that piece; whatever follows the run starts a piece.
    starts |= newline & !(newline << 1) & !(other << 1);
    starts |= !newline & newline << 1;
    // Digits: `\p{N}{1,3}`, groups of three from the start of each run.
    let digit_runs = digit & !(digit << 1);
    starts |= digit_runs;
    let three = digit & digit << 1 & digit << 2;
    let mut group = digit_runs;
    while group != 0 {
        group = group << 3 & three;
        starts |= group;
    }
    let inside = if length >= 64 { u64::MAX } else { (1u64 << length) - 1 };
    (starts & inside, length < 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_classes_equal_the_byte_classes() {
        let mut state = 7u64;
        for round in 0..2000 {
            let mut bytes = [0u8; 64];
            for byte in bytes.iter_mut() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Every byte value in the first rounds, then mostly ASCII.
                *byte = if round < 1000 { (state >> 56) as u8 } else { (state >> 57) as u8 };
            }
            let (vector, plain) = (classify::<false>(&bytes), classify_bytes(&bytes));
            #[cfg(target_arch = "x86_64")]
            if wide_available() {
                // SAFETY: the CPU has AVX-512BW.
                let wide = unsafe { classify_avx512(&bytes) };
                assert_eq!(
                    [wide.upper, wide.lower, wide.digit, wide.space, wide.tab, wide.newline, wide.slash],
                    [plain.upper, plain.lower, plain.digit, plain.space, plain.tab, plain.newline, plain.slash]
                );
                assert_eq!(
                    [wide.apostrophe, wide.contraction, wide.latin, wide.latin_upper, wide.latin_lower, wide.stop],
                    [plain.apostrophe, plain.contraction, plain.latin, plain.latin_upper, plain.latin_lower, plain.stop],
                    "{bytes:?}"
                );
            }
            assert_eq!(vector.upper, plain.upper);
            assert_eq!(vector.lower, plain.lower);
            assert_eq!(vector.digit, plain.digit);
            assert_eq!(vector.space, plain.space);
            assert_eq!(vector.tab, plain.tab);
            assert_eq!(vector.newline, plain.newline);
            assert_eq!(vector.slash, plain.slash);
            assert_eq!(vector.apostrophe, plain.apostrophe);
            assert_eq!(vector.contraction, plain.contraction);
            assert_eq!(vector.latin, plain.latin);
            assert_eq!(vector.latin_upper, plain.latin_upper);
            assert_eq!(vector.latin_lower, plain.latin_lower);
            assert_eq!(vector.stop, plain.stop, "{bytes:?}");
        }
    }
}
