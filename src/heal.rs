//! Token healing's search for the last stable pre-token start (python/polytok/healing.py): the
//! last pre-token start of a prompt's text that none of a set of probe continuations moves, so
//! that every pre-token before it stays as it is whatever text follows.
use crate::pretokenize::PreTokenizer;

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
pub fn stable_start(
    pretokenizer: &PreTokenizer,
    text: &[u8],
    probes: &[Vec<u8>],
    first_window: usize,
) -> usize {
    let mut starts = Vec::new();
    piece_starts(pretokenizer, text, &mut starts);
    if starts.is_empty() {
        return 0;
    }
    let mut window = first_window.max(1);
    let mut extended_text = Vec::new();
    let mut extended = Vec::new();
    loop {
        let first = starts.len().saturating_sub(window);
        let offset = starts[first];
        let own = &starts[first..];
        let mut agreed = own.len();
        for probe in probes {
            extended_text.clear();
            extended_text.extend_from_slice(&text[offset..]);
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
        assert_eq!(stable_start(&cl100k, b"juega en el ", &probes(), 4), 11);
        assert_eq!(stable_start(&cl100k, b"juega en el", &probes(), 4), 8);
        // digits group in threes from the left: "123" stays, "45" may grow
        assert_eq!(stable_start(&cl100k, b"x 12345", &probes(), 1), 5);
        assert_eq!(stable_start(&cl100k, b"", &probes(), 4), 0);
    }
}
