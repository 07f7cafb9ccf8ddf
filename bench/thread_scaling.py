#!/usr/bin/python3
"""`make bench-threads`: how smelt and ONNX Runtime scale from 1 thread to N on the model zoo.

    /usr/bin/python3 bench/thread_scaling.py [--quick] [--threads N] [--build-dir build] [--out DIR]

Runs bench/run.py twice over the real models (bench/models.json): with 1 thread, then with N (the
machine's logical CPUs by default), each side given the same count. For every model it reports the
compiled plan's and ONNX Runtime's median times at both counts and each one's speedup; smelt
"scales worse" where its speedup falls more than 5% short of ONNX Runtime's. On a 2-CPU machine
this is the proxy for the 16-core question (bench/README.md). The two runs' own reports stay in
OUT/threads-1 and OUT/threads-N; the table goes to OUT/scaling.md.
"""
import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
SCALES_WORSE = 0.95  # smelt's speedup below this share of ONNX Runtime's


def medians(results):
    """{workload: {impl: ms}} from a run's results.jsonl."""
    out = {}
    for line in results.read_text().splitlines():
        r = json.loads(line)
        if r.get("metric") == "ms":
            out.setdefault(r["workload"], {})[r["impl"]] = r["value"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (run.py --quick)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--out", default=str(BENCH_DIR / "out"))
    parser.add_argument("--only", default="inference b1", help="workloads whose name contains this")
    args = parser.parse_args()
    if args.threads < 2:
        sys.exit("thread_scaling.py: --threads must be at least 2 (1 is the baseline)")
    out = Path(args.out)
    runs = {}
    for threads in (1, args.threads):
        run_dir = out / f"threads-{threads}"
        argv = [sys.executable, str(BENCH_DIR / "run.py"), "--threads", str(threads), "--build-dir", args.build_dir,
                "--out", str(run_dir), "--only", args.only] + (["--quick"] if args.quick else [])
        print(f"== {threads} thread(s): {' '.join(argv[1:])}", flush=True)
        if subprocess.run(argv, stdout=subprocess.DEVNULL).returncode != 0:
            sys.exit(f"thread_scaling.py: run.py failed at {threads} thread(s)")
        runs[threads] = medians(run_dir / "results.jsonl")
    one, many = runs[1], runs[args.threads]
    n = args.threads
    lines = [f"# Thread scaling, 1 -> {n} threads (bench/thread_scaling.py{' --quick' if args.quick else ''})", "",
             "Median times of the compiled plan (smelt) and of ONNX Runtime on the same ONNX file, each run with the "
             f"thread count given; speedup = time at 1 / time at {n}. smelt scales worse where its speedup is "
             f"below {SCALES_WORSE:.2f}x ONNX Runtime's.", "",
             f"| model | smelt 1 | smelt {n} | smelt speedup | ORT 1 | ORT {n} | ORT speedup | verdict |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    speedups = {"smelt": [], "ort": []}
    for name, impls in one.items():
        if name not in many or "smelt-compiled" not in impls:
            continue
        s1, sn = impls["smelt-compiled"], many[name].get("smelt-compiled")
        o1, on = impls.get("ort"), many[name].get("ort")
        if sn is None:
            continue
        s_up = s1 / sn
        speedups["smelt"].append(s_up)
        cells = [f"{s1:.3g} ms", f"{sn:.3g} ms", f"{s_up:.2f}x"]
        verdict = "—"
        if o1 and on:
            o_up = o1 / on
            speedups["ort"].append(o_up)
            cells += [f"{o1:.3g} ms", f"{on:.3g} ms", f"{o_up:.2f}x"]
            verdict = "scales worse" if s_up < SCALES_WORSE * o_up else "ok"
        else:
            cells += ["—", "—", "—"]
        lines.append(f"| {name.replace(' inference b1', '')} | {' | '.join(cells)} | {verdict} |")
    for side, label in (("smelt", "smelt"), ("ort", "ONNX Runtime")):
        v = speedups[side]
        if v:
            lines.append("")
            lines.append(f"{label}: geometric mean speedup {math.exp(sum(map(math.log, v)) / len(v)):.2f}x over {len(v)} models.")
    text = "\n".join(lines) + "\n"
    (out / "scaling.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
