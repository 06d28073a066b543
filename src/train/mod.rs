pub mod bpe;
pub mod unigram;
pub mod wordpiece;
