"""What applying a tokeniser costs beyond plain `encode`: offsets, the streaming decode step,
token healing, truncation, chunking and padded batches, per token, on the 32k cl100k BPE of
bench_encode.py and documents of ../shared/data. Everything runs in one process on one thread;
each operation alternates with the plain call it is compared with and the fastest of the
repeats (in CPU time) counts, and the ratios to it are printed (the targets: healing, the streaming
step and offsets at most 1.3x plain encode per token).

- offsets: `encode_with_offsets(doc)` against `encode(doc)`;
- streaming: `step(id)` over every id of the documents, against `encode` per token;
- healing: `encode(prompt)` then `heal(ids)` and `tokens_starting_with(removed)`, against
  `encode(prompt)` alone, and `heal` with `tokens_starting_with` alone on the encoded prompts
  against the same `encode` (what healing adds; run back to back with `encode` in one loop, the
  two evict each other's tables from the CPU caches and each runs slower), for prompts of about 4 KB, 1 KB and 100 bytes (each document's start);
- truncation (`encode_truncated(doc, 512)`, `encode(doc, max_tokens=512)`), chunking
  (`chunk(doc, 512, 64)`) and a padded batch (`encode_batch_padded(docs[i:i+32],
  max_tokens=512)`, one thread) against `encode`;
- offsets through a normaliser: on the HF Llama 2 layout file of bench_loaded.py (trained once
  with `tokenizers`), `encode_with_offsets` against that file's `encode`, and `tokenizers`'
  own encode (its offsets come with every encoding) against the same, on `--normalised-mb` of
  the documents;
- offsets of a SentencePiece model: on the 8k byte-fallback Unigram `.model` of bench_loaded.py
  (NFKC charsmap, trained once with `sentencepiece`), `encode_with_offsets` against that file's
  `encode`, and `sentencepiece`'s encode with its spans (`return_type="proto"`) against the same,
  on the same megabytes.

    python benchmarks/bench_apply.py [--mb 4] [--repeats 7] [--normalised-mb 0.5]
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_encode import documents, trained_bpe  # noqa: E402


def paired(repeats: int, reference, run) -> tuple[float, float]:
    """The fastest of `repeats` timings of `run()` and of `reference()`, taken alternately so
    that both see the same machine load (the minimum is what load inflates least). The time is
    the process's CPU time: everything runs on one thread, so it equals the wall time on an
    idle machine and leaves out the time other processes take the core."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for which, function in enumerate((reference, run)):
            start = time.process_time()
            function()
            times[which].append(time.process_time() - start)
    return min(times[1]), min(times[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0, help="megabytes of documents")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--normalised-mb", type=float, default=0.5,
                        help="megabytes for offsets through a normaliser (0: skip)")
    args = parser.parse_args()
    tokenizer = trained_bpe()
    docs = documents(args.mb)
    encoded = [tokenizer.encode(doc) for doc in docs]
    tokens = sum(len(ids) for ids in encoded)
    print(f"{len(docs)} documents, {sum(len(d.encode()) for d in docs) / 1e6:.1f} MB, {tokens} tokens; "
          f"{platform.machine()}, Python {platform.python_version()}, one thread", flush=True)
    # warm the lookup tables healing, streaming and offsets build once per tokeniser
    tokenizer.heal(encoded[0])
    tokenizer.encode_with_offsets(docs[0])

    def plain():
        for doc in docs:
            tokenizer.encode(doc)

    def offsets():
        for doc in docs:
            tokenizer.encode_with_offsets(doc)

    def streaming():
        for ids in encoded:
            stream = tokenizer.decode_stream()
            step = stream.step
            for token_id in ids:
                step(token_id)
            stream.flush()

    def truncation():
        for doc in docs:
            tokenizer.encode_truncated(doc, 512)

    def max_tokens():
        for doc in docs:
            tokenizer.encode(doc, max_tokens=512)

    def chunking():
        for doc in docs:
            tokenizer.chunk(doc, 512, 64)

    def padded():
        for start in range(0, len(docs), 32):
            tokenizer.encode_batch_padded(docs[start : start + 32], max_tokens=512, pad_id=0, num_threads=1)

    def plain_batches():
        for start in range(0, len(docs), 32):
            tokenizer.encode_batch(docs[start : start + 32], num_threads=1)

    rows = []
    for name, run in (("encode_with_offsets", offsets), ("decode_stream().step", streaming),
                      ("encode_truncated 512", truncation), ("encode max_tokens=512", max_tokens),
                      ("chunk 512/64", chunking)):
        rows.append((name, *paired(args.repeats, plain, run), tokens))
    rows.append(("encode_batch_padded 512 (vs encode_batch)", *paired(args.repeats, plain_batches, padded), tokens))

    for length, label in ((4000, "~4 KB"), (1000, "~1 KB"), (100, "~100 B")):
        prompts = [doc[:length] for doc in docs]
        prompt_ids = [tokenizer.encode(prompt) for prompt in prompts]

        def encode_prompts():
            for prompt in prompts:
                tokenizer.encode(prompt)

        def encode_and_heal():
            for prompt in prompts:
                prefix, removed = tokenizer.heal(tokenizer.encode(prompt))
                tokenizer.tokens_starting_with(removed)

        def heal_only():
            for ids in prompt_ids:
                prefix, removed = tokenizer.heal(ids)
                tokenizer.tokens_starting_with(removed)

        prompt_tokens = sum(map(len, prompt_ids))
        rows.append((f"encode + heal + tokens_starting_with, {label} prompts", *paired(args.repeats, encode_prompts, encode_and_heal),
                     prompt_tokens))
        rows.append(("  heal + tokens_starting_with alone (the ids given)", *paired(args.repeats, encode_prompts, heal_only),
                     prompt_tokens))
        print(f"{label} prompts: {prompt_tokens / len(prompt_ids):.0f} tokens each on average")

    if args.normalised_mb > 0:
        rows.extend(normalised_offsets(args.normalised_mb, args.repeats))
        rows.extend(sentencepiece_offsets(args.normalised_mb, args.repeats))

    print(f"\n{'operation':<56} {'ns/token':>9} {'encode ns':>10} {'vs encode':>10}")
    for name, seconds, reference, count in rows:
        print(f"{name:<56} {seconds / count * 1e9:>9.0f} {reference / count * 1e9:>10.0f} {seconds / reference:>9.2f}x")


def normalised_offsets(megabytes: float, repeats: int) -> list[tuple[str, float, float, int]]:
    """Rows for offsets through a loaded file's normaliser: the HF Llama 2 layout of
    bench_loaded.py (Prepend and Replace, trained once with `tokenizers`), polytok's
    `encode_with_offsets` against its `encode`, and `tokenizers`' encode (which always builds
    offsets) against polytok's `encode`."""
    import polytok
    import tokenizers
    from bench_loaded import train_models

    path = train_models(8000, ["hf-llama2-bpe"])["hf-llama2-bpe"]
    loaded = polytok.load(path)
    theirs = tokenizers.Tokenizer.from_file(str(path))
    docs = documents(megabytes)
    count = sum(len(loaded.encode(doc)) for doc in docs)
    sample = docs[0][:2000]
    assert loaded.encode_with_offsets(sample, unit="chars")[1].tolist() == [list(pair) for pair in theirs.encode(sample).offsets]

    def plain():
        for doc in docs:
            loaded.encode(doc)

    def offsets():
        for doc in docs:
            loaded.encode_with_offsets(doc, unit="chars")

    def peer():
        for doc in docs:
            theirs.encode(doc, add_special_tokens=False)

    print(f"offsets through a normaliser: {len(docs)} documents, {count} tokens of the HF Llama 2 layout", flush=True)
    return [("HF Llama 2 layout: encode_with_offsets (vs its encode)", *paired(repeats, plain, offsets), count),
            ("  tokenizers' encode with its offsets (vs polytok encode)", *paired(repeats, plain, peer), count)]


def sentencepiece_offsets(megabytes: float, repeats: int) -> list[tuple[str, float, float, int]]:
    """Rows for offsets of a SentencePiece `.model` (bench_loaded.py's byte-fallback Unigram,
    trained once with `sentencepiece`): polytok's `encode_with_offsets` against its `encode`,
    and `sentencepiece`'s encode with spans against polytok's `encode`."""
    import polytok
    import sentencepiece
    from bench_loaded import train_models

    path = train_models(8000, ["spm-unigram"])["spm-unigram"]
    loaded = polytok.load(path)
    theirs = sentencepiece.SentencePieceProcessor(model_file=str(path))
    docs = documents(megabytes)
    count = sum(len(loaded.encode(doc)) for doc in docs)
    sample = docs[0][:2000]
    assert loaded.encode_with_offsets(sample)[1].tolist() == [[p.begin, p.end] for p in theirs.encode(sample, return_type="proto").pieces]

    def plain():
        for doc in docs:
            loaded.encode(doc)

    def offsets():
        for doc in docs:
            loaded.encode_with_offsets(doc)

    def peer():
        for doc in docs:
            theirs.encode(doc, return_type="proto")

    print(f"offsets of a SentencePiece model: {len(docs)} documents, {count} tokens of the 8k Unigram .model", flush=True)
    return [("SentencePiece Unigram .model: encode_with_offsets (vs its encode)", *paired(repeats, plain, offsets), count),
            ("  sentencepiece's encode with spans (vs polytok encode)", *paired(repeats, plain, peer), count)]


if __name__ == "__main__":
    main()
