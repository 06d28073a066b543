"""polytok at scale.

--certify: certify a BPE merge list at several budgets in one run with the dual solver (the
paper's Table 2: bound, BPE, Det, Bias, Int as % of the bound), on growing slices of a corpus,
with the time, the measured peak memory and polytok's own estimate of it (`polytok.lp.memory`,
which must stay above the measurement). Each slice runs in a fresh process, so that its peak is
its own: the resident memory it reached above what it held once the counts and the tokeniser
were loaded. `--separate` also certifies each budget in its own run, for the time and bounds of
one run at every budget against separate ones.

Data: with --corpus, that file or directory counted whole (with --head N, only a file's first N
bytes, to the end of that document); otherwise the files of --data (default ../shared/data: handbooks in five languages and the KJV
Bible, about 10 MB) by paragraph and the Python standard library's modules (--code, 5 MB), read
round-robin until each slice size; or the corpus `../shared/corpora/build_large.py` writes
(--data DIR --code ''). Pre-tokenised with cl100k; BPE is polytok's own,
trained on the slice at the largest budget.

Usage: nice python benchmarks/bench_scale.py --certify [--sizes 1e6,5e6,1e7] [--budgets 1024,4096,8192]
       [--data DIR | --corpus PATH] [--max-token-bytes N] [--separate] [--json out.json]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = "/work/shared/data"
PYTHON_STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11/*.py"


def slice_documents(directory: str, code: str, size: int) -> list[str]:
    """Paragraphs of every .txt file under `directory` and the files matching the glob `code`
    (one source, a file a document), taken round-robin, until `size` bytes."""
    sources = []
    for path in sorted(Path(directory).glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        documents = []
        for paragraph in text.split("\n\n"):
            # A text without blank lines (the KJV: a verse a line) goes by 20 lines a document.
            lines = paragraph.split("\n")
            documents += ["\n".join(lines[i:i + 20]) + "\n\n" for i in range(0, len(lines), 20)]
        sources.append(documents)
    if code:
        sources.append([Path(path).read_text(encoding="utf-8", errors="replace") for path in sorted(glob.glob(code))])
    documents, total, positions = [], 0, [0] * len(sources)
    while total < size and any(p < len(s) for p, s in zip(positions, sources)):
        for index, source in enumerate(sources):
            if positions[index] >= len(source) or total >= size:
                continue
            document = source[positions[index]]
            positions[index] += 1
            documents.append(document)
            total += len(document.encode("utf-8"))
    return documents


def resident() -> tuple[int, int]:
    """(current, peak) resident memory of this process in bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        fields = dict(line.split(":", 1) for line in handle)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def certify_worker(spec: dict) -> dict:
    """One measurement, in this (fresh) process: certify at every budget in one run, or each
    budget in its own run; peak memory above the loaded counts and tokeniser."""
    import polytok
    from polytok.certify import certify, certify_table
    from polytok.lp import memory

    counts = polytok.PreTokenCounts.load(spec["counts"])
    cap = spec["max_token_bytes"]
    tokenizer = polytok.load(spec["tokenizer"])
    before, _ = resident()
    start = time.perf_counter()
    if spec["separate"]:
        from polytok.certify import prefix_tokenizers

        rows = [{"budget": budget, "bound": certify(prefix, counts, solver="dual", max_token_bytes=cap).bound}
                for budget, prefix in prefix_tokenizers(tokenizer, spec["budgets"])]
    else:
        rows = [{"budget": row.certificate.budget, "bound": row.certificate.bound,
                 "status": row.certificate.status, **row.percentages()}
                for row in certify_table(tokenizer, counts, spec["budgets"], solver="dual", max_token_bytes=cap,
                                         progress=spec["progress"])]
    seconds = time.perf_counter() - start
    _, peak = resident()
    estimate = memory.estimate(counts, "dual", cap, budgets=spec["budgets"])
    return {"rows": rows, "seconds": seconds, "peak": peak - before, "estimate": estimate.bytes,
            "edges": estimate.edges, "colour_bound": estimate.colours, "unique_pre_tokens": len(counts)}


def head_of(corpus: str, size: int, scratch: str) -> str:
    """The first `size` bytes of the file `corpus` and the rest of the document they end in (up
    to its form-feed separator line, as build_large.py and bench_scale.py --shuffled write them),
    copied into `scratch`: a slice of a shuffled copy has the whole corpus' mix."""
    with open(corpus, "rb") as handle:
        data = handle.read(size)
        rest = b""
        while not (data + rest).endswith(b"\n\f\n"):
            line = handle.readline()
            if not line:
                break
            rest += line
    path = os.path.join(scratch, "head.txt")
    with open(path, "wb") as handle:
        handle.write(data + rest)
    return path


def run_worker(spec: dict) -> dict:
    """`certify_worker(spec)` in a fresh process."""
    # Its progress bars and errors go to this process's stderr as they come.
    done = subprocess.run([sys.executable, __file__, "--certify-worker", json.dumps(spec)],
                          stdout=subprocess.PIPE, text=True, env=os.environ)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed with exit status {done.returncode} (its stderr is above)")
    return json.loads(lines[-1][len("RESULT "):])


def certify_main(args: argparse.Namespace) -> list[dict]:
    """The --certify benchmark: one line per slice, then its Table 2."""
    import polytok

    budgets = [int(k) for k in args.budgets.split(",")]
    results = []
    print(f"{'slice':>8} {'uniq':>8} {'edges':>11} {'colours<=':>11} {'seconds':>8} {'peak MB':>8} "
          f"{'est. MB':>8} {'est/peak':>8} {'separate s':>10} {'ratio':>6}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        for size in [int(float(s)) for s in args.sizes.split(",")] if args.corpus is None else [None]:
            if args.corpus is None:
                documents = slice_documents(args.data, args.code, size)
                counts = polytok.count(polytok.texts(documents), pattern="cl100k", progress=False)
            elif args.head is not None:
                path = head_of(args.corpus, args.head, scratch)
                counts = polytok.count(path, pattern="cl100k", progress=False)
                size = os.path.getsize(path)
            else:
                counts = polytok.count(args.corpus, pattern="cl100k", progress=False)
                corpus = Path(args.corpus)
                files = [corpus] if corpus.is_file() else [path for path in corpus.rglob("*") if path.is_file()]
                size = sum(path.stat().st_size for path in files)
            tokenizer = polytok.train(counts, vocab_size=256 + max(budgets), progress=False)
            spec = {"counts": f"{scratch}/counts.ptc", "tokenizer": f"{scratch}/bpe.json", "budgets": budgets,
                    "separate": False, "max_token_bytes": args.max_token_bytes,
                    "progress": args.progress}
            counts.save(spec["counts"])
            tokenizer.save(spec["tokenizer"])
            result = run_worker(spec)
            result["size"] = size
            separate = run_worker({**spec, "separate": True}) if args.separate else None
            if separate is not None:
                result["separate_seconds"] = separate["seconds"]
                result["separate_bounds"] = [row["bound"] for row in separate["rows"]]
            results.append(result)
            mb = 2**20
            ratio = f"{separate['seconds'] / result['seconds']:6.2f}" if separate else f"{'-':>6}"
            print(f"{size / 1e6:7.1f}M {result['unique_pre_tokens']:>8,} {result['edges']:>11,} "
                  f"{result['colour_bound']:>11,} {result['seconds']:8.1f} {result['peak'] / mb:8.0f} "
                  f"{result['estimate'] / mb:8.0f} {result['estimate'] / result['peak']:8.2f} "
                  f"{separate['seconds'] if separate else '-':>10} {ratio}", flush=True)
            for row in result["rows"]:
                cells = " ".join(f"{name} {row[name]:.2f}%" for name in ("BPE", "Det", "Bias", "Int"))
                print(f"{'':>8} K={row['budget']:<6} bound {row['bound']:,.0f}  {cells}  {row['status']}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--certify", action="store_true", help="the certify benchmark (see the docstring)")
    parser.add_argument("--sizes", default="1e6,5e6,1e7", help="slice sizes in bytes")
    parser.add_argument("--budgets", default="1024,4096,8192")
    parser.add_argument("--data", default=DATA, help="directory of .txt files")
    parser.add_argument("--code", default=PYTHON_STDLIB, help="glob of source files, a file a document ('' for none)")
    parser.add_argument("--corpus", default=None,
                        help="count this file or directory whole (e.g. the corpus of build_large.py) instead of slices")
    parser.add_argument("--head", type=float, default=None,
                        help="with --corpus FILE: only its first HEAD bytes, to the end of that document")
    parser.add_argument("--separate", action="store_true", help="also certify each budget in its own run")
    parser.add_argument("--max-token-bytes", type=int, default=None,
                        help="solve over tokens of at most this many bytes (the bound still covers every vocabulary)")
    parser.add_argument("--progress", action="store_true", help="show the workers' progress bars")
    parser.add_argument("--json", default=None)
    parser.add_argument("--certify-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.certify_worker is not None:
        print("RESULT " + json.dumps(certify_worker(json.loads(args.certify_worker))))
        return
    if not args.certify:
        parser.error("choose a benchmark: --certify")
    if args.head is not None and (args.corpus is None or not os.path.isfile(args.corpus)):
        parser.error("--head needs --corpus to name one file (e.g. bench_scale.py --shuffled's copy)")
    if args.head is not None:
        args.head = int(args.head)
    results = certify_main(args)
    if args.json:
        with open(args.json + ".tmp", "w") as handle:
            json.dump(results, handle, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
