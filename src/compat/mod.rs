pub mod loaded;
pub mod sentencepiece;
