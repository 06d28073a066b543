//! The per-document counts behind `polytok.evaluate`: bytes, characters, whitespace-separated
//! words and non-blank lines of a document, counted in one pass over its bytes (the bindings
//! run it over many documents in parallel, without the GIL), so that measuring a corpus costs
//! little more than encoding it.

/// ASCII bytes for which Python's `str.isspace()` is true: tab, line feed, vertical tab, form
/// feed, carriage return, the four separators U+001C..U+001F, and space.
const ASCII_WHITESPACE: [bool; 128] = {
    let mut table = [false; 128];
    let mut byte = 0;
    while byte < 128 {
        table[byte] = matches!(byte, 0x09..=0x0d | 0x1c..=0x20);
        byte += 1;
    }
    table
};

/// Whether the character that starts at `text[at]` (valid UTF-8) is whitespace for Python's
/// `str.isspace()`, and so for `str.split()`. Besides ASCII these are U+0085, U+00A0, U+1680,
/// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F and U+3000, matched on their UTF-8 bytes so
/// that no character has to be decoded.
#[inline]
fn starts_whitespace(text: &[u8], at: usize) -> bool {
    let lead = text[at];
    if lead < 0x80 {
        return ASCII_WHITESPACE[lead as usize];
    }
    let next = |offset: usize| text.get(at + offset).copied().unwrap_or(0);
    match lead {
        0xc2 => matches!(next(1), 0x85 | 0xa0),
        0xe1 => next(1) == 0x9a && next(2) == 0x80,
        0xe2 => match next(1) {
            0x80 => matches!(next(2), 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf),
            0x81 => next(2) == 0x9f,
            _ => false,
        },
        0xe3 => next(1) == 0x80 && next(2) == 0x80,
        _ => false,
    }
}

/// What `measure` counts in one document.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct TextStats {
    pub bytes: u64,
    /// Code points; each byte of an invalid UTF-8 sequence counts as one character, as Python
    /// counts the text decoded with `errors="surrogateescape"`.
    pub characters: u64,
    /// Maximal runs of non-whitespace characters: `len(text.split())`.
    pub words: u64,
    /// Pieces between `\n` that hold at least one non-whitespace character.
    pub lines: u64,
}

struct Counter {
    stats: TextStats,
    in_word: bool,
    line_has_text: bool,
}

impl Counter {
    /// One character; branch-free, as whitespace and text alternate unpredictably.
    #[inline]
    fn character(&mut self, whitespace: bool, newline: bool) {
        self.stats.characters += 1;
        self.stats.words += u64::from(!whitespace & !self.in_word);
        self.in_word = !whitespace;
        self.stats.lines += u64::from(newline & self.line_has_text);
        self.line_has_text = !newline & (self.line_has_text | !whitespace);
    }
}

/// Counts the bytes, characters, words and non-blank lines of one document (UTF-8, possibly invalid).
pub fn measure(text: &[u8]) -> TextStats {
    let mut counter = Counter {
        stats: TextStats {
            bytes: text.len() as u64,
            ..TextStats::default()
        },
        in_word: false,
        line_has_text: false,
    };
    for chunk in text.utf8_chunks() {
        let valid = chunk.valid().as_bytes();
        for (at, &byte) in valid.iter().enumerate() {
            // Continuation bytes (10xxxxxx) belong to the character their lead byte counted.
            if byte & 0xc0 != 0x80 {
                counter.character(starts_whitespace(valid, at), byte == b'\n');
            }
        }
        // Each invalid byte is one character that is not whitespace, as a lone surrogate is not.
        for _ in chunk.invalid() {
            counter.character(false, false);
        }
    }
    counter.stats.lines += u64::from(counter.line_has_text);
    counter.stats
}
