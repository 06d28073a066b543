//! UTF-8 character boundaries, checked inline where a loop runs once per character.

/// The byte length of the UTF-8 character starting at `text[at]`, or None if the bytes there
/// are not one (what `std::str::from_utf8` accepts, checked inline: this runs per character).
#[inline]
pub fn utf8_char_len(text: &[u8], at: usize) -> Option<usize> {
    // Lead byte -> length and the range of the second byte (which rules out overlong forms,
    // surrogates and code points above U+10FFFF).
    let (length, low, high) = match text[at] {
        0x00..=0x7f => return Some(1),
        0xc2..=0xdf => (2, 0x80, 0xbf),
        0xe0 => (3, 0xa0, 0xbf),
        0xe1..=0xec | 0xee..=0xef => (3, 0x80, 0xbf),
        0xed => (3, 0x80, 0x9f),
        0xf0 => (4, 0x90, 0xbf),
        0xf1..=0xf3 => (4, 0x80, 0xbf),
        0xf4 => (4, 0x80, 0x8f),
        _ => return None,
    };
    let bytes = text.get(at..at + length)?;
    let second_fits = (low..=high).contains(&bytes[1]);
    (second_fits && bytes[2..].iter().all(|&byte| byte & 0xc0 == 0x80)).then_some(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inline character length agrees with `std::str::from_utf8` on every lead byte, every
    /// second byte and the edges of the continuation range, truncated or not.
    #[test]
    fn utf8_char_len_agrees_with_from_utf8() {
        for lead in 0..=255u8 {
            for second in 0..=255u8 {
                for rest in [
                    [0x80, 0x80],
                    [0xbf, 0xbf],
                    [0x80, 0x41],
                    [0xc0, 0x80],
                    [0xbf, 0x7f],
                ] {
                    let bytes = [lead, second, rest[0], rest[1]];
                    for available in 1..=4 {
                        let text = &bytes[..available];
                        let expected = (1..=available)
                            .find(|&length| std::str::from_utf8(&text[..length]).is_ok());
                        // from_utf8 accepts a shorter prefix only if that prefix is the whole character.
                        let expected = expected.filter(|&length| length == 1 || text[0] >= 0x80);
                        assert_eq!(utf8_char_len(text, 0), expected, "{text:x?}");
                    }
                }
            }
        }
    }
}
