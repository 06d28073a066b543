"""The certify benchmark's mix of unspaced and other scripts (issue 36): every reporting half of
the unspaced languages (Japanese, both Chinese scripts, Khmer, Tibetan), then the reporting
halves of every other language, a document from each in turn, until the unspaced part is
`--unspaced` of the whole. Reporting halves by default: nothing in polytok was tuned on them.
`--half tune` builds the same mix from the tuning halves, the one to tune the solver on.

    python benchmarks/languages.py --mb 2        # the halves (see its docstring for apt-get)
    python benchmarks/unspaced_mix.py [--unspaced 0.3] [--half report|tune] [-o FILE]

Prints the bytes per script. Thai has no LibreOffice help package in Debian, so it is absent.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from languages import OUT, SCRIPTS, SEPARATOR, build, documents

UNSPACED = ("ja", "zh-CN", "zh-TW", "km", "dz")


def mix(unspaced_share: float, half: str = "report") -> tuple[list[str], dict[str, int]]:
    """The documents of the mix from each language's `half` ("report" or "tune"), and its bytes
    per language."""
    halves = build(2.0)
    missing = [language for language in UNSPACED if language not in halves]
    if missing:
        raise SystemExit(f"no reporting half for {', '.join(missing)}: install their libreoffice-help-* packages "
                         "and run languages.py")
    chosen: list[str] = []
    sizes: dict[str, int] = {}
    for language in UNSPACED:
        for document in documents(halves[language][half]):
            chosen.append(document)
            sizes[language] = sizes.get(language, 0) + len(document.encode("utf-8"))
    unspaced = sum(sizes.values())
    limit = unspaced * (1 - unspaced_share) / unspaced_share
    others = {language: documents(files[half]) for language, files in halves.items() if language not in UNSPACED}
    taken = 0
    depth = 0
    while taken < limit and any(depth < len(docs) for docs in others.values()):
        for language, docs in others.items():
            if depth < len(docs) and taken < limit:
                size = len(docs[depth].encode("utf-8"))
                chosen.append(docs[depth])
                sizes[language] = sizes.get(language, 0) + size
                taken += size
        depth += 1
    return chosen, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unspaced", type=float, default=0.3, help="share of the unspaced scripts")
    parser.add_argument("--half", choices=("report", "tune"), default="report",
                        help="the halves to build it from (tune on 'tune', report on 'report')")
    parser.add_argument("-o", "--output", help="default: benchmarks/out/unspaced-mix.txt, or "
                        "unspaced-mix-tune.txt for --half tune")
    args = parser.parse_args()
    if not 0 < args.unspaced <= 1:
        raise SystemExit(f"--unspaced must be in (0, 1], got {args.unspaced}")
    chosen, sizes = mix(args.unspaced, args.half)
    default = "unspaced-mix.txt" if args.half == "report" else "unspaced-mix-tune.txt"
    output = Path(args.output or OUT.parent / default)
    temporary = output.with_suffix(".tmp")
    temporary.write_text(SEPARATOR.join(chosen), encoding="utf-8")
    temporary.replace(output)
    total = sum(sizes.values())
    by_script: dict[str, int] = {}
    for language, size in sizes.items():
        by_script[SCRIPTS.get(language, "Latin")] = by_script.get(SCRIPTS.get(language, "Latin"), 0) + size
    print(f"{output}: {total / 1e6:.2f} MB, {len(chosen)} documents, {len(sizes)} languages, "
          f"unspaced {sum(sizes[language] for language in UNSPACED) / total:.1%}")
    for script, size in sorted(by_script.items(), key=lambda item: -item[1]):
        print(f"  {script:<18} {size / 1e6:6.2f} MB")


if __name__ == "__main__":
    main()
