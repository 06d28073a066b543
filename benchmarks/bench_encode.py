"""Encoding throughput: polytok vs gigatoken and tiktoken, on the real o200k_base and cl100k_base
ranks and a polytok-trained 32k BPE (cl100k pattern), over ../shared/data cut into documents.

Each library runs in its own spawned process, set up once per vocabulary and mode; the runs are
timed in rounds, one run of each library a round, so that a drift in the machine's speed reaches
every library alike, and a ratio is the median of the rounds' ratios. One-thread runs are pinned
to one core (sched_setaffinity) and encode document by document, with the ids as a Python list
and as a numpy array, timed in CPU seconds; batch runs hand all documents to each library's
batch call on every core, timed on the wall clock. Before timing, each run's ids (all documents, in order) are hashed with SHA-256 and
the hashes must be equal across libraries. Prints MB/s, peak memory (RSS above the process's
baseline) and polytok's speed over each peer.

    python benchmarks/bench_encode.py [--mb 25] [--repeats 3] [--vocab o200k cl100k bpe32k]
    python benchmarks/bench_encode.py --worst-case        # 1 MB vs 4 MB runs of one character
    python benchmarks/bench_encode.py --cache --mb 5      # each segmenter with and without the cache
    python benchmarks/bench_encode.py --per-language      # every language of benchmarks/languages.py

`--per-language` reads the reporting half of each language that benchmarks/languages.py builds
from installed Debian packages (`--half tune` for the other half, the one to tune on), and times
each language one call a document and one call for its whole half (a file), then all languages'
documents (and files) in turn in one process, o200k and cl100k, polytok against gigatoken
(`--peers` adds tiktoken); each library runs in one process for all of them, a sample repeats its
pass until it has taken 0.2 s of CPU time, and the ids' SHA-256 must agree for every row.

The real ranks come from the bpe-openai wheel (checked against tiktoken's SHA-256, see
tests/real_vocabularies.py); the 32k BPE is trained once and cached under benchmarks/out/.
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent.parent / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
OUT = Path(__file__).resolve().parent / "out"
DOCUMENT_BYTES = 4096
VOCABS = ["o200k", "cl100k", "bpe32k"]
LIBRARIES = ["polytok", "gigatoken", "tiktoken"]
# mode -> (one thread?, description)
MODES = {
    "list": (True, "one thread, ids as a Python list"),
    "numpy": (True, "one thread, ids as numpy"),
    "batch": (False, "all cores, batch, ids as lists"),
    "batch-numpy": (False, "all cores, batch, ids as arrays"),
}


def documents(megabytes: float) -> list[str]:
    """The shared data files, repeated to `megabytes`, cut into documents of about 4 KB at line ends."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(DATA.glob("*.txt"))]
    target = int(megabytes * 1e6)
    docs: list[str] = []
    size = 0
    while size < target:
        for text in texts:
            start = 0
            while start < len(text) and size < target:
                end = text.find("\n", start + DOCUMENT_BYTES)
                end = len(text) if end < 0 else end + 1
                docs.append(text[start:end])
                size += len(docs[-1].encode("utf-8"))
                start = end
    return docs


def rank_files() -> dict[str, Path]:
    """name -> rank file of the real vocabularies, unpacked (and hash-checked) once into benchmarks/out."""
    sys.path.insert(0, str(ROOT / "tests"))
    from real_vocabularies import SHA256, unpack

    directory = OUT / "openai-ranks"
    paths = {name: directory / f"{name}.tiktoken" for name in SHA256}
    if not all(path.exists() for path in paths.values()):
        unpack(directory)
    return paths


def trained_bpe(vocab_size: int = 32768):
    """polytok's 32k BPE on ../shared/data with the cl100k pattern, trained once and cached."""
    import polytok

    cached = OUT / f"polytok-bpe-{vocab_size}-cl100k.json"
    if not cached.exists():
        OUT.mkdir(exist_ok=True)
        print(f"training a {vocab_size} BPE with polytok (once; cached in {cached}) ...", flush=True)
        files = [str(path) for path in sorted(DATA.glob("*.txt"))]
        polytok.train(files, algorithm="bpe", vocab_size=vocab_size, pattern="cl100k", progress=False).save(cached)
    return polytok.load(cached)


def tiktoken_encoding(vocab: str):
    import tiktoken

    if vocab == "bpe32k":
        tokenizer = trained_bpe()
        ranks = {token: rank for rank, token in enumerate(tokenizer.vocab)}
        return tiktoken.Encoding("bpe32k", pat_str=tokenizer.pattern, mergeable_ranks=ranks, special_tokens={})
    rank_files()
    os.environ["TIKTOKEN_CACHE_DIR"] = str(OUT / "openai-ranks" / "cache")  # offline: the checked files
    return tiktoken.get_encoding(f"{vocab}_base")


def polytok_tokenizer(vocab: str):
    import polytok

    if vocab == "bpe32k":
        return trained_bpe()
    encoding = tiktoken_encoding(vocab)
    return polytok.load_tiktoken(rank_files()[f"{vocab}_base"], pattern=vocab, special_tokens=encoding._special_tokens)


def gigatoken_tokenizer(vocab: str):
    import gigatoken

    if vocab == "bpe32k":
        path = OUT / "polytok-bpe-32768-cl100k.tiktoken"
        if not path.exists():
            trained_bpe().save_tiktoken(path)
        return gigatoken.Tokenizer.from_tiktoken(path, pretokenizer="cl100k", special_tokens={})
    return gigatoken.Tokenizer.from_tiktoken(rank_files()[f"{vocab}_base"])


def make_encoder(library: str, vocab: str, mode: str):
    """docs -> (number of tokens, the ids of every document as one uint32 array for the hash).
    The timed call is the first; the second builds the array outside the timing."""
    import numpy as np

    if library == "polytok":
        tokenizer = polytok_tokenizer(vocab)
        calls = {
            "list": lambda docs: [tokenizer.encode_ordinary(doc) for doc in docs],
            "numpy": lambda docs: [tokenizer.encode_to_numpy(doc, disallowed_special=()) for doc in docs],
            "batch": lambda docs: tokenizer.encode_ordinary_batch(docs),
            "batch-numpy": lambda docs: tokenizer.encode_batch_to_numpy(docs, disallowed_special=())[0],
        }
    elif library == "gigatoken":
        tokenizer = gigatoken_tokenizer(vocab)
        backend = tokenizer.backend
        calls = {
            "list": lambda docs: [backend.encode(doc).tolist() for doc in docs],
            "numpy": lambda docs: [backend.encode(doc) for doc in docs],
            "batch": lambda docs: backend.encode_batch_list(docs, parallel=True),
            "batch-numpy": lambda docs: backend.encode_batch(docs, parallel=True),
        }
    elif library == "tiktoken":
        encoding = tiktoken_encoding(vocab)
        threads = os.cpu_count()
        calls = {
            "list": lambda docs: [encoding.encode_ordinary(doc) for doc in docs],
            "numpy": lambda docs: [encoding.encode_to_numpy(doc, disallowed_special=()) for doc in docs],
            "batch": lambda docs: encoding.encode_ordinary_batch(docs, num_threads=threads),
        }
    else:
        raise ValueError(library)
    if mode not in calls:
        return None
    call = calls[mode]

    def flatten(result) -> "np.ndarray":
        if library == "gigatoken" and mode == "batch-numpy":
            import awkward

            return np.asarray(awkward.flatten(result), dtype=np.uint32)
        if isinstance(result, np.ndarray):
            return result.astype(np.uint32)
        return np.concatenate([np.asarray(ids, dtype=np.uint32) for ids in result] or [np.zeros(0, np.uint32)])

    return call, flatten


def reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets the process's peak RSS (VmHWM) to its current RSS."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_mb(field: str) -> float:
    """VmRSS (current) or VmHWM (peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def worker(library: str, vocab: str, mode: str, megabytes: float, connection) -> None:
    """Child process for one library: builds its encoder, sends (sha256 of the ids, or None when
    the library has no such mode), then times one run for every request until it gets None and
    answers each with (seconds, peak RSS MB above the RSS before the timed runs)."""
    if MODES[mode][0]:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    docs = documents(megabytes)
    made = make_encoder(library, vocab, mode)
    if made is None:
        connection.send(None)
        return
    call, flatten = made
    ids = flatten(call(docs))  # also the warm-up
    connection.send(hashlib.sha256(ids.tobytes()).hexdigest())
    del ids
    reset_peak_rss()
    baseline = rss_mb("VmRSS")
    # One thread: CPU time, which other jobs on the machine do not inflate; batches: wall time.
    clock = time.process_time if MODES[mode][0] else time.perf_counter
    while connection.recv() is not None:
        start = clock()
        result = call(docs)
        seconds = clock() - start
        del result
        connection.send((seconds, rss_mb("VmHWM") - baseline))


def run_child(target, *args):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"{args[:3]}: the measuring process failed (exit code {process.exitcode})")
    return result


def interleaved(vocab: str, mode: str, megabytes: float, rounds: int) -> dict[str, tuple[str, list[float], float]]:
    """library -> (sha256 of its ids, its seconds in each round, peak MB). Each library runs in
    its own process, set up once; a round times one run of each, one library at a time, in an
    order that turns every round, so a machine whose speed drifts slows every library alike."""
    context = multiprocessing.get_context("spawn")
    workers = {}
    for library in LIBRARIES:
        mine, theirs = context.Pipe()
        process = context.Process(target=worker, args=(library, vocab, mode, megabytes, theirs))
        process.start()
        workers[library] = (process, mine)

    def receive(library: str):
        process, connection = workers[library]
        try:
            return connection.recv()
        except EOFError:
            process.join()
            raise SystemExit(f"{vocab} {mode} {library}: the measuring process failed "
                             f"(exit code {process.exitcode})") from None

    digests = {library: receive(library) for library in LIBRARIES}
    active = [library for library in LIBRARIES if digests[library] is not None]
    times: dict[str, list[float]] = {library: [] for library in active}
    peaks = dict.fromkeys(active, 0.0)
    for index in range(rounds):
        for library in active[index % len(active):] + active[:index % len(active)]:
            workers[library][1].send(True)
            seconds, peak = receive(library)
            times[library].append(seconds)
            peaks[library] = max(peaks[library], peak)
    for process, connection in workers.values():
        if process.is_alive():
            connection.send(None)
        process.join()
    return {library: (digests[library], times[library], peaks[library]) for library in active}


def speed(args) -> None:
    docs = documents(args.mb)
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    print(f"{megabytes:.1f} MB in {len(docs)} documents from {DATA}; {os.cpu_count()} cores; {args.repeats} rounds, "
          f"each timing one run of every library in turn; MB/s of the median run; ratios are medians of the "
          f"rounds' ratios; one-thread runs pinned to one core")
    # Prepare the files once, so no child trains or unpacks.
    rank_files()
    trained_bpe()
    print(f"{'vocab':<7} {'mode':<12} {'library':<10} {'MB/s':>8} {'peak MB':>8}  sha256")
    for vocab in args.vocab:
        for mode in args.modes:
            results = interleaved(vocab, mode, args.mb, args.repeats)
            for library, (digest, seconds, peak) in results.items():
                print(f"{vocab:<7} {mode:<12} {library:<10} {megabytes / statistics.median(seconds):8.1f} "
                      f"{peak:8.1f}  {digest[:16]}", flush=True)
            digests = {digest for digest, _, _ in results.values()}
            if len(digests) != 1:
                raise SystemExit(f"{vocab} {mode}: the libraries' ids differ: {results}")
            ours = results["polytok"][1]
            ratios = ", ".join(
                f"{statistics.median([theirs / mine for mine, theirs in zip(ours, results[peer][1])]):.2f}x {peer}"
                for peer in results if peer != "polytok")
            print(f"{vocab:<7} {mode:<12} polytok = {ratios} (same ids)", flush=True)


# ---- the worst case: time against input length --------------------------------------------

RUNS = {"a": "a", "spaces": " ", "^": "^", "newlines": "\n", "emoji": "🙂", "CJK": "中"}


def worst_case_tokenizers() -> dict[str, object]:
    """segmenter label -> tokeniser: merges on the real ranks, then `trained_tokenizers`."""
    tokenizers = {f"merges {vocab}": polytok_tokenizer(vocab) for vocab in ("o200k", "cl100k")}
    return {**tokenizers, **trained_tokenizers()}


def trained_tokenizers() -> dict[str, object]:
    """segmenter label -> polytok-trained tokeniser: the 32k BPE, and 8k tokenisers of the other
    three segmenters (trained on 2 MB of ../shared/data, cached)."""
    import polytok

    tokenizers = {"merges bpe32k": trained_bpe()}
    text = "".join(path.read_text(encoding="utf-8")[:350_000] for path in sorted(DATA.glob("*.txt")))
    for algorithm, options in (("wordpiece", {"min_frequency": 2}), ("unigram", {}), ("convex", {"solver": "dual"})):
        cached = OUT / f"polytok-{algorithm}-8192-cl100k.json"
        if not cached.exists():
            print(f"training an 8192 {algorithm} tokeniser (once; cached in {cached}) ...", flush=True)
            tokenizer = polytok.train(polytok.texts(text.splitlines(keepends=True)), algorithm=algorithm,
                                      vocab_size=8192, pattern="cl100k", progress=False, **options)
            tokenizer.save(cached)
        tokenizer = polytok.load(cached)
        tokenizers[f"{tokenizer.segmenter}"] = tokenizer
    return tokenizers


SAMPLE_SECONDS = 0.25
"""Each worst-case sample encodes its text again and again until it has taken this much CPU time:
a single encoding of 1 MB takes 10-60 ms, too short to time steadily on a shared machine."""


def sample(tokenizer, text: str) -> float:
    """CPU time (user + system, so page faults count) of one encoding of `text`: one sample's
    time divided by its encodings."""
    calls, start = 0, time.process_time()
    while True:
        tokenizer.encode_ordinary(text)
        calls += 1
        elapsed = time.process_time() - start
        if elapsed >= SAMPLE_SECONDS:
            return elapsed / calls


def worst_case_child(label: str, name: str, repeats: int, queue) -> None:
    """One segmenter on one run, in a process of its own (so no earlier run's memory state
    reaches it): the least of `repeats` samples at 1 MB and at 4 MB, the sizes taken in turn so
    that a drift in the machine's speed reaches both."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    tokenizer = worst_case_tokenizers()[label]
    unit = RUNS[name]
    size = len(unit.encode("utf-8"))
    small, large = unit * (1_000_000 // size), unit * (4_000_000 // size)
    one = four = float("inf")
    for _ in range(repeats):
        one = min(one, sample(tokenizer, small))
        four = min(four, sample(tokenizer, large))
    queue.put((one, four))


def worst_case(args) -> None:
    labels = list(worst_case_tokenizers())
    print(f"one character repeated to 1 MB and to 4 MB of UTF-8, encode_ordinary, one thread, CPU seconds a call, "
          f"best of {args.repeats} samples of >= {SAMPLE_SECONDS} s, a process for each segmenter and run")
    print(f"{'segmenter':<16} {'run':<9} {'1 MB s':>8} {'4 MB s':>8} {'ratio':>6}")
    worst = 0.0
    for label in labels:
        for name in RUNS:
            one, four = run_child(worst_case_child, label, name, args.repeats)
            worst = max(worst, four / one)
            print(f"{label:<16} {name:<9} {one:8.3f} {four:8.3f} {four / one:6.2f}", flush=True)
    print(f"largest 4 MB / 1 MB time ratio: {worst:.2f} (target <= 4.5)")


# ---- what the pre-token cache gives each segmenter -------------------------------------------


def cache_child(megabytes: float, repeats: int, queue) -> None:
    """Per segmenter: the least of `repeats` timings with its cache and without, taken in turn."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    docs = documents(megabytes)
    rows = []
    for label, tokenizer in worst_case_tokenizers().items():
        sizes = (tokenizer.cache_size, 0)
        best = dict.fromkeys(sizes, float("inf"))
        for index in range(repeats + 1):
            for size in sizes:
                tokenizer.cache_size = size
                start = time.process_time()
                [tokenizer.encode_to_numpy(doc, disallowed_special=()) for doc in docs]
                if index:  # the first round warms up
                    best[size] = min(best[size], time.process_time() - start)
        rows.append((label, *best.values()))
    queue.put(rows)


def cache_effect(args) -> None:
    megabytes = sum(len(doc.encode("utf-8")) for doc in documents(args.mb)) / 1e6
    print(f"{megabytes:.1f} MB, encode_to_numpy per document, one thread, CPU time, best of {args.repeats}")
    print(f"{'segmenter':<16} {'cache MB/s':>10} {'none MB/s':>10} {'ratio':>6}")
    for label, cached, uncached in run_child(cache_child, args.mb, args.repeats):
        print(f"{label:<16} {megabytes / cached:10.1f} {megabytes / uncached:10.1f} {uncached / cached:6.2f}")


# ---- per language: text nobody tuned on, in every script the packages hold ------------------

PASS_SECONDS = 0.2
"""A per-language sample repeats its pass until it has taken this much CPU time (a language's
half is 20 kB to 2 MB: a single pass can be a millisecond)."""


def language_workloads(half: str, chosen: list[str] | None) -> dict[str, dict[str, list[str]]]:
    """row -> granularity ("document", "file") -> the texts of one pass: each language's half
    one call a document and one call in all, and the row "all": every language's documents in
    turn, and every language's file in turn."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import languages

    files = languages.build(2.0)
    names = [name for name in files if chosen is None or name in chosen]
    missing = sorted(set(chosen or ()) - set(files))
    if missing:
        raise SystemExit(f"no text for {missing}; the languages built: {sorted(files)}")
    workloads = {}
    for name in names:
        documents = languages.documents(files[name][half])
        workloads[name] = {"document": documents, "file": [languages.SEPARATOR.join(documents)]}
    workloads["all"] = {
        "document": [doc for position in range(max(len(w["document"]) for w in workloads.values()))
                     for w in list(workloads.values()) if position < len(w["document"]) for doc in [w["document"][position]]],
        "file": [w["file"][0] for w in list(workloads.values())],
    }
    return workloads


def language_worker(library: str, vocab: str, mode: str, half: str, chosen: list[str] | None, connection) -> None:
    """Child process for one library: for each request (row, granularity) it answers first the
    sha256 of the ids of that pass (None: no such mode), then, for each further True, the CPU
    seconds of one pass; None ends it."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    workloads = language_workloads(half, chosen)
    made = make_encoder(library, vocab, mode)
    connection.send(made is not None)
    if made is None:
        return
    call, flatten = made
    while (request := connection.recv()) is not None:
        texts = workloads[request[0]][request[1]]
        connection.send(hashlib.sha256(flatten(call(texts)).tobytes()).hexdigest())  # also the warm-up
        while connection.recv():
            passes, start = 0, time.process_time()
            while (elapsed := time.process_time() - start) < PASS_SECONDS:
                call(texts)
                passes += 1
            connection.send(elapsed / passes)


def per_language(args) -> None:
    libraries = ["polytok", "gigatoken", *args.peers]
    modes = [mode for mode in args.modes if MODES[mode][0]] or ["numpy", "list"]
    vocabs = [vocab for vocab in args.vocab if vocab != "bpe32k"] or ["o200k", "cl100k"]
    rank_files()
    workloads = language_workloads(args.half, args.languages)
    print(f"the {args.half} half of each language (benchmarks/languages.py); one thread pinned to one core; "
          f"CPU seconds a pass, the median of {args.repeats} samples of >= {PASS_SECONDS} s each, libraries in turn; "
          f"ratio: the median of the samples' ratios; every row's ids agree (SHA-256)")
    print(f"{'row':<12} {'MB':>5} {'vocab':<6} {'mode':<5} {'calls':<8} {'polytok MB/s':>12} "
          + " ".join(f"{peer + ' MB/s':>14}" for peer in libraries[1:]) + "  " + " ".join(f"{'/' + peer:>10}" for peer in libraries[1:]))
    lowest: dict[str, float] = {}
    context = multiprocessing.get_context("spawn")
    for vocab in vocabs:
        for mode in modes:
            workers = {}
            for library in libraries:
                mine, theirs = context.Pipe()
                process = context.Process(target=language_worker,
                                          args=(library, vocab, mode, args.half, args.languages, theirs))
                process.start()
                workers[library] = (process, mine)
            active = [library for library in libraries if workers[library][1].recv()]
            for row, granularities in workloads.items():
                for granularity, texts in granularities.items():
                    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
                    digests = {}
                    for library in active:
                        workers[library][1].send((row, granularity))
                        digests[library] = workers[library][1].recv()
                    if len(set(digests.values())) != 1:
                        raise SystemExit(f"{row} {vocab} {mode} {granularity}: the libraries' ids differ: {digests}")
                    times: dict[str, list[float]] = {library: [] for library in active}
                    for index in range(args.repeats):
                        for library in active[index % len(active):] + active[:index % len(active)]:
                            workers[library][1].send(True)
                            times[library].append(workers[library][1].recv())
                    for library in active:
                        workers[library][1].send(False)
                    ratios = {peer: statistics.median(theirs / ours for ours, theirs in zip(times["polytok"], times[peer]))
                              for peer in active[1:]}
                    for peer, ratio in ratios.items():
                        key = f"{peer} {mode}"
                        lowest[key] = min(lowest.get(key, ratio), ratio)
                    print(f"{row:<12} {megabytes:5.2f} {vocab:<6} {mode:<5} {granularity:<8} "
                          f"{megabytes / statistics.median(times['polytok']):12.1f} "
                          + " ".join(f"{megabytes / statistics.median(times[peer]):14.1f}" for peer in active[1:]) + "  "
                          + " ".join(f"{ratios[peer]:9.2f}x" for peer in active[1:]), flush=True)
            for process, connection in workers.values():
                if process.is_alive():
                    connection.send(None)
                process.join()
    for key, ratio in lowest.items():
        print(f"lowest polytok/{key} ratio: {ratio:.2f}x (target >= 1.2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=25.0, help="size of the benchmark text in MB")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds of timed runs (speed: one run of each library a round), or samples a worst-case call")
    parser.add_argument("--vocab", nargs="+", choices=VOCABS, default=VOCABS)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--worst-case", action="store_true", help="time 1 MB and 4 MB runs of one character instead")
    parser.add_argument("--cache", action="store_true", help="time each segmenter with and without the pre-token cache instead")
    parser.add_argument("--per-language", action="store_true", help="time each language of benchmarks/languages.py instead")
    parser.add_argument("--half", choices=("report", "tune"), default="report", help="--per-language: which half of each language")
    parser.add_argument("--languages", nargs="+", help="--per-language: only these (default: every language built)")
    parser.add_argument("--peers", nargs="*", choices=("tiktoken",), default=[], help="--per-language: peers besides gigatoken")
    args = parser.parse_args()
    if args.per_language:
        per_language(args)
    elif args.worst_case:
        worst_case(args)
    elif args.cache:
        cache_effect(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()
