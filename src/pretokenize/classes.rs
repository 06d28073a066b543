//! Constant-time character-class lookup for the preset matchers.
//!
//! The flags come from `unicode_tables.rs`, generated from Python's `regex` module so that the
//! presets see exactly the Unicode version `regex` sees (the Rust Unicode crates lag behind).
//! The sorted ranges are expanded once into a two-level table: the high bits of a code point
//! pick a 256-entry block, and identical blocks (most of the code space) are stored once.
use std::collections::HashMap;
use std::sync::OnceLock;

pub use super::unicode_tables::{LETTER, LOWER, NUMBER, SPACE, UPPER_OR_TITLE};
use super::unicode_tables::RANGES;

const BLOCK_BITS: u32 = 8;
const BLOCK_SIZE: usize = 1 << BLOCK_BITS;
const CODE_POINTS: usize = 0x110000;

/// Kinds of bytes for the ASCII fast path of the preset matchers (`CharClasses::kind`): one bit
/// each, so a run of several kinds is one mask test.
pub const UPPER_BYTE: u8 = 1;
/// `a-z`.
pub const LOWER_BYTE: u8 = 2;
/// `0-9`.
pub const DIGIT_BYTE: u8 = 4;
/// ASCII `\s` other than `\r` and `\n`.
pub const SPACE_BYTE: u8 = 8;
/// `\r` and `\n`.
pub const NEWLINE_BYTE: u8 = 16;
/// ASCII `[^\s\p{L}\p{N}]`: punctuation, symbols, controls.
pub const OTHER_BYTE: u8 = 32;
/// A byte the fast path does not decide: the start of a non-ASCII character.
pub const HIGH_BYTE: u8 = 64;

pub struct CharClasses {
    /// Flags of the 128 ASCII characters: the hot path never touches the block table.
    ascii: [u8; 128],
    /// The fast-path kind of every byte value (`UPPER_BYTE` ...).
    kind: [u8; 256],
    /// Block number of each 256-code-point block.
    block_of: Vec<u16>,
    /// The distinct blocks, concatenated.
    blocks: Vec<u8>,
    /// Bit (lead & 0x0F) * 64 + (second & 0x3F): every character of the three-byte prefix
    /// (lead, second) is a letter (most of the CJK ideographs, Hangul, kana).
    letter_prefixes: [u64; 16],
}

impl CharClasses {
    /// The shared table, built on first use (a few milliseconds, once per process).
    pub fn get() -> &'static CharClasses {
        static TABLE: OnceLock<CharClasses> = OnceLock::new();
        TABLE.get_or_init(CharClasses::build)
    }

    fn build() -> CharClasses {
        let mut flat = vec![0u8; CODE_POINTS];
        for &(first, last, flags) in RANGES.iter() {
            flat[first as usize..=last as usize].fill(flags);
        }
        let mut ascii = [0u8; 128];
        ascii.copy_from_slice(&flat[..128]);
        let mut seen: HashMap<&[u8], u16> = HashMap::new();
        let mut block_of = Vec::with_capacity(CODE_POINTS / BLOCK_SIZE);
        let mut blocks = Vec::new();
        for block in flat.chunks(BLOCK_SIZE) {
            let next = (blocks.len() / BLOCK_SIZE) as u16;
            let number = *seen.entry(block).or_insert_with(|| {
                blocks.extend_from_slice(block);
                next
            });
            block_of.push(number);
        }
        let mut kind = [HIGH_BYTE; 256];
        for byte in 0..128u8 {
            kind[byte as usize] = byte_kind(byte, ascii[byte as usize]);
        }
        let mut letter_prefixes = [0u64; 16];
        for prefix in 0..1024usize {
            // The 64 code points (0x800 up) whose UTF-8 starts with this lead and second byte.
            let first = prefix << 6;
            if first >= 0x800 && flat[first..first + 64].iter().all(|flags| flags & LETTER != 0) {
                letter_prefixes[prefix / 64] |= 1 << (prefix % 64);
            }
        }
        CharClasses { ascii, kind, block_of, blocks, letter_prefixes }
    }

    /// The fast-path kind of `byte` (`UPPER_BYTE` ...).
    #[inline(always)]
    pub fn kind(&self, byte: u8) -> u8 {
        self.kind[byte as usize]
    }

    #[inline(always)]
    pub fn ascii(&self, byte: u8) -> u8 {
        self.ascii[(byte & 0x7F) as usize]
    }

    #[inline(always)]
    pub fn of(&self, code_point: u32) -> u8 {
        let block = self.block_of[(code_point >> BLOCK_BITS) as usize] as usize;
        self.blocks[block * BLOCK_SIZE + (code_point as usize & (BLOCK_SIZE - 1))]
    }

    /// Whether every character whose UTF-8 starts with `lead` (0xE0..=0xEF, a three-byte
    /// character) and `second` is a letter.
    #[inline(always)]
    pub fn letter_prefix(&self, lead: u8, second: u8) -> bool {
        let prefix = ((lead & 0x0F) as usize) << 6 | (second & 0x3F) as usize;
        self.letter_prefixes[prefix >> 6] >> (prefix & 63) & 1 != 0
    }

    /// Flags and byte length of the character starting at `at` in valid UTF-8 `text`.
    #[inline(always)]
    pub fn at(&self, text: &[u8], at: usize) -> (u8, usize) {
        let first = text[at];
        if first < 0x80 {
            return (self.ascii[first as usize], 1);
        }
        let (code_point, length) = decode(text, at);
        (self.of(code_point), length)
    }
}

/// The fast-path kind of an ASCII byte with class `flags`. A letter must be exactly one of the
/// two o200k cases; anything the kinds cannot express is `HIGH_BYTE` (left to the full matcher).
fn byte_kind(byte: u8, flags: u8) -> u8 {
    let case = flags & (UPPER_OR_TITLE | LOWER);
    match flags & (LETTER | NUMBER | SPACE) {
        LETTER if case == UPPER_OR_TITLE => UPPER_BYTE,
        LETTER if case == LOWER => LOWER_BYTE,
        NUMBER if case == 0 => DIGIT_BYTE,
        SPACE if case == 0 && (byte == b'\r' || byte == b'\n') => NEWLINE_BYTE,
        SPACE if case == 0 => SPACE_BYTE,
        0 if case == 0 => OTHER_BYTE,
        _ => HIGH_BYTE,
    }
}

/// The code point and byte length of the (non-ASCII) character at `at`; `text` is valid UTF-8.
#[inline(always)]
pub fn decode(text: &[u8], at: usize) -> (u32, usize) {
    let first = text[at] as u32;
    let continuation = |offset: usize| (text[at + offset] & 0x3F) as u32;
    if first < 0xE0 {
        (((first & 0x1F) << 6) | continuation(1), 2)
    } else if first < 0xF0 {
        (((first & 0x0F) << 12) | (continuation(1) << 6) | continuation(2), 3)
    } else {
        let code_point =
            ((first & 0x07) << 18) | (continuation(1) << 12) | (continuation(2) << 6) | continuation(3);
        (code_point, 4)
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_prefix_is_one_whose_64_characters_are_all_letters() {
        let classes = CharClasses::get();
        let mut prefixes = 0;
        for lead in 0xE0..=0xEFu8 {
            for second in 0x80..=0xBFu8 {
                let first = ((lead as u32 & 0x0F) << 12) | ((second as u32 & 0x3F) << 6);
                let all = first >= 0x800 && (first..first + 64).all(|code_point| classes.of(code_point) & LETTER != 0);
                assert_eq!(classes.letter_prefix(lead, second), all, "{lead:#x} {second:#x}");
                prefixes += all as u32;
            }
        }
        // The CJK ideographs U+4E00..U+9FFF alone are 320 prefixes.
        assert!(prefixes >= 320, "{prefixes}");
        assert!(classes.letter_prefix(0xE4, 0xB8) && !classes.letter_prefix(0xE4, 0xB7)); // U+4E00.. and U+4DC0..
    }
}
