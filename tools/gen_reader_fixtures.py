"""Writes tests/data/readers/: small HF tokenizer.json files and SentencePiece models trained
with the peer libraries on the tests/data excerpts, and expected.json with the ids and decoded
text those libraries give on a few texts. tests/formats/test_readers.py loads the files with
polytok and checks it gives the same, without the peer libraries installed. Run once with
`tokenizers` and `sentencepiece` installed; commit what it writes:

    python tools/gen_reader_fixtures.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import sentencepiece
import tokenizers
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from polytok.formats.sentencepiece import read_model  # noqa: E402

DATA = ROOT / "tests" / "data"
OUT = DATA / "readers"

# Training text: every other line of the excerpts in Latin script (few characters, so small
# vocabularies cover them); the checked texts come from the other lines, Chinese among them.
LINES = [line for path in sorted(DATA.glob("*.txt")) if "zh-CN" not in path.name
         for line in path.read_text(encoding="utf-8").splitlines()]
TRAIN, HELD_OUT = LINES[::2], [line for line in LINES[1::2] if line.strip()]
TEXTS = HELD_OUT[::400][:12] + (DATA / "handbook-zh-CN.txt").read_text(encoding="utf-8").splitlines()[10:12] + [
    "", "  Hello  World!! ", "<|endoftext|>x<|endoftext|>", "New York new york", "[SEP] a [MASK]b", "ＡＢＣ①ﬁ é e\u0301",
    "中文字符 🙂 👩‍👩‍👧", "don't stop 1234567890", "\t\u00a0tab\u3000", "▁▁ <0x41> <unk> <s>",
]
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]


def byte_level_bpe() -> tokenizers.Tokenizer:
    """GPT-2's layout: ByteLevel with its regex (polytok's fast path: its regex and merges)."""
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return hf


def byte_level_nfc_bpe() -> tokenizers.Tokenizer:
    """Byte-level BPE behind an NFC normaliser and a prefix space, with added tokens of each kind."""
    hf = tokenizers.Tokenizer(models.BPE())
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    hf.add_special_tokens([AddedToken("[MASK]", lstrip=True), AddedToken("[SEP]", rstrip=True)])
    hf.add_tokens([AddedToken("New York", normalized=True)])
    return hf


def llama_bpe() -> tokenizers.Tokenizer:
    """Llama 2's layout: "▁" for spaces by normalisers, byte fallback, a decoder sequence."""
    hf = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    hf.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>", "<s>", "</s>", *BYTE_TOKENS],
                                                      show_progress=False))
    # as in Llama's file, the byte tokens are vocabulary entries, not added tokens
    record = json.loads(hf.to_str())
    record["added_tokens"] = record["added_tokens"][:3]
    return tokenizers.Tokenizer.from_str(json.dumps(record))


def wordpiece() -> tokenizers.Tokenizer:
    """BERT's layout: BertNormalizer, BertPreTokenizer, the WordPiece decoder."""
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.train_from_iterator(TRAIN, trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                                            limit_alphabet=150, show_progress=False))
    return hf


def unigram(charsmap: bytes) -> tokenizers.Tokenizer:
    """A Unigram model behind a Precompiled normaliser (SentencePiece's character map) and Metaspace."""
    hf = tokenizers.Tokenizer(models.Unigram())
    hf.normalizer = normalizers.Precompiled(charsmap)
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                          unk_token="<unk>", show_progress=False))
    return hf


HF_FILES = {
    "hf-bpe-byte-level.json": byte_level_bpe,
    "hf-bpe-byte-level-nfc.json": byte_level_nfc_bpe,
    "hf-bpe-llama.json": llama_bpe,
    "hf-wordpiece.json": wordpiece,
}

# A few normalisation rules (code points -> code points), compiled by SentencePiece into a small
# precompiled character map; the standard nmt_nfkc map alone is 240 KB.
NORMALIZATION_RULES = {"FB01": "66 69", "2460": "31", "FF21": "41", "FF22": "42", "FF23": "43", "3000": "20", "65 301": "E9"}

SENTENCEPIECE_MODELS = {
    "sp-unigram.model": dict(model_type="unigram", vocab_size=300),
    "sp-bpe-bytes.model": dict(model_type="bpe", vocab_size=400, byte_fallback=True, normalization_rule_name="identity",
                               user_defined_symbols=["<sep>"]),
}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    expected: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as temporary:
        corpus, rules = Path(temporary) / "train.txt", Path(temporary) / "rules.tsv"
        corpus.write_text("\n".join(TRAIN), encoding="utf-8")
        rules.write_text("".join(f"{source}\t{target}\n" for source, target in NORMALIZATION_RULES.items()), encoding="utf-8")
        for name, options in SENTENCEPIECE_MODELS.items():
            prefix = Path(temporary) / Path(name).stem
            # a model without a named normaliser takes NORMALIZATION_RULES
            rules_option = {} if "normalization_rule_name" in options else {"normalization_rule_tsv": str(rules)}
            sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(prefix), minloglevel=2, num_threads=1,
                                                     character_coverage=0.995, **rules_option, **options)
            (OUT / name).write_bytes(prefix.with_suffix(".model").read_bytes())
            processor = sentencepiece.SentencePieceProcessor(model_file=str(OUT / name))
            expected[name] = [{"text": text, "ids": processor.encode(text), "decoded": processor.decode(processor.encode(text))}
                              for text in TEXTS]
    charsmap = read_model((OUT / "sp-unigram.model").read_bytes(), "sp-unigram.model")["precompiled_charsmap"]
    builders = {**HF_FILES, "hf-unigram.json": lambda: unigram(charsmap)}
    for name, build in builders.items():
        build().save(str(OUT / name))
        hf = tokenizers.Tokenizer.from_file(str(OUT / name))
        expected[name] = []
        for text in TEXTS:
            ids = hf.encode(text, add_special_tokens=False).ids
            expected[name].append({"text": text, "ids": ids, "decoded": hf.decode(ids, skip_special_tokens=False)})
    versions = {"tokenizers": tokenizers.__version__, "sentencepiece": sentencepiece.__version__}
    lines = [f'{{"made_with": {json.dumps(versions)}, "files": {{']
    for index, (name, cases) in enumerate(expected.items()):
        entries = ",\n".join("  " + json.dumps(case, ensure_ascii=False) for case in cases)
        lines.append(f"{json.dumps(name)}: [\n{entries}\n]" + ("," if index < len(expected) - 1 else ""))
    (OUT / "expected.json").write_text("\n".join(lines) + "\n}}\n", encoding="utf-8")
    for path in sorted(OUT.iterdir()):
        print(f"{path.stat().st_size:>8} {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
