//! Token healing (python/polytok/healing.py) for tokenisers with a pre-tokenisation pattern:
//! the search for the last stable pre-token start of a prompt's text (the last pre-token start
//! that none of a set of probe continuations moves, so that every pre-token before it stays as
//! it is whatever text follows), and `Healer::heal`, which reads the prompt's ids from its end,
//! decodes only what the search needs, and backs up over the tokens after the cut.
use crate::pretokenize::PreTokenizer;

/// Tokens of a prompt's end decoded first when word starts are pre-token starts: a few, then
/// more when its last pre-token does not start a word.
const SHORT_TAIL_TOKENS: usize = 16;
const TAIL_TOKENS: usize = 64;
/// Pre-tokens of the text's end probed first; doubled while every boundary is unstable.
const WINDOW: usize = 2;

/// What an id of the prompt is to the healer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unknown,
    Ordinary,
    Special,
}

/// Why a prompt cannot be healed: the id at this position is no token (or not an id at all).
#[derive(Debug, PartialEq, Eq)]
pub struct NotAToken(pub usize);

/// One tokeniser's healing data: its pre-tokeniser, the probes, every id's bytes, and whether
/// a space or line end before an ASCII letter always starts a pre-token (true of the presets),
/// which lets a long prompt be searched from its last tokens only.
pub struct Healer {
    pretokenizer: PreTokenizer,
    probes: Vec<Vec<u8>>,
    kinds: Vec<Kind>,
    bytes: Vec<u8>,
    starts: Vec<usize>,
    word_starts: bool,
}

impl Healer {
    /// `tokens[id]`: the bytes ordinary id `id` stands for, None for ids that are no ordinary
    /// token; `special_ids` are never backed up over.
    pub fn new(
        pretokenizer: PreTokenizer,
        probes: Vec<Vec<u8>>,
        tokens: &[Option<Vec<u8>>],
        special_ids: &[usize],
        word_starts: bool,
    ) -> Self {
        let mut kinds = Vec::with_capacity(tokens.len());
        let mut bytes = Vec::new();
        let mut starts = Vec::with_capacity(tokens.len() + 1);
        starts.push(0);
        for token in tokens {
            kinds.push(if token.is_some() {
                Kind::Ordinary
            } else {
                Kind::Unknown
            });
            bytes.extend_from_slice(token.as_deref().unwrap_or_default());
            starts.push(bytes.len());
        }
        for &id in special_ids {
            if id >= kinds.len() {
                kinds.resize(id + 1, Kind::Unknown);
                starts.resize(id + 2, bytes.len());
            }
            kinds[id] = Kind::Special;
        }
        Healer {
            pretokenizer,
            probes,
            kinds,
            bytes,
            starts,
            word_starts,
        }
    }

    fn kind(&self, id: u32) -> Kind {
        self.kinds
            .get(id as usize)
            .copied()
            .unwrap_or(Kind::Unknown)
    }

    fn token(&self, id: u32) -> &[u8] {
        &self.bytes[self.starts[id as usize]..self.starts[id as usize + 1]]
    }

    /// The last stable pre-token start of `text` (see `stable_start`), found by the probes
    /// alone (the reference `cut` is tested against).
    pub fn stable_start(&self, text: &[u8]) -> usize {
        stable_start(&self.pretokenizer, text, &self.probes, WINDOW, false)
    }

    /// The last stable pre-token start of `text`, with the presets' word starts taken as
    /// stable without probing.
    fn cut(&self, text: &[u8]) -> usize {
        stable_start(
            &self.pretokenizer,
            text,
            &self.probes,
            WINDOW,
            self.word_starts,
        )
    }

    /// Heals the prompt of `len` ids, `id_at(i)` giving id i (None: not an id): the number of
    /// ids kept and the bytes of the removed ones. It never backs up past a special token; a
    /// prompt that ends in one keeps every id. Only the ids it reads are checked.
    pub fn heal(
        &self,
        len: usize,
        mut id_at: impl FnMut(usize) -> Option<u32>,
    ) -> Result<(usize, Vec<u8>), NotAToken> {
        let mut read = Vec::with_capacity(len.min(TAIL_TOKENS + 1));
        // read[k] is id len - 1 - k; stops after a special token or `limit` ids
        let mut read_back =
            |read: &mut Vec<u32>, limit: usize| -> Result<Option<usize>, NotAToken> {
                while read.len() < limit {
                    let at = len - 1 - read.len();
                    let id = id_at(at).ok_or(NotAToken(at))?;
                    match self.kind(id) {
                        Kind::Unknown => return Err(NotAToken(at)),
                        Kind::Special => return Ok(Some(at + 1)),
                        Kind::Ordinary => read.push(id),
                    }
                }
                Ok(None)
            };
        let mut data = Vec::new();
        let mut tail = read_back(&mut read, len.min(SHORT_TAIL_TOKENS + 1))?;
        if tail.is_none() && read.len() > SHORT_TAIL_TOKENS && self.word_starts {
            // The usual prompt ends in a word: pre-tokenise the last few tokens' text from its
            // last word start; if the last pre-token starts a word too, that is the cut.
            self.decode_into(&read[..SHORT_TAIL_TOKENS], &mut data);
            if let Some(cut) = self.word_cut(&data) {
                return Ok(self.back_up(&read[..SHORT_TAIL_TOKENS], &data, cut, len));
            }
        }
        if tail.is_none() {
            tail = read_back(&mut read, len.min(TAIL_TOKENS + 1))?;
        }
        if tail.is_none() && read.len() > TAIL_TOKENS && self.word_starts {
            // No special token among the last 65 ids: search the text of the last 64 from its
            // last word start before its last 64 bytes, where a pre-token must start.
            self.decode_into(&read[..TAIL_TOKENS], &mut data);
            if let Some(start) = last_word_start(&data) {
                let cut = start + self.cut(&data[start..]);
                if cut > start {
                    return Ok(self.back_up(&read[..TAIL_TOKENS], &data, cut, len));
                }
            }
        }
        if tail.is_none() {
            tail = read_back(&mut read, len)?;
        }
        let tail = tail.unwrap_or(0);
        if tail == len {
            return Ok((len, Vec::new()));
        }
        self.decode_into(&read, &mut data);
        let cut = self.cut(&data);
        Ok(self.back_up(&read, &data, cut, len))
    }

    /// Under the presets, the start of `data`'s last pre-token when it starts a word, found by
    /// pre-tokenising from `data`'s last word start (a pre-token start whatever precedes it).
    fn word_cut(&self, data: &[u8]) -> Option<usize> {
        let start = (0..data.len().saturating_sub(1)).rev().find_map(|at| {
            let before_word =
                matches!(data[at], b' ' | b'\n') && data[at + 1].is_ascii_alphabetic();
            before_word.then(|| if data[at] == b' ' { at } else { at + 1 })
        })?;
        let mut last = start;
        let base = data.as_ptr() as usize;
        self.pretokenizer.for_each_piece(&data[start..], |piece| {
            last = piece.as_ptr() as usize - base
        });
        starts_word(data, last).then_some(last)
    }

    /// The bytes of `reversed` (ids in reverse order) in text order, into `data`.
    fn decode_into(&self, reversed: &[u32], data: &mut Vec<u8>) {
        data.clear();
        for &id in reversed.iter().rev() {
            data.extend_from_slice(self.token(id));
        }
    }

    /// Backs up over the ids (`reversed`, the prompt's last ones, whose text is `data`) that end
    /// after `cut` (a token across it goes too): (ids kept of `len`, the bytes removed).
    fn back_up(&self, reversed: &[u32], data: &[u8], cut: usize, len: usize) -> (usize, Vec<u8>) {
        let mut removed = 0;
        let mut dropped = 0;
        while dropped < reversed.len() && removed < data.len() - cut {
            removed += self.token(reversed[dropped]).len();
            dropped += 1;
        }
        (len - dropped, data[data.len() - removed..].to_vec())
    }
}

/// Byte strings in sorted order, stored back to back, for prefix queries: the strings that
/// start with a prefix are one contiguous run (a trie flattened into a sorted array).
pub struct SortedTokens {
    bytes: Vec<u8>,
    starts: Vec<u32>,
}

impl SortedTokens {
    /// `tokens` must be sorted (byte-wise, as Python sorts bytes).
    pub fn new(tokens: &[Vec<u8>]) -> Self {
        let mut bytes = Vec::new();
        let mut starts = Vec::with_capacity(tokens.len() + 1);
        starts.push(0);
        for token in tokens {
            bytes.extend_from_slice(token);
            starts.push(bytes.len() as u32);
        }
        SortedTokens { bytes, starts }
    }

    fn get(&self, index: usize) -> &[u8] {
        &self.bytes[self.starts[index] as usize..self.starts[index + 1] as usize]
    }

    /// The run low..high of the strings that start with `prefix`.
    pub fn range(&self, prefix: &[u8]) -> (usize, usize) {
        let count = self.starts.len() - 1;
        let (mut low, mut high) = (0, count);
        while low < high {
            let middle = (low + high) / 2;
            if self.get(middle) < prefix {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let start = low;
        high = count;
        while low < high {
            let middle = (low + high) / 2;
            if self.get(middle).starts_with(prefix) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        (start, low)
    }
}

/// Whether a pre-token must start at `at` of `text` under the presets, whatever comes before
/// or after: a space before an ASCII letter, or an ASCII letter after a line end.
fn starts_word(text: &[u8], at: usize) -> bool {
    let letter = |i: usize| text.get(i).is_some_and(u8::is_ascii_alphabetic);
    (text[at] == b' ' && letter(at + 1)) || (at > 0 && text[at - 1] == b'\n' && letter(at))
}

/// Where the pre-tokenisation of `data` may start under the presets: the last space before an
/// ASCII letter, or the letter after the last line end before one, found before `data`'s last
/// 64 bytes (and not at its first byte).
fn last_word_start(data: &[u8]) -> Option<usize> {
    let end = data.len().saturating_sub(64).max(1);
    (1..end.saturating_sub(1)).rev().find_map(|at| {
        let before_word = matches!(data[at], b' ' | b'\n') && data[at + 1].is_ascii_alphabetic();
        before_word.then(|| if data[at] == b' ' { at } else { at + 1 })
    })
}

/// The byte offsets where the pre-tokens of `text` start (the pieces tile the text).
fn piece_starts(pretokenizer: &PreTokenizer, text: &[u8], out: &mut Vec<usize>) {
    out.clear();
    let base = text.as_ptr() as usize;
    pretokenizer.for_each_piece(text, |piece| out.push(piece.as_ptr() as usize - base));
}

/// The last pre-token start of `text` such that pre-tokenising `text + probe` keeps every
/// pre-token before it, for every probe. The probes run on the last `first_window` pre-tokens
/// (pre-tokenising from a pre-token start gives the pieces the whole text has there), doubled
/// while the only start they keep is the window's own; the text's start counts as stable.
/// `word_starts` (the presets): a last pre-token that starts a word is the answer unprobed.
pub fn stable_start(
    pretokenizer: &PreTokenizer,
    text: &[u8],
    probes: &[Vec<u8>],
    first_window: usize,
    word_starts: bool,
) -> usize {
    let mut starts = Vec::new();
    piece_starts(pretokenizer, text, &mut starts);
    let Some(&last) = starts.last() else {
        return 0;
    };
    if word_starts && starts_word(text, last) {
        // under the presets that start holds whatever follows: every probe would keep it
        return last;
    }
    let mut window = first_window.max(1);
    let mut extended_text = Vec::new();
    let mut extended = Vec::new();
    loop {
        let first = starts.len().saturating_sub(window);
        let offset = starts[first];
        let own = &starts[first..];
        let mut agreed = own.len();
        extended_text.clear();
        extended_text.extend_from_slice(&text[offset..]);
        let own_length = extended_text.len();
        for probe in probes {
            extended_text.truncate(own_length);
            extended_text.extend_from_slice(probe);
            piece_starts(pretokenizer, &extended_text, &mut extended);
            let common = agreed.min(extended.len());
            // own[..agreed] are starts both share; the pre-token at the last shared start is
            // the first that may differ, so that start is the cut
            agreed = (0..common)
                .find(|&i| own[i] - offset != extended[i])
                .unwrap_or(common);
            if agreed <= 1 {
                break;
            }
        }
        if agreed >= 2 || first == 0 {
            return own[agreed.max(1) - 1];
        }
        window *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes() -> Vec<Vec<u8>> {
        ["a", "s", "1", " ", "\n", "."]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn a_trailing_space_and_a_word_end_are_unstable() {
        let cl100k = PreTokenizer::new(
            Some(crate::pretokenize::Preset::Cl100k.pattern()),
            Vec::new(),
        )
        .unwrap();
        // "el" + " " + "x" would join the space to the word: the cut is the space's start
        assert_eq!(
            stable_start(&cl100k, b"juega en el ", &probes(), 4, false),
            11
        );
        assert_eq!(
            stable_start(&cl100k, b"juega en el", &probes(), 4, false),
            8
        );
        // digits group in threes from the left: "123" stays, "45" may grow
        assert_eq!(stable_start(&cl100k, b"x 12345", &probes(), 1, false), 5);
        assert_eq!(stable_start(&cl100k, b"", &probes(), 4, false), 0);
        // a last pre-token that starts a word needs no probe, and gets the probes' answer
        assert_eq!(stable_start(&cl100k, b"juega en el", &probes(), 4, true), 8);
        assert_eq!(
            stable_start(&cl100k, b"juega en el ", &probes(), 4, true),
            11
        );
        assert_eq!(stable_start(&cl100k, b"uno\ndos", &probes(), 4, true), 4);
        assert_eq!(stable_start(&cl100k, b"uno\ndos", &probes(), 4, false), 4);
    }

    #[test]
    fn sorted_tokens_give_the_run_of_a_prefix() {
        let tokens: Vec<Vec<u8>> = [&b"a"[..], b"ab", b"abc", b"b", b"\xff", b"\xff\xff"]
            .iter()
            .map(|t| t.to_vec())
            .collect();
        let sorted = SortedTokens::new(&tokens);
        assert_eq!(sorted.range(b"a"), (0, 3));
        assert_eq!(sorted.range(b"ab"), (1, 3));
        assert_eq!(sorted.range(b"abcd"), (3, 3));
        assert_eq!(sorted.range(b""), (0, 6));
        assert_eq!(sorted.range(b"\xff"), (4, 6));
        assert_eq!(sorted.range(b"c"), (4, 4));
    }

    #[test]
    fn heal_backs_up_over_the_tokens_after_the_cut_and_stops_at_specials() {
        let cl100k = PreTokenizer::new(
            Some(crate::pretokenize::Preset::Cl100k.pattern()),
            Vec::new(),
        )
        .unwrap();
        // ids 0..=255 are the bytes; 256 is " el", 257 is "<s>" (special); 258 is no token
        let mut tokens: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
        tokens.push(Some(b" el".to_vec()));
        let healer = Healer::new(cl100k, probes(), &tokens, &[257], true);
        let heal = |ids: &[u32]| healer.heal(ids.len(), |at| ids.get(at).copied());
        let mut prompt: Vec<u32> = b"juega en".iter().map(|&b| b as u32).collect();
        prompt.extend([256, b' ' as u32]);
        // "juega en el ": only the lone space may join the next word
        assert_eq!(heal(&prompt), Ok((prompt.len() - 1, b" ".to_vec())));
        assert_eq!(heal(&[b'a' as u32, 257]), Ok((2, Vec::new())));
        assert_eq!(
            heal(&[b'a' as u32, 257, b'x' as u32]),
            Ok((2, b"x".to_vec()))
        );
        assert_eq!(heal(&[b'a' as u32, 258]), Err(NotAToken(1)));
        // past the first few tokens read: a last word is its own cut; a trailing space is not
        let long: Vec<u32> = b"the quick brown fox jumps over the lazy dog"
            .iter()
            .map(|&b| b as u32)
            .collect();
        assert_eq!(heal(&long), Ok((long.len() - 4, b" dog".to_vec())));
        let spaced: Vec<u32> = b"the quick brown fox jumps over the lazy dog "
            .iter()
            .map(|&b| b as u32)
            .collect();
        assert_eq!(heal(&spaced), Ok((spaced.len() - 1, b" ".to_vec())));
    }
}
