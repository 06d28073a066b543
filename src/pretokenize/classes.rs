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

pub struct CharClasses {
    /// Flags of the 128 ASCII characters: the hot path never touches the block table.
    ascii: [u8; 128],
    /// Block number of each 256-code-point block.
    block_of: Vec<u16>,
    /// The distinct blocks, concatenated.
    blocks: Vec<u8>,
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
        CharClasses { ascii, block_of, blocks }
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

