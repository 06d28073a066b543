"""polytok at scale: two benchmarks behind one command.

    python benchmarks/bench_scale.py --certify [...]   # scale_certify.py: certify and ConvexTok
                                                       # at several budgets, time, peak memory
    python benchmarks/bench_scale.py [--ray] [...]     # scale_count.py: counting, locally and on
                                                       # a local Ray cluster of 1 and 2 workers

`python benchmarks/bench_scale.py --certify --help` and `... --ray --help` list each one's options.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

if __name__ == "__main__":
    if "--certify" in sys.argv[1:]:
        import scale_certify as benchmark
    else:
        import scale_count as benchmark
    benchmark.main()
