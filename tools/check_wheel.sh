#!/usr/bin/env bash
# Installs the wheel in DIST into a bare venv (core dependencies only, as `pip install polytok`
# gives) and runs the documented commands on a small file: train, encode, decode, certify, report.
set -euo pipefail
dist=$(cd "${1:?usage: check_wheel.sh DIST_DIR}" && pwd)
wheel=$(ls -t "$dist"/polytok-*.whl | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel"
cd "$work"
export PATH="$work/venv/bin:$PATH"
python - <<'PY'
import gzip, polytok.corpus
with gzip.open(polytok.corpus.default_corpus(), "rt", encoding="utf-8") as stream:
    text = stream.read(300_000)
open("small.txt", "w", encoding="utf-8").write(text)
PY
polytok -q train small.txt -v 1024 -o bpe.json
echo "Hello, wheel! ¿Dónde está?" > line.txt
polytok encode -t bpe.json line.txt > ids.txt
polytok decode -t bpe.json ids.txt > back.txt
cmp line.txt back.txt
polytok -q certify -t bpe.json small.txt --solver dual
polytok -q report bpe.json --text small.txt line.txt -o report.html
test -s report.html && test -s report.json
echo "wheel check passed: $(basename "$wheel")"
