"""SentencePiece `.model` files (BPE and Unigram), read and written without the sentencepiece
package: a small protobuf wire-format reader takes the fields of sentencepiece_model.proto that
encoding needs, and a writer produces them for the polytok tokenisers the format can hold
(`check_sentencepiece_exportable` says which, and why).

Encoding follows SentencePiece exactly: its normaliser (the precompiled charsmap, longest rule
first; whitespace removal; `▁` for spaces; the dummy prefix), user-defined pieces kept whole,
then BPE by piece score or Unigram's Viterbi, and unknown pieces as their bytes when the model
has byte fallback. Decoding follows its decoder too (control pieces vanish, `<unk>` shows as
" ⁇ ", the dummy prefix space goes). Offsets replay the normaliser in Python with
SentencePiece's alignment and give each piece the span the library gives it.
"""
from polytok.formats.sentencepiece.proto import parse_message
from polytok.formats.sentencepiece.read import (BPE, BYTE, CONTROL, MODEL_TYPES, NORMAL, SPACE, UNIGRAM, UNKNOWN, UNUSED,
                                                USER_DEFINED, SentencePiecePipeline, load_sentencepiece, read_model,
                                                tokenizer_from_sentencepiece)
from polytok.formats.sentencepiece.write import check_sentencepiece_exportable, save_sentencepiece, sentencepiece_model

__all__ = [
    "BPE", "BYTE", "CONTROL", "MODEL_TYPES", "NORMAL", "SPACE", "UNIGRAM", "UNKNOWN", "UNUSED", "USER_DEFINED",
    "SentencePiecePipeline", "check_sentencepiece_exportable", "load_sentencepiece", "parse_message", "read_model",
    "save_sentencepiece", "sentencepiece_model", "tokenizer_from_sentencepiece",
]
