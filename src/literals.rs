//! The Aho-Corasick matchers of literal strings (special tokens, added tokens, user-defined
//! pieces) all come from `builder`: it lets the library pick its fastest automaton for short
//! patterns, but never a DFA for long ones, whose construction takes seconds for one
//! 30,000-byte token (a file from a stranger may hold such a token) where an NFA takes
//! milliseconds.
use aho_corasick::{AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// Total pattern bytes above which the matcher is a contiguous NFA, never a DFA.
const DFA_PATTERN_BYTES: usize = 4096;

/// A builder of `match_kind` for `patterns`, with an automaton whose construction is linear in
/// the patterns' length.
pub fn builder<P: AsRef<[u8]>>(patterns: &[P], match_kind: MatchKind) -> AhoCorasickBuilder {
    let total: usize = patterns.iter().map(|pattern| pattern.as_ref().len()).sum();
    let mut builder = AhoCorasickBuilder::new();
    builder.match_kind(match_kind);
    if total > DFA_PATTERN_BYTES {
        builder.kind(Some(AhoCorasickKind::ContiguousNFA));
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_pattern_gets_an_nfa_that_still_finds_it() {
        let long = vec![vec![b'a'; 100_000]];
        let matcher = builder(&long, MatchKind::LeftmostLongest).build(&long).unwrap();
        assert_eq!(matcher.kind(), AhoCorasickKind::ContiguousNFA);
        let text = [b"x".as_slice(), &long[0], b"a"].concat();
        let found = matcher.find(&text[..]).unwrap();
        assert_eq!((found.start(), found.end()), (1, 100_001));
        let short = ["<|endoftext|>"];
        assert_eq!(builder(&short, MatchKind::LeftmostLongest).build(short).unwrap().kind(), AhoCorasickKind::DFA);
    }
}
