"""Encoding speed of loaded models: polytok reading a HF tokenizer.json or a SentencePiece .model
against the library that wrote it, on the same documents of ../shared/data.

Models (trained here once on the shared data, cached under benchmarks/out/): HF byte-level BPE
(GPT-2 layout), HF char-level BPE with byte fallback (Llama 2 layout), HF WordPiece (BERT
layout), HF Unigram (NFKC + Metaspace), SentencePiece Unigram and BPE (nmt_nfkc). Before timing,
the ids must agree on a sample. Prints median wall and CPU time, MB/s and polytok's speed
relative to the peer in both (target: >= 1). Two modes, each in its own process because HF reads
RAYON_NUM_THREADS once, when its pool starts:
- single: one thread on both sides: polytok's encode per document, HF's batch with
  RAYON_NUM_THREADS=1, SentencePiece's with num_threads=1 (CPU time says the same where other
  processes share the machine);
- batch: every core on both sides: polytok's encode_batch, HF's encode_batch (RAYON_NUM_THREADS
  unset), SentencePiece's batch with num_threads=-1.

    python benchmarks/bench_loaded.py [--mode single|batch|both] [--mb 5] [--repeats 3] [--vocab 8000] [--only spm-unigram ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


def peer_encoder(name: str, path: Path, batch: bool):
    """(docs -> total tokens, doc -> ids) with the library that wrote the file, on one thread
    or (`batch`) on every core."""
    if name.startswith("spm"):
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=str(path), num_threads=-1 if batch else 1)
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


# The environment each mode needs (None: unset): HF's rayon pool on one thread, or rayon's default
# (every core) with HF's parallelism on.
MODE_ENVIRONMENT = {
    "single": {"RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
    "batch": {"RAYON_NUM_THREADS": None, "TOKENIZERS_PARALLELISM": "true"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["single", "batch", "both"], default="both",
                        help="one thread per side, every core per side, or both (default)")
    parser.add_argument("--mb", type=float, default=5.0, help="size of the benchmark text in MB")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (median reported)")
    parser.add_argument("--vocab", type=int, default=8000, help="vocabulary size of the trained models")
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    args = parser.parse_args()

    modes = ["single", "batch"] if args.mode == "both" else [args.mode]
    if len(modes) == 1 and all(os.environ.get(key) == value for key, value in MODE_ENVIRONMENT[modes[0]].items()):
        run_mode(modes[0], args)
        return
    train_models(args.vocab, args.only)  # once, before the modes' processes read the cache
    for mode in modes:
        environment = {key: value for key, value in os.environ.items() if key not in MODE_ENVIRONMENT[mode]}
        environment.update({key: value for key, value in MODE_ENVIRONMENT[mode].items() if value is not None})
        command = [sys.executable, __file__, "--mode", mode, "--mb", str(args.mb), "--repeats", str(args.repeats),
                   "--vocab", str(args.vocab), *(["--only", *args.only] if args.only else [])]
        subprocess.run(command, env=environment, check=True)


def run_mode(mode: str, args: argparse.Namespace) -> None:
    """Times every model in this process, whose RAYON_NUM_THREADS already suits `mode`."""
    import polytok

    batch = mode == "batch"
    paths = train_models(args.vocab, args.only)
    docs = documents(args.mb)
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    threads = "every core on both sides (polytok encode_batch)" if batch else "one thread"
    print(f"\n{mode}: {megabytes:.1f} MB in {len(docs)} documents; {threads}; median of {args.repeats}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'model':<18} {'segmenter':<18} {'peer s':>7} {'ours s':>7} {'peer cpu':>9} {'ours cpu':>9} "
          f"{'peer MB/s':>10} {'ours MB/s':>10} {'ours/peer wall':>15} {'cpu':>6}")
    for name, path in paths.items():
        ours = polytok.load(path)
        peer_batch, peer_one = peer_encoder(name, path, batch)
        sample = docs[:: max(1, len(docs) // 100)]
        ours_sample = ours.encode_batch(sample) if batch else [ours.encode(doc) for doc in sample]
        if ours_sample != [peer_one(doc) for doc in sample]:
            raise SystemExit(f"{name}: polytok's ids differ from the peer's on the sample")
        if batch:
            def ours_encode(docs: list[str]) -> int:
                return sum(map(len, ours.encode_batch(docs)))
        else:
            def ours_encode(docs: list[str]) -> int:
                return sum(len(ours.encode(doc)) for doc in docs)
        peer_seconds, peer_cpu, peer_tokens = median_time(peer_batch, docs, args.repeats)
        our_seconds, our_cpu, our_tokens = median_time(ours_encode, docs, args.repeats)
        if peer_tokens != our_tokens:
            raise SystemExit(f"{name}: {our_tokens} tokens against the peer's {peer_tokens}")
        print(f"{name:<18} {ours.segmenter:<18} {peer_seconds:7.2f} {our_seconds:7.2f} {peer_cpu:9.2f} {our_cpu:9.2f} "
              f"{megabytes / peer_seconds:10.2f} {megabytes / our_seconds:10.2f} {peer_seconds / our_seconds:14.2f}x "
              f"{peer_cpu / our_cpu:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
