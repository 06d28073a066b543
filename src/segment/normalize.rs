//! SentencePiece's normaliser, for loaded `.model` files: a precompiled charsmap (a darts-clone
//! double-array trie over UTF-8 whose leaves point at NUL-terminated replacements), longest rule
//! first; user-defined pieces kept as they are; whitespace removal, `▁` for spaces and the
//! dummy prefix. The Python version in formats/sentencepiece.py states the rules; this one is the
//! same loop over bytes, fast.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

const REPLACEMENT_CHARACTER: &[u8] = "\u{FFFD}".as_bytes();

#[pyclass(module = "polytok._core", frozen)]
pub struct SentencePieceNormalizer {
    units: Vec<u32>,
    replacements: Vec<u8>,
    /// User-defined pieces, longest first: the first that starts the input wins.
    user_defined: Vec<Vec<u8>>,
    /// Whether any charsmap rule or user-defined piece starts with each byte; the other bytes
    /// (most of ASCII) are copied without a lookup.
    may_start: [bool; 256],
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
}

#[inline]
fn unit_offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
}

/// The byte length of the valid UTF-8 character at `data[at]`, or 0 for an invalid byte.
fn char_length(data: &[u8], at: usize) -> usize {
    let length = match data[at] {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 0,
    };
    if at + length <= data.len() && std::str::from_utf8(&data[at..at + length]).is_ok() {
        length
    } else {
        0
    }
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
            position ^= byte as usize;
            let Some(&unit) = units.get(position) else { break };
            if unit & ((1 << 31) | 0xff) != byte as u32 {
                break;
            }
            position ^= unit_offset(unit);
            if (unit >> 8) & 1 == 1 {
                let Some(&leaf) = units.get(position) else { break };
                found = Some((index + 1 - start, (leaf & ((1 << 31) - 1)) as usize));
            }
        }
        let (length, offset) = found?;
        let tail = self.replacements.get(offset..)?;
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        Some((length, &tail[..end]))
    }

    /// What the input at `at` becomes, and how many bytes it takes.
    fn prefix<'a>(&'a self, data: &'a [u8], at: usize) -> (&'a [u8], usize) {
        if !self.may_start[data[at] as usize] && data[at] < 0x80 {
            return (&data[at..at + 1], 1);
        }
        for piece in &self.user_defined {
            if data[at..].starts_with(piece) {
                return (&data[at..at + piece.len()], piece.len());
            }
        }
        if let Some((length, replacement)) = self.longest_rule(data, at) {
            return (replacement, length);
        }
        match char_length(data, at) {
            0 => (REPLACEMENT_CHARACTER, 1),
            length => (&data[at..at + length], length),
        }
    }

    pub fn normalize_bytes(&self, data: &[u8]) -> Vec<u8> {
        let space: &[u8] = if self.escape_whitespaces { "\u{2581}".as_bytes() } else { b" " };
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
}

#[pymethods]
impl SentencePieceNormalizer {
    /// `charsmap` is the model's precompiled_charsmap (empty: no rules).
    #[new]
    #[pyo3(signature = (charsmap, user_defined, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces))]
    fn new(
        charsmap: &[u8],
        mut user_defined: Vec<Vec<u8>>,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
    ) -> PyResult<Self> {
        let (units, replacements) = if charsmap.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            if charsmap.len() < 4 {
                return Err(PyValueError::new_err("the charsmap is shorter than its 4-byte header"));
            }
            let size = u32::from_le_bytes(charsmap[..4].try_into().unwrap()) as usize;
            if size % 4 != 0 || 4 + size > charsmap.len() {
                return Err(PyValueError::new_err(format!("the charsmap's trie size {size} does not fit its {} bytes", charsmap.len())));
            }
            let units = charsmap[4..4 + size].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
            (units, charsmap[4 + size..].to_vec())
        };
        user_defined.retain(|piece| !piece.is_empty());
        user_defined.sort_by_key(|piece| std::cmp::Reverse(piece.len()));
        let mut may_start = [false; 256];
        for piece in &user_defined {
            may_start[piece[0] as usize] = true;
        }
        if let Some(&root) = units.first() {
            for byte in 0..=255u8 {
                let position = unit_offset(root) ^ byte as usize;
                may_start[byte as usize] |= units.get(position).is_some_and(|&unit| unit & ((1 << 31) | 0xff) == byte as u32);
            }
        }
        Ok(SentencePieceNormalizer {
            units,
            replacements,
            user_defined,
            may_start,
            add_dummy_prefix,
            remove_extra_whitespaces,
            escape_whitespaces,
        })
    }

    /// The normalised UTF-8 bytes of `text` (UTF-8 bytes).
    fn normalize<'py>(&self, py: Python<'py>, text: &[u8]) -> Bound<'py, PyBytes> {
        let out = py.detach(|| self.normalize_bytes(text));
        PyBytes::new(py, &out)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SentencePieceNormalizer>()?;
    Ok(())
}
