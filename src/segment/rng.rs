//! A tiny seeded random generator (SplitMix64) for subword sampling and BPE dropout: the same
//! seed gives the same draws on every platform and thread count, with no extra dependency.

pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0), for the unit tests' random inputs.
    #[cfg(test)]
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl SplitMix64 {
    /// The generator of document `index` in a batch encoded with `seed`: the same for any thread
    /// count and order of work. The index goes through the mixer first, so the streams of
    /// neighbouring documents are unrelated rather than shifted copies of one another (SplitMix64
    /// seeded with s + k·γ is the stream of s advanced k steps).
    pub fn for_document(seed: u64, index: u64) -> Self {
        SplitMix64::new(seed ^ SplitMix64::new(index).next_u64())
    }
}

/// Up to `how_many` distinct random pre-tokens for the unit tests, each of 1 to `longest`
/// characters of `alphabet` (as UTF-8) with a count drawn uniformly from `counts`, sorted
/// bytewise as counts are; a pre-token drawn twice keeps its last count. The draws, in order:
/// the length, the characters, the count.
#[cfg(test)]
pub fn random_pre_tokens(
    rng: &mut SplitMix64,
    alphabet: &[char],
    how_many: usize,
    longest: usize,
    counts: std::ops::Range<u64>,
) -> Vec<(Vec<u8>, u64)> {
    let mut counted = std::collections::BTreeMap::new();
    for _ in 0..how_many {
        let pre_token: String = (0..1 + rng.below(longest))
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let count = counts.start + rng.below((counts.end - counts.start) as usize) as u64;
        counted.insert(pre_token.into_bytes(), count);
    }
    counted.into_iter().collect()
}
