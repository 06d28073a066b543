//! HF's added tokens found in a text as `tokenizers` finds them: the contents leftmost-longest
//! (Aho-Corasick, so the time is linear in the text whatever the number of tokens), then an
//! `lstrip` token takes the whitespace before it (never past the previous match) and an
//! `rstrip` token the whitespace after it; whitespace is Unicode White_Space, Rust's
//! `char::is_whitespace`, as in `tokenizers`.
use aho_corasick::{AhoCorasick, MatchKind};

use super::CompatError;
use crate::literals;

pub struct AddedTokens {
    matcher: AhoCorasick,
    lstrip: Vec<bool>,
    rstrip: Vec<bool>,
}

/// A stretch of a text: an added token's content (`Some(index)` into the contents, with the
/// whitespace it strips outside `start..end`) or the text between tokens (`None`).
pub type Span = (usize, usize, Option<usize>);

impl AddedTokens {
    /// The matcher of `contents` (non-empty, distinct UTF-8), each with its strip flags.
    pub fn new(
        contents: &[Vec<u8>],
        lstrip: Vec<bool>,
        rstrip: Vec<bool>,
    ) -> Result<Self, CompatError> {
        if lstrip.len() != contents.len()
            || rstrip.len() != contents.len()
            || contents.iter().any(|c| c.is_empty())
        {
            return Err(CompatError::AddedTokens(format!(
                "{} contents (none may be empty), {} lstrip and {} rstrip flags",
                contents.len(),
                lstrip.len(),
                rstrip.len()
            )));
        }
        let matcher = literals::builder(contents, MatchKind::LeftmostLongest)
            .build(contents)
            .map_err(|error| CompatError::AddedTokens(error.to_string()))?;
        Ok(AddedTokens {
            matcher,
            lstrip,
            rstrip,
        })
    }

    /// The index of the leftmost-longest content in `text`, if one occurs.
    pub fn find(&self, text: &[u8]) -> Option<usize> {
        self.matcher
            .find(text)
            .map(|found| found.pattern().as_usize())
    }

    /// `text` (UTF-8) cut into the spans of its added tokens and of the non-empty text between
    /// them, in order, byte offsets; stripped whitespace belongs to no span. As in `tokenizers`,
    /// the next token is looked for from the end of a token's content, so a token starting with
    /// whitespace may begin in the whitespace an `rstrip` token before it took.
    pub fn spans(&self, text: &str) -> Vec<Span> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut taken = 0; // the end of the last token with its stripped whitespace
        let mut at = 0;
        let mut blank_to = 0; // text[e..blank_to] is whitespace for every content end e seen so far up to it
        while let Some(found) = self.matcher.find(&bytes[at..]) {
            let (start, end, index) = (at + found.start(), at + found.end(), found.pattern().as_usize());
            let mut from = start.max(taken);
            if self.lstrip[index] && start > taken {
                from = taken + text[taken..start].trim_end_matches(char::is_whitespace).len();
            }
            let mut to = end;
            if self.rstrip[index] {
                if end >= blank_to {
                    blank_to = bytes.len() - text[end..].trim_start_matches(char::is_whitespace).len();
                }
                to = blank_to;
            }
            if taken < from {
                out.push((taken, from, None));
            }
            out.push((start, end, Some(index)));
            taken = to;
            at = end;
        }
        if taken < bytes.len() {
            out.push((taken, bytes.len(), None));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(contents: &[&str], lstrip: &[bool], rstrip: &[bool]) -> AddedTokens {
        let contents: Vec<Vec<u8>> = contents.iter().map(|c| c.as_bytes().to_vec()).collect();
        AddedTokens::new(&contents, lstrip.to_vec(), rstrip.to_vec()).unwrap()
    }

    #[test]
    fn longest_leftmost_and_the_text_between() {
        let tokens = matcher(&["<a>", "<a><b>", "b"], &[false; 3], &[false; 3]);
        assert_eq!(
            tokens.spans("x<a><b>y<a>b"),
            vec![
                (0, 1, None),
                (1, 7, Some(1)),
                (7, 8, None),
                (8, 11, Some(0)),
                (11, 12, Some(2))
            ]
        );
        assert_eq!(tokens.spans(""), vec![]);
        assert_eq!(tokens.find(b"zz<a"), None);
        assert_eq!(tokens.find(b"zb<a><b>"), Some(2));
    }

    #[test]
    fn stripping_takes_unicode_whitespace_and_never_past_the_previous_token() {
        let tokens = matcher(&["<l>", "<r>"], &[true, false], &[false, true]);
        // U+3000 is White_Space; the lstrip of the second <l> stops at the first's end
        assert_eq!(
            tokens.spans("a \u{3000}<l><l> <r>\t b"),
            vec![
                (0, 1, None),
                (5, 8, Some(0)),
                (8, 11, Some(0)),
                (11, 12, None),
                (12, 15, Some(1)),
                (17, 18, None)
            ]
        );
        assert_eq!(tokens.spans("<r>   "), vec![(0, 3, Some(1))]);
        // a token that starts with whitespace is found inside what an rstrip token took
        let tokens = matcher(&["<r>", " <s>"], &[false, false], &[true, false]);
        assert_eq!(tokens.spans("<r> <s>x"), vec![(0, 3, Some(0)), (3, 7, Some(1)), (7, 8, None)]);
    }

    #[test]
    fn the_time_is_linear_in_tokens_and_text() {
        let contents: Vec<String> = (0..20_000).map(|i| format!("<tok{i}>")).collect();
        let refs: Vec<&str> = contents.iter().map(String::as_str).collect();
        let tokens = matcher(&refs, &vec![true; refs.len()], &vec![true; refs.len()]);
        let text = "word <tok7> ".repeat(20_000) + &" ".repeat(100_000);
        let spans = tokens.spans(&text);
        assert_eq!(
            spans.iter().filter(|span| span.2 == Some(7)).count(),
            20_000
        );
    }
}
