"""Encoding speed of loaded models: polytok reading a HF tokenizer.json or a SentencePiece .model
against the library that wrote it, single-threaded, on the same documents of ../shared/data.

Models (trained here once on the shared data, cached under benchmarks/out/): HF byte-level BPE
(GPT-2 layout), HF char-level BPE with byte fallback (Llama 2 layout), HF WordPiece (BERT
layout), HF Unigram (NFKC + Metaspace), SentencePiece Unigram and BPE (nmt_nfkc). Before timing,
the ids must agree on a sample. Prints median wall and CPU time, MB/s and polytok's speed
relative to the peer in both (target: >= 1). Both sides run on one thread: HF's batch through
RAYON_NUM_THREADS=1, SentencePiece's through num_threads=1 (its batch encode otherwise uses
every core); CPU time says the same where other processes share the machine.

    python benchmarks/bench_loaded.py [--mb 5] [--repeats 3] [--vocab 8000] [--only spm-unigram ...]
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF's batch encoding on one thread
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path("/work/shared/data")
OUT = Path(__file__).resolve().parent / "out"


def documents(megabytes: float, document_bytes: int = 4096) -> list[str]:
    """The shared data files cut into ~4 KB documents at line ends, repeated to `megabytes`."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(DATA.glob("*.txt"))]
    docs: list[str] = []
    size = 0
    while size < megabytes * 1e6:
        for text in texts:
            start = 0
            while start < len(text) and size < megabytes * 1e6:
                end = text.find("\n", start + document_bytes)
                end = len(text) if end < 0 else end + 1
                docs.append(text[start:end])
                size += len(docs[-1].encode("utf-8"))
                start = end
    return docs


def train_models(vocab_size: int, only: list[str] | None = None) -> dict[str, Path]:
    """name -> model file (those in `only`, default all), trained once on (part of) the shared data."""
    import sentencepiece
    import tokenizers
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    OUT.mkdir(exist_ok=True)
    files = [str(path) for path in sorted(DATA.glob("*.txt"))]
    paths = {}

    def hf(name: str, model, trainer, normalizer=None, pre_tokenizer=None, decoder=None) -> None:
        if only and name not in only:
            return
        path = OUT / f"loaded-{name}-{vocab_size}.json"
        paths[name] = path
        if path.exists():
            return
        tokenizer = tokenizers.Tokenizer(model)
        if normalizer is not None:
            tokenizer.normalizer = normalizer
        if pre_tokenizer is not None:
            tokenizer.pre_tokenizer = pre_tokenizer
        if decoder is not None:
            tokenizer.decoder = decoder
        print(f"training {name} with HF tokenizers (cached in {path}) ...", flush=True)
        tokenizer.train(files, trainer)
        tokenizer.save(str(path))

    byte_tokens = [f"<0x{byte:02X}>" for byte in range(256)]
    hf("hf-bytelevel-bpe", models.BPE(), trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"]),
       pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False), decoder=decoders.ByteLevel())
    hf("hf-llama2-bpe", models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True),
       trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=["<unk>", "<s>", "</s>", *byte_tokens]),
       normalizer=normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
       decoder=decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]))
    hf("hf-wordpiece", models.WordPiece(unk_token="[UNK]"),
       trainers.WordPieceTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=["[UNK]", "[CLS]", "[SEP]"]),
       normalizer=normalizers.BertNormalizer(), pre_tokenizer=pre_tokenizers.BertPreTokenizer(), decoder=decoders.WordPiece())
    hf("hf-unigram", models.Unigram(),
       trainers.UnigramTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=["<unk>"], unk_token="<unk>"),
       normalizer=normalizers.NFKC(), pre_tokenizer=pre_tokenizers.Metaspace(), decoder=decoders.Metaspace())
    for model_type in ("unigram", "bpe"):
        if only and f"spm-{model_type}" not in only:
            continue
        prefix = OUT / f"loaded-spm-{model_type}-{vocab_size}"
        paths[f"spm-{model_type}"] = prefix.with_suffix(".model")
        if not prefix.with_suffix(".model").exists():
            print(f"training spm-{model_type} with sentencepiece ...", flush=True)
            sentencepiece.SentencePieceTrainer.train(input=files, model_prefix=str(prefix), vocab_size=vocab_size,
                                                     model_type=model_type, minloglevel=2, input_sentence_size=200000,
                                                     shuffle_input_sentence=True, byte_fallback=True)
    return paths


def peer_encoder(name: str, path: Path):
    """docs -> total tokens with the library that wrote the file."""
    if name.startswith("spm"):
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=str(path), num_threads=1)
        return lambda docs: sum(map(len, processor.encode(docs))), lambda doc: processor.encode(doc)
    import tokenizers

    hf = tokenizers.Tokenizer.from_file(str(path))
    return (lambda docs: sum(len(encoding.ids) for encoding in hf.encode_batch(docs, add_special_tokens=False)),
            lambda doc: hf.encode(doc, add_special_tokens=False).ids)


def median_time(encode, docs: list[str], repeats: int) -> tuple[float, float, int]:
    """Median wall and CPU seconds of `encode(docs)`, and its token count."""
    encode(docs[:20])
    walls, cpus, tokens = [], [], 0
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        tokens = encode(docs)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="size of the benchmark text in MB")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (median reported)")
    parser.add_argument("--vocab", type=int, default=8000, help="vocabulary size of the trained models")
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    args = parser.parse_args()

    import polytok

    paths = train_models(args.vocab, args.only)
    docs = documents(args.mb)
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    print(f"{megabytes:.1f} MB in {len(docs)} documents; one thread; median of {args.repeats}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'model':<18} {'segmenter':<18} {'peer s':>7} {'ours s':>7} {'peer cpu':>9} {'ours cpu':>9} "
          f"{'peer MB/s':>10} {'ours MB/s':>10} {'ours/peer wall':>15} {'cpu':>6}")
    for name, path in paths.items():
        if args.only and name not in args.only:
            continue
        ours = polytok.load(path)
        peer_batch, peer_one = peer_encoder(name, path)
        sample = docs[:: max(1, len(docs) // 100)]
        if [ours.encode(doc) for doc in sample] != [peer_one(doc) for doc in sample]:
            raise SystemExit(f"{name}: polytok's ids differ from the peer's on the sample")
        peer_seconds, peer_cpu, peer_tokens = median_time(peer_batch, docs, args.repeats)
        our_seconds, our_cpu, our_tokens = median_time(lambda docs: sum(len(ours.encode(doc)) for doc in docs), docs, args.repeats)
        if peer_tokens != our_tokens:
            raise SystemExit(f"{name}: {our_tokens} tokens against the peer's {peer_tokens}")
        print(f"{name:<18} {ours.segmenter:<18} {peer_seconds:7.2f} {our_seconds:7.2f} {peer_cpu:9.2f} {our_cpu:9.2f} "
              f"{megabytes / peer_seconds:10.2f} {megabytes / our_seconds:10.2f} {peer_seconds / our_seconds:14.2f}x "
              f"{peer_cpu / our_cpu:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
