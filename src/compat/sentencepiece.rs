//! SentencePiece's normaliser, for loaded `.model` files: a precompiled charsmap (a darts-clone
//! double-array trie over UTF-8 whose leaves point at NUL-terminated replacements), longest rule
//! first; user-defined pieces kept as they are; whitespace removal, `▁` for spaces and the
//! dummy prefix; then the normalised text is cut at the user-defined pieces for the segmenter
//! (`Encoder::sentencepiece_ids` in pipeline.rs runs the whole pipeline in one call).
use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};

use super::CompatError;
use crate::literals;
use crate::segment::utf8::utf8_char_len;

const REPLACEMENT_CHARACTER: &[u8] = "\u{FFFD}".as_bytes();

pub struct SentencePieceNormalizer {
    units: Vec<u32>,
    replacements: Vec<u8>,
    /// The ids of the user-defined pieces, by the matcher's pattern index.
    user_defined: Vec<u32>,
    /// Leftmost-longest matcher of the user-defined pieces (None: there are none), searched
    /// anchored at one position or along a text: its time does not grow with their number.
    user_defined_matcher: Option<AhoCorasick>,
    /// Whether a user-defined piece starts with each byte.
    user_defined_may_start: [bool; 256],
    /// Whether any charsmap rule or user-defined piece starts with each byte; the other bytes
    /// are copied without a lookup.
    may_start: [bool; 256],
    /// ASCII bytes that stay themselves whenever the next byte is ASCII too: no user-defined
    /// piece starts with them and no rule is the byte alone or continues it with an ASCII byte.
    /// Letters start NFKC's composition rules ("e" + U+0301), but those continue with a
    /// non-ASCII byte, so plain ASCII text is copied without walking the charsmap.
    ascii_kept: [bool; 128],
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
}

/// A stretch of normalised text, or a user-defined piece (by id) found in it.
pub enum Part<'a> {
    Text(&'a [u8]),
    UserDefined(u32),
}

#[inline]
fn unit_offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
}

/// One step of a darts-clone walk: from `position` by `byte` to the next position, with the
/// replacement offset if a rule ends there; None if no rule continues with `byte`.
#[inline]
fn step(units: &[u32], position: usize, byte: u8) -> Option<(usize, Option<usize>)> {
    let position = position ^ byte as usize;
    let &unit = units.get(position)?;
    if unit & ((1 << 31) | 0xff) != byte as u32 {
        return None;
    }
    let position = position ^ unit_offset(unit);
    let leaf = if (unit >> 8) & 1 == 1 {
        Some((*units.get(position)? & ((1 << 31) - 1)) as usize)
    } else {
        None
    };
    Some((position, leaf))
}

impl SentencePieceNormalizer {
    /// (length, replacement) of the longest charsmap rule at `data[start..]`.
    fn longest_rule(&self, data: &[u8], start: usize) -> Option<(usize, &[u8])> {
        let units = &self.units;
        if units.is_empty() {
            return None;
        }
        let mut found = None;
        let mut position = unit_offset(units[0]);
        for (index, &byte) in data.iter().enumerate().skip(start) {
            let Some((next, leaf)) = step(units, position, byte) else {
                break;
            };
            position = next;
            if let Some(offset) = leaf {
                found = Some((index + 1 - start, offset));
            }
        }
        let (length, offset) = found?;
        let tail = self.replacements.get(offset..)?;
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        Some((length, &tail[..end]))
    }

    /// The length of the longest user-defined piece that starts at `data[at]`, if one does.
    fn user_defined_at(&self, data: &[u8], at: usize) -> Option<usize> {
        if !self.user_defined_may_start[data[at] as usize] {
            return None;
        }
        let matcher = self.user_defined_matcher.as_ref()?;
        let input = Input::new(data).range(at..).anchored(Anchored::Yes);
        matcher.find(input).map(|found| found.len())
    }

    /// What the input at `at` becomes, and how many bytes it takes.
    fn prefix<'a>(&'a self, data: &'a [u8], at: usize) -> (&'a [u8], usize) {
        if !self.may_start[data[at] as usize] && data[at] < 0x80 {
            return (&data[at..at + 1], 1);
        }
        if let Some(length) = self.user_defined_at(data, at) {
            return (&data[at..at + length], length);
        }
        if let Some((length, replacement)) = self.longest_rule(data, at) {
            return (replacement, length);
        }
        match utf8_char_len(data, at) {
            None => (REPLACEMENT_CHARACTER, 1),
            Some(length) => (&data[at..at + length], length),
        }
    }

    pub fn normalize_bytes(&self, data: &[u8]) -> Vec<u8> {
        let space: &[u8] = if self.escape_whitespaces {
            "\u{2581}".as_bytes()
        } else {
            b" "
        };
        let mut position = 0;
        if self.remove_extra_whitespaces {
            while position < data.len() {
                let (replacement, consumed) = self.prefix(data, position);
                if replacement != b" " {
                    break;
                }
                position += consumed;
            }
        }
        let mut out = Vec::with_capacity(data.len() + data.len() / 4 + 3);
        if position >= data.len() {
            return out;
        }
        if self.add_dummy_prefix {
            out.extend_from_slice(space);
        }
        let mut previous_space = self.remove_extra_whitespaces;
        while position < data.len() {
            let byte = data[position];
            if byte < 0x80
                && self.ascii_kept[byte as usize]
                && data.get(position + 1).is_none_or(|&next| next < 0x80)
            {
                // The general path below with the byte as its own replacement.
                if byte != b' ' {
                    out.push(byte);
                    previous_space = false;
                } else if !previous_space {
                    out.extend_from_slice(space);
                    previous_space = self.remove_extra_whitespaces;
                }
                position += 1;
                continue;
            }
            let (mut replacement, consumed) = self.prefix(data, position);
            if previous_space {
                while let [b' ', rest @ ..] = replacement {
                    replacement = rest;
                }
            }
            if !replacement.is_empty() {
                for &byte in replacement {
                    if byte == b' ' {
                        out.extend_from_slice(space);
                    } else {
                        out.push(byte);
                    }
                }
                previous_space = replacement.ends_with(b" ");
            }
            position += consumed;
            if !self.remove_extra_whitespaces {
                previous_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        out
    }

    /// Cuts normalised text at the user-defined pieces (leftmost, then longest) into the
    /// stretches between them and the pieces' ids, in order. The pieces are UTF-8 text and so is
    /// the normalised text, so a piece can only match where a character starts.
    pub fn split_user_defined<'a>(&self, normalized: &'a [u8], mut f: impl FnMut(Part<'a>)) {
        let mut start = 0;
        if let Some(matcher) = &self.user_defined_matcher {
            // Leftmost-longest, without overlaps: at each position the longest piece there.
            for found in matcher.find_iter(normalized) {
                if found.start() > start {
                    f(Part::Text(&normalized[start..found.start()]));
                }
                f(Part::UserDefined(self.user_defined[found.pattern().as_usize()]));
                start = found.end();
            }
        }
        if normalized.len() > start {
            f(Part::Text(&normalized[start..]));
        }
    }
}

impl SentencePieceNormalizer {
    /// `charsmap` is the model's precompiled_charsmap (empty: no rules); `user_defined` are the
    /// (UTF-8 text, id) of the pieces kept whole.
    pub fn new(
        charsmap: &[u8],
        mut user_defined: Vec<(Vec<u8>, u32)>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
    ) -> Result<Self, CompatError> {
        let (units, replacements) = if charsmap.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            if charsmap.len() < 4 {
                return Err(CompatError::CharsmapHeader {
                    length: charsmap.len(),
                });
            }
            let size = u32::from_le_bytes(charsmap[..4].try_into().unwrap()) as usize;
            if size % 4 != 0 || 4 + size > charsmap.len() {
                return Err(CompatError::CharsmapSize {
                    size,
                    length: charsmap.len(),
                });
            }
            let units = charsmap[4..4 + size]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (units, charsmap[4 + size..].to_vec())
        };
        user_defined.retain(|(piece, _)| !piece.is_empty());
        let user_defined_matcher = if user_defined.is_empty() {
            None
        } else {
            let pieces: Vec<&[u8]> = user_defined.iter().map(|(piece, _)| piece.as_slice()).collect();
            let matcher = literals::builder(&pieces, MatchKind::LeftmostLongest)
                .start_kind(StartKind::Both)
                .build(user_defined.iter().map(|(piece, _)| piece))
                .map_err(|error| CompatError::UserDefinedMatcher(error.to_string()))?;
            Some(matcher)
        };
        let mut may_start = [false; 256];
        for (piece, _) in &user_defined {
            may_start[piece[0] as usize] = true;
        }
        let user_defined_may_start = may_start;
        let mut ascii_kept = [false; 128];
        for byte in 0..128u8 {
            ascii_kept[byte as usize] = !may_start[byte as usize];
        }
        if let Some(&root) = units.first() {
            for byte in 0..=255u8 {
                let Some((position, leaf)) = step(&units, unit_offset(root), byte) else {
                    continue;
                };
                may_start[byte as usize] = true;
                if byte < 0x80 {
                    ascii_kept[byte as usize] &= leaf.is_none()
                        && (0..0x80u8).all(|next| step(&units, position, next).is_none());
                }
            }
        }
        Ok(SentencePieceNormalizer {
            units,
            replacements,
            user_defined: user_defined.iter().map(|&(_, id)| id).collect(),
            user_defined_matcher,
            user_defined_may_start,
            may_start,
            ascii_kept,
            add_dummy_prefix,
            remove_extra_whitespaces,
            escape_whitespaces,
        })
    }
}
