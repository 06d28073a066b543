//! Hand-written matchers for the four preset patterns.
//!
//! Each matcher returns, for a start position, the end of the match Python's `regex.findall`
//! would produce there: the alternatives are tried in the pattern's order, and the greedy,
//! possessive and lookahead parts are resolved directly on the runs of character classes
//! (no backtracking), so every preset splits in linear time. The reasoning for each
//! alternative is next to its code; tests compare with `regex.findall` on arbitrary text.
//!
//! cl100k, nanochat and o200k first try an ASCII fast path: a 256-entry table gives each byte's
//! kind, and a piece made of ASCII bytes is cut from the kinds alone. Whenever the answer could
//! depend on a non-ASCII character (a run reaches one), the fast path gives up and the full
//! matcher decides from the same start, so both paths give the same pieces by construction.
//! Before either, cl100k and o200k cut plain ASCII text 64 bytes at a time from bit masks
//! (`blocks.rs`), up to the first byte that plain text cannot hold.
use super::blocks;
use super::Sink;
use super::classes::{
    decode, CharClasses, DIGIT_BYTE, HIGH_BYTE, LETTER, LOWER, LOWER_BYTE, NEWLINE_BYTE, NUMBER,
    OTHER_BYTE, SPACE, SPACE_BYTE, UPPER_BYTE, UPPER_OR_TITLE,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Gpt2,
    Cl100k,
    O200k,
    Nanochat,
}

// The exact patterns of tiktoken's openai_public.py (gpt2 = r50k_base) and nanochat's
// tokenizer.py; Python's polytok.pretokenize.PRESETS holds the same strings.
const GPT2: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
const O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);
const NANOCHAT: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";

impl Preset {
    pub const ALL: [Preset; 4] = [Preset::Gpt2, Preset::Cl100k, Preset::O200k, Preset::Nanochat];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Gpt2 => "gpt2",
            Preset::Cl100k => "cl100k",
            Preset::O200k => "o200k",
            Preset::Nanochat => "nanochat",
        }
    }

    pub fn pattern(self) -> &'static str {
        match self {
            Preset::Gpt2 => GPT2,
            Preset::Cl100k => CL100K,
            Preset::O200k => O200K,
            Preset::Nanochat => NANOCHAT,
        }
    }

    /// The preset whose pattern is exactly `pattern`, if any.
    pub fn from_pattern(pattern: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|preset| preset.pattern() == pattern)
    }

    /// Calls `f` on each piece of valid UTF-8 `text`, as `regex.findall(pattern, text)` would.
    #[inline]
    pub fn split<'a>(self, text: &'a [u8], f: &mut impl Sink<'a>) {
        #[cfg(target_arch = "x86_64")]
        if matches!(self, Preset::Cl100k | Preset::O200k) && blocks::wide_available() {
            // SAFETY: the CPU has the features `split_wide` is compiled for.
            return unsafe { self.split_wide(text, f) };
        }
        self.split_with::<false>(text, f)
    }

    /// `split` compiled for AVX-512BW, whose block path classifies 64 bytes in one register.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512bw")]
    unsafe fn split_wide<'a>(self, text: &'a [u8], f: &mut impl Sink<'a>) {
        self.split_with::<true>(text, f)
    }

    /// `split`, with `WIDE` (only where AVX-512BW is available) choosing the block classifier.
    #[inline(always)]
    fn split_with<'a, const WIDE: bool>(self, text: &'a [u8], f: &mut impl Sink<'a>) {
        let scanner = Scanner { text, classes: CharClasses::get() };
        match self {
            Preset::Gpt2 => scanner.for_each(f, Scanner::gpt2),
            Preset::Cl100k => scanner.for_each_with_blocks::<WIDE>(f, false, |scanner, start| {
                scanner
                    .gpt4_style_ascii(start, 3, SpaceRule::EndThenLineBreak)
                    .unwrap_or_else(|| scanner.cl100k(start))
            }),
            Preset::O200k => scanner.for_each_with_blocks::<WIDE>(f, true, |scanner, start| {
                scanner.o200k_ascii(start).unwrap_or_else(|| scanner.o200k(start))
            }),
            Preset::Nanochat => scanner.for_each(f, |scanner, start| {
                scanner
                    .gpt4_style_ascii(start, 2, SpaceRule::LineBreakFirst)
                    .unwrap_or_else(|| scanner.nanochat(start))
            }),
        }
    }
}

/// `[^\s\p{L}\p{N}]`: punctuation, symbols, marks, controls, unassigned.
#[inline(always)]
fn is_other(flags: u8) -> bool {
    flags & (LETTER | NUMBER | SPACE) == 0
}

/// What `\s+` sees from a start position: where the run ends, where its last character starts,
/// and the end of its last `\r` or `\n`.
struct SpaceRun {
    end: usize,
    last_start: usize,
    after_last_newline: Option<usize>,
}

/// The order of a preset's alternatives for a whitespace run not claimed by a word or
/// punctuation alternative.
#[derive(Clone, Copy)]
enum SpaceRule {
    /// gpt2: `\s++$|\s+(?!\S)|\s`.
    EndThenLookahead,
    /// cl100k: `\s++$|\s*[\r\n]|\s+(?!\S)|\s`.
    EndThenLineBreak,
    /// nanochat `\s*[\r\n]|\s+(?!\S)|\s+` and o200k `\s*[\r\n]+|\s+(?!\S)|\s+`: the `+` after
    /// `[\r\n]` changes nothing, as `\s*` has already backed off to the last line break.
    LineBreakFirst,
}

struct Scanner<'a> {
    text: &'a [u8],
    classes: &'static CharClasses,
}

impl<'a> Scanner<'a> {
    fn for_each(&self, f: &mut impl Sink<'a>, next_end: impl Fn(&Self, usize) -> usize) {
        let mut start = 0;
        while start < self.text.len() {
            let end = next_end(self, start);
            debug_assert!(end > start);
            f.piece(&self.text[start..end]);
            start = end;
        }
    }

    /// `for_each` for cl100k (`case_split` false) and o200k (true), whose plain text goes
    /// through the block path (`blocks.rs`) and the rest piece by piece through `next_end`.
    /// Where the block path finds nothing, it is tried again only after 1, 2, 4 ... (at most
    /// 16) pieces, so text with little plain ASCII loses little time to it.
    #[inline(always)]
    fn for_each_with_blocks<const WIDE: bool>(
        &self,
        f: &mut impl Sink<'a>,
        case_split: bool,
        next_end: impl Fn(&Self, usize) -> usize,
    ) {
        let (mut start, mut single, mut backoff) = (0, 0u32, 1u32);
        while start < self.text.len() {
            if single == 0 {
                let (next, cut_short) = self.plain_pieces::<WIDE>(start, case_split, f);
                if next > start {
                    start = next;
                    backoff = 1;
                    // The piece at `next` runs to where the stretch ended inside the block
                    // (mostly a byte the block path does not decide, such as U+00A0 or a
                    // curly quote): tried there, the block path would find nothing, so the
                    // next two pieces are the matcher's.
                    single = if cut_short { 2 } else { 0 };
                    continue;
                }
                single = backoff;
                backoff = (2 * backoff).min(16);
            }
            let end = next_end(self, start);
            f.piece(&self.text[start..end]);
            start = end;
            single -= 1;
        }
    }

    /// Passes to `f` the pieces that the block path finds in the 64 bytes from `start` (a piece
    /// start), but the last one, which may run on past them; returns where that one starts
    /// (`start` if there were fewer than 64 bytes or no complete piece), and whether the plain
    /// stretch ended inside the 64 bytes.
    #[inline(always)]
    fn plain_pieces<const WIDE: bool>(&self, start: usize, case_split: bool, f: &mut impl Sink<'a>) -> (usize, bool) {
        let Some(window) = self.text.get(start..start + 64) else {
            return (start, false);
        };
        let (starts, cut_short) = blocks::boundaries::<WIDE>(window.try_into().unwrap(), case_split);
        (f.pieces(self.text, start, start, starts & !1), cut_short)
    }

    /// Flags and byte length of the character at `at` (`at` < len).
    #[inline(always)]
    fn class_at(&self, at: usize) -> (u8, usize) {
        self.classes.at(self.text, at)
    }

    /// Flags of the character at `at`, 0 at the end of the text (nothing matches there).
    #[inline(always)]
    fn flags_at(&self, at: usize) -> u8 {
        if at < self.text.len() {
            self.class_at(at).0
        } else {
            0
        }
    }

    /// The end of the longest run from `at` of characters whose flags satisfy `keep`.
    #[inline(always)]
    fn run(&self, mut at: usize, keep: impl Fn(u8) -> bool) -> usize {
        let text = self.text;
        while at < text.len() {
            let byte = text[at];
            if byte < 0x80 {
                if !keep(self.classes.ascii(byte)) {
                    break;
                }
                at += 1;
            } else {
                let (code_point, length) = decode(text, at);
                if !keep(self.classes.of(code_point)) {
                    break;
                }
                at += length;
            }
        }
        at
    }

    /// `run` of letters (`\p{L}`): a three-byte character is a letter without decoding it where
    /// its first two bytes say so (see `CharClasses::letter_prefix`).
    #[inline(always)]
    fn letters(&self, mut at: usize) -> usize {
        let text = self.text;
        while at < text.len() {
            let byte = text[at];
            if byte < 0x80 {
                if self.classes.ascii(byte) & LETTER == 0 {
                    break;
                }
                at += 1;
            } else if (0xE0..0xF0).contains(&byte) && self.classes.letter_prefix(byte, text[at + 1]) {
                at += 3;
            } else {
                let (code_point, length) = decode(text, at);
                if self.classes.of(code_point) & LETTER == 0 {
                    break;
                }
                at += length;
            }
        }
        at
    }

    /// The end of at most `limit` characters of `\p{N}` from `at`.
    #[inline(always)]
    fn numbers(&self, mut at: usize, limit: usize) -> usize {
        for _ in 0..limit {
            if at >= self.text.len() {
                break;
            }
            let (flags, length) = self.class_at(at);
            if flags & NUMBER == 0 {
                break;
            }
            at += length;
        }
        at
    }

    /// The end of the run of bytes from `at` that are in `set` (ASCII only).
    #[inline(always)]
    fn bytes_in(&self, mut at: usize, set: &[u8]) -> usize {
        while at < self.text.len() && set.contains(&self.text[at]) {
            at += 1;
        }
        at
    }

    /// The whitespace run from `at`, which holds at least one whitespace character.
    #[inline(always)]
    fn space_run(&self, start: usize) -> SpaceRun {
        let text = self.text;
        let mut run = SpaceRun { end: start, last_start: start, after_last_newline: None };
        while run.end < text.len() {
            let byte = text[run.end];
            let length = if byte < 0x80 {
                if self.classes.ascii(byte) & SPACE == 0 {
                    break;
                }
                if byte == b'\n' || byte == b'\r' {
                    run.after_last_newline = Some(run.end + 1);
                }
                1
            } else {
                let (code_point, length) = decode(text, run.end);
                if self.classes.of(code_point) & SPACE == 0 {
                    break;
                }
                length
            };
            run.last_start = run.end;
            run.end += length;
        }
        run
    }

    /// `[^\r\n\p{L}\p{N}]`, the optional character the word alternatives may start with.
    #[inline(always)]
    fn is_word_prefix(&self, at: usize, flags: u8) -> bool {
        flags & (LETTER | NUMBER) == 0 && self.text[at] != b'\n' && self.text[at] != b'\r'
    }

    /// The lower-cased ASCII byte at `at`, with `ſ` (long s, which `(?i)` matches to `s`) as `s`,
    /// and its byte length; `None` at the end of the text.
    #[inline(always)]
    fn folded_at(&self, at: usize) -> Option<(u8, usize)> {
        match self.text.get(at..)? {
            [0xC5, 0xBF, ..] => Some((b's', 2)),
            [byte, ..] => Some((byte.to_ascii_lowercase(), 1)),
            [] => None,
        }
    }

    /// The end of `(?:[sdmt]|ll|ve|re)` right after an apostrophe at `at`, case-insensitively
    /// when `ignore_case` (the `(?i)` of cl100k, nanochat and o200k); o200k's list is the same.
    #[inline(always)]
    fn contraction_after(&self, at: usize, ignore_case: bool) -> Option<usize> {
        let read = |position: usize| {
            if ignore_case {
                self.folded_at(position)
            } else {
                self.text.get(position).map(|&byte| (byte, 1))
            }
        };
        let (first, length) = read(at)?;
        match first {
            b's' | b'd' | b'm' | b't' => Some(at + length),
            b'l' | b'v' | b'r' => {
                let expected = if first == b'l' { b'l' } else { b'e' };
                match read(at + length)? {
                    (second, second_length) if second == expected => Some(at + length + second_length),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `'(?:[sdmt]|ll|ve|re)` (with or without `(?i)`) at `at`.
    #[inline(always)]
    fn contraction(&self, at: usize, ignore_case: bool) -> Option<usize> {
        if self.text[at] == b'\'' {
            self.contraction_after(at + 1, ignore_case)
        } else {
            None
        }
    }

    /// The preset's whitespace alternatives (see `SpaceRule`) from whitespace at `start`.
    #[inline(always)]
    fn space(&self, start: usize, rule: SpaceRule) -> usize {
        self.space_rule(start, self.space_run(start), rule)
    }

    /// The end of the whitespace piece at `start`, given the whitespace run from there.
    #[inline(always)]
    fn space_rule(&self, start: usize, run: SpaceRun, rule: SpaceRule) -> usize {
        let line_break = match rule {
            SpaceRule::EndThenLookahead => None,
            _ => run.after_last_newline,
        };
        if let (SpaceRule::LineBreakFirst, Some(end)) = (rule, line_break) {
            return end;
        }
        if run.end == self.text.len() {
            // `\s++$`, or `\s+(?!\S)` with nothing after the run.
            return run.end;
        }
        if let Some(end) = line_break {
            // `\s*[\r\n]`: the greedy `\s*` backs off to the run's last line break.
            return end;
        }
        if run.last_start > start {
            // `\s+(?!\S)`: a run followed by a non-space gives back its last character, so
            // that character can start the next piece (a space before a word joins the word).
            return run.last_start;
        }
        run.end // `\s` (or `\s+`) on a single whitespace character
    }

    /// The word, number and punctuation alternatives shared by cl100k and nanochat:
    /// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]++[\r\n]*`.
    #[inline(always)]
    fn gpt4_style(&self, start: usize, digits: usize) -> Option<usize> {
        let (flags, length) = self.class_at(start);
        // A letter cannot start a contraction, so testing it first keeps the pattern's order.
        if flags & LETTER != 0 {
            return Some(self.letters(start + length));
        }
        if let Some(end) = self.contraction(start, true) {
            return Some(end);
        }
        // `?+` is possessive: once the prefix is taken, a letter must follow or the alternative fails.
        if self.is_word_prefix(start, flags) && self.flags_at(start + length) & LETTER != 0 {
            return Some(self.letters(start + length));
        }
        if flags & NUMBER != 0 {
            return Some(self.numbers(start, digits));
        }
        // ` ?` keeps a space only if punctuation follows it.
        let other_start = if self.text[start] == b' ' { start + 1 } else { start };
        if other_start < self.text.len() && is_other(self.flags_at(other_start)) {
            let end = self.run(other_start, is_other);
            return Some(self.bytes_in(end, b"\r\n"));
        }
        None
    }

    fn cl100k(&self, start: usize) -> usize {
        self.gpt4_style(start, 3).unwrap_or_else(|| self.space(start, SpaceRule::EndThenLineBreak))
    }

    fn nanochat(&self, start: usize) -> usize {
        self.gpt4_style(start, 2).unwrap_or_else(|| self.space(start, SpaceRule::LineBreakFirst))
    }

    /// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`.
    fn gpt2(&self, start: usize) -> usize {
        if let Some(end) = self.contraction(start, false) {
            return end;
        }
        // Each ` ?` keeps a leading space only if its alternative's class follows it.
        let body = if self.text[start] == b' ' && start + 1 < self.text.len() { start + 1 } else { start };
        let flags = self.flags_at(body);
        if flags & LETTER != 0 {
            self.letters(body)
        } else if flags & NUMBER != 0 {
            self.run(body, |f| f & NUMBER != 0)
        } else if is_other(flags) {
            self.run(body, is_other)
        } else {
            self.space(start, SpaceRule::EndThenLookahead)
        }
    }

    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` from `at`. The greedy upper
    /// run backs off until the lower run can start: after the whole upper run if a lowercase
    /// letter follows, else at the run's last character that is also "lower" (Lm, Lo, M).
    #[inline(always)]
    fn o200k_lower_word(&self, at: usize) -> Option<usize> {
        let text = self.text;
        let mut end = at;
        let mut after_last_lower = None;
        while end < text.len() {
            let (flags, length) = self.class_at(end);
            if flags & UPPER_OR_TITLE == 0 {
                // Not upper, so lower only if it is a lowercase letter: the lower run starts here.
                if flags & LOWER != 0 {
                    return Some(self.run(end + length, |f| f & LOWER != 0));
                }
                break;
            }
            end += length;
            if flags & LOWER != 0 {
                after_last_lower = Some(end);
            }
        }
        after_last_lower
    }

    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` from `at`.
    #[inline(always)]
    fn o200k_upper_word(&self, at: usize) -> Option<usize> {
        let upper_end = self.run(at, |f| f & UPPER_OR_TITLE != 0);
        (upper_end > at).then(|| self.run(upper_end, |f| f & LOWER != 0))
    }

    /// The o200k pattern: two word alternatives (each with an optional leading non-letter and
    /// an optional case-insensitive contraction), `\p{N}{1,3}`, ` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
    /// `\s*[\r\n]+`, `\s+(?!\S)`, `\s+`.
    fn o200k(&self, start: usize) -> usize {
        let (flags, length) = self.class_at(start);
        let prefixed = self.is_word_prefix(start, flags);
        // Each word alternative tries its optional prefix first (`?` is greedy), then without.
        let word = (prefixed.then(|| self.o200k_lower_word(start + length)).flatten())
            .or_else(|| self.o200k_lower_word(start))
            .or_else(|| prefixed.then(|| self.o200k_upper_word(start + length)).flatten())
            .or_else(|| self.o200k_upper_word(start));
        if let Some(end) = word {
            let contraction = if end < self.text.len() { self.contraction(end, true) } else { None };
            return contraction.unwrap_or(end);
        }
        if flags & NUMBER != 0 {
            return self.numbers(start, 3);
        }
        let other_start = if self.text[start] == b' ' { start + 1 } else { start };
        if other_start < self.text.len() && is_other(self.flags_at(other_start)) {
            let end = self.run(other_start, is_other);
            return self.bytes_in(end, b"\r\n/");
        }
        self.space(start, SpaceRule::LineBreakFirst)
    }
}

const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// `byte` in every byte of a word.
const fn splat(byte: u8) -> u64 {
    0x0101_0101_0101_0101 * byte as u64
}

/// The high bit of each byte of `word` set where that byte is in `low..=high` (ASCII bounds).
/// The high bits are cleared before adding, so no sum carries into the next byte.
#[inline(always)]
fn bytes_between(word: u64, low: u8, high: u8) -> u64 {
    let seven_bits = word & !HIGH_BITS;
    let at_least_low = seven_bits.wrapping_add(splat(0x80 - low));
    let above_high = seven_bits.wrapping_add(splat(0x7F - high));
    at_least_low & !above_high & !word & HIGH_BITS
}

/// For the letter kinds (`UPPER_BYTE`, `LOWER_BYTE` or both), the word-at-a-time test of
/// membership; None for other kinds. `A-Z` or'ed with 0x20 is `a-z`, and nothing else is.
#[inline(always)]
fn letter_ranges(kinds: u8) -> Option<fn(u64) -> u64> {
    match kinds {
        UPPER_BYTE => Some(|word| bytes_between(word, b'A', b'Z')),
        LOWER_BYTE => Some(|word| bytes_between(word, b'a', b'z')),
        LETTER_BYTES => Some(|word| bytes_between(word | splat(0x20), b'a', b'z')),
        _ => None,
    }
}

const LETTER_BYTES: u8 = UPPER_BYTE | LOWER_BYTE;

/// The ASCII fast path: each function returns the end of the piece at `start` when ASCII bytes
/// alone decide it, and None as soon as a run reaches a non-ASCII byte (whose class could change
/// the answer); the full matcher then decides.
impl<'a> Scanner<'a> {
    /// The fast-path kind of the byte at `at`, 0 (no kind: every run stops) at the end.
    #[inline(always)]
    fn kind_at(&self, at: usize) -> u8 {
        match self.text.get(at) {
            Some(&byte) => self.classes.kind(byte),
            None => 0,
        }
    }

    /// The end of the run from `at` of bytes whose kind is in `kinds`; None if it stops at a
    /// non-ASCII byte.
    #[inline(always)]
    fn ascii_run(&self, mut at: usize, kinds: u8) -> Option<usize> {
        let text = self.text;
        if let Some(ranges) = letter_ranges(kinds) {
            // Eight bytes at a time: the run's length within a word is one count of zero bits.
            while let Some(chunk) = text.get(at..at + 8) {
                let word = u64::from_le_bytes(chunk.try_into().unwrap());
                let inside = ranges(word);
                let length = (!inside & HIGH_BITS).trailing_zeros() as usize / 8;
                at += length;
                if length < 8 {
                    return (self.classes.kind(text[at]) != HIGH_BYTE).then_some(at);
                }
            }
        }
        while at < text.len() {
            let kind = self.classes.kind(text[at]);
            if kind & kinds == 0 {
                return (kind != HIGH_BYTE).then_some(at);
            }
            at += 1;
        }
        Some(at)
    }

    /// The end of at most `limit` ASCII digits from `at`; None if fewer stop at a non-ASCII byte
    /// (which could be a number).
    #[inline(always)]
    fn ascii_digits(&self, start: usize, limit: usize) -> Option<usize> {
        let end = self.text.len().min(start + limit);
        let mut at = start;
        while at < end {
            match self.classes.kind(self.text[at]) {
                DIGIT_BYTE => at += 1,
                HIGH_BYTE => return None,
                _ => break,
            }
        }
        Some(at)
    }

    /// The preset's whitespace alternatives from ASCII whitespace at `start`; None if the run
    /// reaches a non-ASCII byte (which could be whitespace).
    #[inline(always)]
    fn ascii_space(&self, start: usize, rule: SpaceRule) -> Option<usize> {
        let text = self.text;
        let mut at = start;
        let mut after_last_newline = None;
        while at < text.len() {
            let kind = self.classes.kind(text[at]);
            if kind & (SPACE_BYTE | NEWLINE_BYTE) == 0 {
                if kind == HIGH_BYTE {
                    return None;
                }
                break;
            }
            if kind == NEWLINE_BYTE {
                after_last_newline = Some(at + 1);
            }
            at += 1;
        }
        let run = SpaceRun { end: at, last_start: at - 1, after_last_newline };
        Some(self.space_rule(start, run, rule))
    }

    /// ` ?[^\s\p{L}\p{N}]++` from `at` (an ASCII punctuation byte), then the bytes of `trail`.
    #[inline(always)]
    fn ascii_other(&self, at: usize, trail: &[u8]) -> Option<usize> {
        let end = self.ascii_run(at, OTHER_BYTE)?;
        Some(self.bytes_in(end, trail))
    }

    /// cl100k and nanochat: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,digits}|
    /// ?[^\s\p{L}\p{N}]++[\r\n]*` and the whitespace alternatives of `rule`.
    #[inline(always)]
    fn gpt4_style_ascii(&self, start: usize, digits: usize, rule: SpaceRule) -> Option<usize> {
        let kind = self.classes.kind(self.text[start]);
        match kind {
            UPPER_BYTE | LOWER_BYTE => return self.ascii_run(start + 1, LETTER_BYTES),
            DIGIT_BYTE => return self.ascii_digits(start, digits),
            NEWLINE_BYTE => return self.ascii_space(start, rule),
            HIGH_BYTE => return None,
            _ => {} // whitespace or punctuation: it may be the prefix of a word
        }
        if let Some(end) = self.contraction(start, true) {
            return Some(end);
        }
        let next = self.kind_at(start + 1);
        if next & LETTER_BYTES != 0 {
            return self.ascii_run(start + 2, LETTER_BYTES);
        }
        if next == HIGH_BYTE {
            return None;
        }
        if kind == OTHER_BYTE {
            return self.ascii_other(start, b"\r\n");
        }
        if self.text[start] == b' ' && next == OTHER_BYTE {
            return self.ascii_other(start + 1, b"\r\n");
        }
        self.ascii_space(start, rule)
    }

    /// o200k's `[\p{Lu}..]*[\p{Ll}..]+|[\p{Lu}..]+[\p{Ll}..]*` on ASCII letters from `at` (a
    /// letter), with the optional contraction: upper case, then lower case.
    #[inline(always)]
    fn o200k_ascii_word(&self, at: usize) -> Option<usize> {
        let end = match self.ascii_word_in_eight(at) {
            Some(end) => end?,
            None => {
                let upper_end = self.ascii_run(at, UPPER_BYTE)?;
                self.ascii_run(upper_end, LOWER_BYTE)?
            }
        };
        if end < self.text.len() {
            if let Some(contraction_end) = self.contraction(end, true) {
                return Some(contraction_end);
            }
        }
        Some(end)
    }

    /// The upper-case run then the lower-case run from `at`, as the two `ascii_run`s give them,
    /// from one load of the 8 bytes there: Some(the end, or None if the runs stop at a non-ASCII
    /// byte) when both runs end within those bytes; None when they do not (or fewer than 8 bytes
    /// are left), and the `ascii_run`s decide.
    #[inline(always)]
    fn ascii_word_in_eight(&self, at: usize) -> Option<Option<usize>> {
        let chunk = self.text.get(at..at + 8)?;
        let word = u64::from_le_bytes(chunk.try_into().unwrap());
        let upper = bytes_between(word, b'A', b'Z');
        let lower = bytes_between(word, b'a', b'z');
        // Bytes are little-endian: byte k is bits 8k..8k + 8, its flag the top one.
        let upper_length = (!upper & HIGH_BITS).trailing_zeros() / 8;
        if upper_length == 8 {
            return None;
        }
        let shift = 8 * upper_length;
        let lower_length = (!(lower >> shift) & (HIGH_BITS >> shift)).trailing_zeros() / 8;
        let length = (upper_length + lower_length) as usize;
        if length >= 8 {
            return None;
        }
        // The runs stop at byte `length` of the word: a non-ASCII byte there could be a letter.
        let stop_is_ascii = (word >> (8 * length)) & 0x80 == 0;
        Some(stop_is_ascii.then_some(at + length))
    }

    /// o200k: the two word alternatives, `\p{N}{1,3}`, ` ?[^\s\p{L}\p{N}]+[\r\n/]*` and the
    /// whitespace alternatives.
    #[inline(always)]
    fn o200k_ascii(&self, start: usize) -> Option<usize> {
        let kind = self.classes.kind(self.text[start]);
        match kind {
            UPPER_BYTE | LOWER_BYTE => return self.o200k_ascii_word(start),
            DIGIT_BYTE => return self.ascii_digits(start, 3),
            NEWLINE_BYTE => return self.ascii_space(start, SpaceRule::LineBreakFirst),
            HIGH_BYTE => return None,
            _ => {} // whitespace or punctuation: it may be the prefix of a word
        }
        let next = self.kind_at(start + 1);
        if next & (UPPER_BYTE | LOWER_BYTE) != 0 {
            return self.o200k_ascii_word(start + 1);
        }
        if next == HIGH_BYTE {
            return None;
        }
        if kind == OTHER_BYTE {
            return self.ascii_other(start, b"\r\n/");
        }
        if self.text[start] == b' ' && next == OTHER_BYTE {
            return self.ascii_other(start + 1, b"\r\n/");
        }
        self.ascii_space(start, SpaceRule::LineBreakFirst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_load_of_eight_bytes_gives_the_runs_of_the_byte_kinds() {
        // Every window of 8 bytes over a few bytes of each kind, and the end of the text.
        let alphabet = [b'A', b'Z', b'a', b'z', b'@', b'[', b'`', b'{', b' ', b'\'', b'1', 0x80, 0xC3, 0x7F];
        let mut state = 12345u64;
        for _ in 0..20000 {
            let length = 1 + (state % 12) as usize;
            let text: Vec<u8> = (0..length)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    alphabet[(state >> 33) as usize % alphabet.len()]
                })
                .collect();
            let scanner = Scanner { text: &text, classes: CharClasses::get() };
            let by_runs = scanner
                .ascii_run(0, UPPER_BYTE)
                .and_then(|upper_end| scanner.ascii_run(upper_end, LOWER_BYTE));
            if let Some(fused) = scanner.ascii_word_in_eight(0) {
                assert_eq!(fused, by_runs, "{text:?}");
            } else {
                assert!(text.len() < 8 || by_runs.is_none_or(|end| end >= 8), "{text:?}");
            }
        }
    }

    #[test]
    fn word_at_a_time_letter_tests_equal_the_byte_kinds() {
        let classes = CharClasses::get();
        for kinds in [UPPER_BYTE, LOWER_BYTE, LETTER_BYTES] {
            let ranges = letter_ranges(kinds).unwrap();
            for byte in 0..=255u8 {
                let expected = classes.kind(byte) & kinds != 0;
                // Alone, and between neighbours that could carry into it.
                for fill in [0x00, 0x7F, 0x80, 0xFF, b'z', b'A'] {
                    let mut bytes = [fill; 8];
                    bytes[3] = byte;
                    let inside = ranges(u64::from_le_bytes(bytes));
                    assert_eq!(inside >> 31 & 1 == 1, expected, "kinds {kinds} byte {byte:#x} fill {fill:#x}");
                }
            }
        }
    }
}
