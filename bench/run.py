#!/usr/bin/python3
"""`make bench`: smelt against PyTorch and against this machine's limits, in one run.

Starts the two workload servers (build/bench/smelt_bench --serve and bench/torch_bench.py, same
thread count), lists their workloads, and measures them interleaved: in round r every workload
runs on smelt then on PyTorch, the other way round in round r+1, so drifting machine load hits
both sides alike. Each side warms a workload up before its first timed call. Times are medians
over all iterations of all rounds; the machine's limits (STREAM copy/triad, OpenBLAS sgemm) are
the best rates seen. Peak memory of the training steps is measured in fresh processes.

The row "python: 1000 tiny a + b" is smelt called from Python (bench/python_bench.py, a third
server, on the build tree's Python module) against the same loop over PyTorch tensors.

Rows of impl smelt-compiled run smelt::compile'd functions (backend "cpp": the kernels are compiled
in the server's warm-up, before any timed call). Compile time is measured apart, in fresh
processes (`smelt_bench --compile-time`): cold with an empty temporary SMELT_CACHE_DIR, then warm
with the disk cache the cold process filled.

Writes bench/out/results.jsonl, results.md and results.svg; a full run (not --quick) also
refreshes the table in bench/README.md and the chart bench/results.svg.

    /usr/bin/python3 bench/run.py [--quick] [--build-dir build] [--threads N] [--python PYTHON]
                                  [--models DIR] [--only TEXT]

The real models (ResNet-18, MobileNetV2, SqueezeNet 1.1, batch 1, 224x224) are ONNX files made by
tests/models/make_models.py in --models (default BUILD/models; made here when missing). ONNX
Runtime runs them as a third peer (bench/ort_bench.js on node, onnxruntime-node installed into
bench/ort/node_modules with `npm install --ignore-scripts` when missing), with the same thread count.

--python picks the interpreter that runs torch_bench.py (the peer): Debian's python3 with its
PyTorch 1.13 by default, or any other with a current PyTorch (see ../shared/device/).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import report

BENCH_DIR = Path(__file__).resolve().parent
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch, whatever `python3` is first on PATH

# name: (rounds, target ms of work per timed call, max iterations per call, peak-memory steps,
#        cold/warm compile-time pairs)
MODES = {"quick": (3, 120.0, 50, 3, 1), "full": (9, 600.0, 400, 10, 3)}


class Server:
    """One workload server speaking the tab-separated line protocol."""

    def __init__(self, label, argv, env):
        self.label = label
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     text=True, bufsize=1)

    def ask(self, *parts):
        self.proc.stdin.write("\t".join(str(p) for p in parts) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label} server exited (code {self.proc.wait()})")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


class Task:
    """One (workload, impl) pair and its samples; `name` is what the results call it."""

    def __init__(self, workload, impl, server, name=None):
        self.workload, self.impl, self.server = workload, impl, server
        self.name = name or workload
        self.ms = []
        self.per_call = 1
        self.error = None
        self.note = None  # smelt-compiled: what the compile produced (first reply)

    def run(self, n):
        if self.error:
            return
        reply = self.server.ask("run", self.workload, self.impl, n)
        if "error" in reply:
            self.error = reply["error"]
            print(f"  {self.name} [{self.impl}]: {self.error}", file=sys.stderr)
        else:
            self.ms.extend(reply["ms"])
            self.note = reply.get("note", self.note)


def merge_lists(listings):
    """Workloads by name, in the order of the servers' lists; impls map to the server's label."""
    merged = {}
    for side, listing in listings:
        for w in listing["workloads"]:
            entry = merged.setdefault(w["name"], {"name": w["name"], "bytes": 0.0, "flops": 0.0,
                                                  "impls": {}, "missing": {}, "peak_memory": {}})
            for key in ("bytes", "flops"):
                if w.get(key) and entry[key] and abs(w[key] - entry[key]) > 1e-6 * entry[key]:
                    print(f"warning: {w['name']}: {key} differ ({entry[key]} vs {w[key]})", file=sys.stderr)
                entry[key] = entry[key] or float(w.get(key) or 0.0)
            for impl in w["impls"]:
                entry["impls"][impl] = side
            entry["missing"].update(w.get("missing", {}))
            entry["peak_memory"][side] = bool(w.get("peak_memory", False))
    return list(merged.values())


GEMM_LIMIT = "OpenBLAS sgemm 1024^3"
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")


def avx512_blas_env(env):
    """The environment for a second OpenBLAS sgemm limit with AVX-512 kernels, or None.

    OpenBLAS picks its kernels once per process (OPENBLAS_CORETYPE, else its CPU detection, which
    may not know a new CPU). When the CPU has AVX-512 and the environment does not already ask for
    AVX-512 kernels, a second process measures them too: the best rate is the GEMM ceiling."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return None
    if not {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return None
    if env.get("OPENBLAS_CORETYPE", "").lower() in AVX512_CORES:
        return None
    return dict(env, OPENBLAS_CORETYPE="SkylakeX")


def l3_bytes():
    try:
        size = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
        return int(size.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1)
    except (OSError, ValueError):
        return 0


# The real models (bench/models.json, the list every harness reads): the float zoo, and the INT8 QDQ
# files of three CNNs (issue 25's targets).
LISTED_MODELS = json.loads((BENCH_DIR / "models.json").read_text())["models"]
MODEL_WORKLOADS = tuple(m["name"] for m in LISTED_MODELS if "int8_of" not in m)
INT8_WORKLOADS = tuple(m["name"] for m in LISTED_MODELS if "int8_of" in m)


# Calls of each compiled model with the plan's per-step profile on, for the report's list of the
# kernels that hold a model back.
PROFILE_RUNS = 20


def model_profiles(workloads, server):
    """Per-step profile (ms, bytes, flops per call) of each compiled model, by workload name."""
    profiles = {}
    for w in workloads:
        if w["name"] in MODEL_WORKLOADS + INT8_WORKLOADS and "smelt-compiled" in w["impls"]:
            reply = server.ask("profile", w["name"], "smelt-compiled", PROFILE_RUNS)
            if "kernels" in reply:
                profiles[w["name"]] = reply["kernels"]
            else:
                print(f"  {w['name']} [profile]: {reply.get('error')}", file=sys.stderr)
    return profiles


def make_models(models):
    """The full-size ONNX models (tests/models/make_models.py large --keep: those not there yet, so
    a model added to the list is made in a directory that has the others)."""
    print(f"making the full-size models missing in {models} (tests/models/make_models.py large) ...", flush=True)
    done = subprocess.run([PYTHON, str(BENCH_DIR.parent / "tests" / "models" / "make_models.py"), "large", str(models),
                           "--keep"])
    if done.returncode == 0:
        (models / "complete").touch()
    else:
        print("warning: making the models failed; their rows show what is missing", file=sys.stderr)


# The CNNs the INT8 rows quantize: float model directory -> INT8 QDQ directory, in a sibling of the
# models directory (`smelt check` of the ctest models_large reads every model directory there and
# would find no test data for these).
INT8_MODELS = {m["int8_of"]: m["dir"] for m in LISTED_MODELS if "int8_of" in m}
CALIBRATION_IMAGES = 8


def make_int8_models(models, smelt_cli):
    """The INT8 QDQ files of INT8_MODELS not there yet: `smelt quantize --format qdq` with entropy
    thresholds over CALIBRATION_IMAGES random-normal images (the timing does not depend on them)."""
    calibration = (models / ".." / "models_int8" / "calibration_224").resolve()
    if not calibration.exists():
        import numpy as np  # Debian's python3-numpy, beside python3-torch
        calibration.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for i in range(CALIBRATION_IMAGES):
            np.save(calibration / f"image{i}.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    for float_dir, int8_dir in INT8_MODELS.items():
        source, target = models / float_dir / "model.onnx", (models / int8_dir / "model.onnx").resolve()
        if target.exists() or not source.exists():
            continue
        print(f"quantizing {source} -> {target} (smelt quantize --format qdq) ...", flush=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([str(smelt_cli), "quantize", str(source), "--calibration", str(calibration),
                               "--format", "qdq", "-o", str(target)], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"warning: quantizing {float_dir} failed; its INT8 row shows what is missing\n{done.stderr}",
                  file=sys.stderr)


def ort_ready():
    """'' when ONNX Runtime can run (node, and onnxruntime-node installed, here if missing), else why not."""
    if not shutil.which("node") or not shutil.which("npm"):
        return "node/npm not installed"
    ort_dir = BENCH_DIR / "ort"
    if not (ort_dir / "node_modules" / "onnxruntime-node").exists():
        print("installing onnxruntime-node into bench/ort/node_modules (npm install --ignore-scripts) ...", flush=True)
        done = subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=ort_dir)
        if done.returncode != 0:
            return "npm install onnxruntime-node failed"
    return ""


def calibrate(tasks, target_ms, max_n):
    """One call of one iteration each (after the server's own warm-up) sets iterations per call."""
    for task in tasks:
        task.run(1)
        if task.ms:
            task.per_call = max(1, min(max_n, round(target_ms / max(task.ms[-1], 1e-3))))
            task.ms.clear()


def measure(workloads, tasks_by_workload, rounds):
    for r in range(rounds):
        t0 = time.time()
        for w in workloads:
            tasks = tasks_by_workload.get(w["name"], [])
            # smelt first in even rounds, PyTorch first in odd ones
            ordered = sorted(tasks, key=lambda t: (t.server.label == "torch") ^ (r % 2 == 1))
            for task in ordered:
                task.run(task.per_call)
        print(f"round {r + 1}/{rounds}: {time.time() - t0:.1f} s", flush=True)


def peak_memory(argv_prefix, workload, steps, env, impl=None):
    """Peak RSS growth of `steps` steps in a fresh process; `impl` picks smelt's side (eager or
    compiled), torch_bench.py measures its eager step."""
    out = subprocess.run(argv_prefix + ["--peak-memory", workload, str(steps)] + ([impl] if impl else []), env=env,
                         capture_output=True, text=True, timeout=600)
    try:
        reply = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        reply = {"error": (out.stderr or out.stdout).strip()[-300:]}
    return reply


def compile_times(smelt_argv, names, pairs, env):
    """Per name: `pairs` cold first calls (each with a fresh empty SMELT_CACHE_DIR) and as many warm
    ones (a fresh process on the disk cache its cold run filled). Each in a fresh process, so
    nothing is cached in memory."""
    results = {}
    for name in names:
        runs = {"cold": [], "warm": []}
        for _ in range(pairs):
            with tempfile.TemporaryDirectory(prefix="smelt-bench-cache-") as cache:
                for kind in ("cold", "warm"):
                    out = subprocess.run(smelt_argv + ["--compile-time", name], capture_output=True, text=True,
                                         timeout=600, env=dict(env, SMELT_CACHE_DIR=cache))
                    try:
                        reply = json.loads(out.stdout.strip().splitlines()[-1])
                    except (IndexError, json.JSONDecodeError):
                        reply = {"error": (out.stderr or out.stdout).strip()[-300:]}
                    runs[kind].append(reply)
        results[name] = runs
        print(f"compile time: {name}: " + ", ".join(
            f"{kind} {[round(r.get('first_call_ms', float('nan'))) for r in rs]} ms" for kind, rs in runs.items()),
            flush=True)
    return results


def machine_info(threads, smelt_threads, torch_threads):
    model, cores = platform.processor() or platform.machine(), os.cpu_count()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
        model = fields.get("Model name", model).strip()
        cores = int(fields.get("Core(s) per socket", cores)) * int(fields.get("Socket(s)", 1))
    except (OSError, ValueError):
        pass
    return {"cpu": model, "cores": cores, "logical_cpus": os.cpu_count(), "threads": threads,
            "smelt_threads": smelt_threads, "torch_threads": torch_threads}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and iterations (< 5 min)")
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=str(BENCH_DIR / "out"))
    parser.add_argument("--only", default="", help="run only workloads whose name contains this")
    parser.add_argument("--python", default=PYTHON, help="the interpreter running torch_bench.py (the peer)")
    parser.add_argument("--models", default="", help="the full-size ONNX models (default: BUILD/models)")
    args = parser.parse_args()
    rounds, target_ms, max_n, mem_steps, compile_pairs = MODES["quick" if args.quick else "full"]
    started, wall0, load0 = datetime.now(timezone.utc), time.time(), os.getloadavg()

    smelt_exe = Path(args.build_dir).resolve() / "bench" / "smelt_bench"
    if not smelt_exe.exists():
        sys.exit(f"run.py: {smelt_exe} not found; build first (make build)")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    models = Path(args.models or Path(args.build_dir) / "models").resolve()
    if any(args.only in w for w in MODEL_WORKLOADS + INT8_WORKLOADS):
        make_models(models)
        make_int8_models(models, Path(args.build_dir).resolve() / "smelt")
    env["SMELT_BENCH_MODELS"] = str(models)
    smelt_argv = [str(smelt_exe)]
    torch_argv = [args.python, str(BENCH_DIR / "torch_bench.py")]
    servers = {"smelt": Server("smelt", smelt_argv + ["--serve"], env),
               "limits": Server("limits", smelt_argv + ["--serve-limits"], env),
               "torch": Server("torch", torch_argv, env)}
    ort_missing = ort_ready()
    if not ort_missing:
        servers["ort"] = Server("ort", ["node", str(BENCH_DIR / "ort_bench.js"), str(models)], env)
    # smelt called from Python (bench/python_bench.py), when the build has the Python module: it
    # is built for Debian's interpreter, whatever --python names for the peer.
    python_pkg = Path(args.build_dir).resolve() / "python"
    if (python_pkg / "smelt" / "__init__.py").exists():
        servers["python"] = Server("python", [PYTHON, str(BENCH_DIR / "python_bench.py")],
                                   dict(env, PYTHONPATH=str(python_pkg)))
    blas_env = avx512_blas_env(env)
    if blas_env:
        servers["limits-avx512"] = Server("limits-avx512", smelt_argv + ["--serve-limits"], blas_env)
    try:
        listings = {side: servers[side].ask("list") for side in ("smelt", "limits", "torch", "python", "ort")
                    if side in servers}
        smelt_list, torch_list = listings["smelt"], listings["torch"]
        workloads = [w for w in merge_lists(listings.items()) if args.only in w["name"]]
        tasks_by_workload = {w["name"]: [Task(w["name"], impl, servers[side])
                                         for impl, side in w["impls"].items()] for w in workloads}
        gemm = next((w for w in workloads if w["name"] == GEMM_LIMIT), None)
        if blas_env and gemm:
            name = f"{GEMM_LIMIT} ({blas_env['OPENBLAS_CORETYPE']} kernels)"
            workloads.insert(workloads.index(gemm) + 1, dict(gemm, name=name))
            tasks_by_workload[name] = [Task(GEMM_LIMIT, "limit", servers["limits-avx512"], name)]
        all_tasks = [t for ts in tasks_by_workload.values() for t in ts]
        print(f"{len(workloads)} workloads, {len(all_tasks)} timed pairs, {rounds} rounds, "
              f"{args.threads} threads", flush=True)
        calibrate(all_tasks, target_ms, max_n)
        measure(workloads, tasks_by_workload, rounds)
        profiles = model_profiles(workloads, servers["smelt"])
    finally:
        for server in servers.values():
            server.close()

    memory = {}
    for w in workloads:
        for side, argv in (("smelt", smelt_argv), ("torch", torch_argv)):
            if not w["peak_memory"].get(side):
                continue
            if side == "torch":
                memory[(w["name"], "torch-eager")] = peak_memory(argv, w["name"], mem_steps, env)
                continue
            for impl in ("smelt-eager", "smelt-compiled"):
                if w["impls"].get(impl) == "smelt":
                    memory[(w["name"], impl)] = peak_memory(argv, w["name"], mem_steps, env, impl)
    print(f"peak memory: {len(memory)} fresh processes", flush=True)
    compile_names = [n for n in smelt_list.get("compile_time", []) if args.only in n]
    compiles = compile_times(smelt_argv, compile_names, compile_pairs, env)

    results = build_results(workloads, tasks_by_workload, memory, l3_bytes(), profiles)
    results["compile_time"] = compiles
    for name, runs in compiles.items():
        for kind, replies in runs.items():
            ok = [r["first_call_ms"] - r["replay_ms"] for r in replies if "first_call_ms" in r]
            if ok:
                results["records"].append({"workload": f"compile time: {name}", "impl": f"smelt-compiled {kind}",
                                           "metric": "ms", "value": round(statistics.median(ok), 3)})
    info = machine_info(args.threads, smelt_list.get("threads"), torch_list.get("threads"))
    run = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "mode": "QUICK" if args.quick else "full",
           "command": "make bench QUICK=1" if args.quick else "make bench", "rounds": rounds,
           "seconds": time.time() - wall0, "load_before": load0, "load_after": os.getloadavg(),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""), "peer": torch_list.get("peer", {}),
           "ort_peer": listings.get("ort", {}).get("peer", {}), "ort_missing": ort_missing,
           **info}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as f:
        for record in results["records"]:
            f.write(json.dumps(record) + "\n")
    markdown = report.markdown(run, results)
    (out / "results.md").write_text(markdown)
    (out / "results.svg").write_text(report.svg(run, results))
    if not args.quick and not args.only:
        shutil.copyfile(out / "results.svg", BENCH_DIR / "results.svg")
        report.update_readme(BENCH_DIR / "README.md", markdown)
    print(markdown)
    print(f"wrote {out}/results.jsonl, results.md, results.svg in {run['seconds']:.0f} s")


def build_results(workloads, tasks_by_workload, memory, l3_size, profiles=None):
    """Medians, rates, roofline fractions and ratios, plus the jsonl records."""
    records, rows = [], []
    for w in workloads:
        row = {"name": w["name"], "bytes": w["bytes"], "flops": w["flops"], "missing": w["missing"],
               "impls": sorted(w["impls"]), "training": any(w["peak_memory"].values()),
               "ms": {}, "spread": {}, "errors": {}, "samples": {}, "mib": {}, "notes": {},
               "profile": (profiles or {}).get(w["name"], [])}
        for task in tasks_by_workload.get(w["name"], []):
            if task.note:
                row["notes"][task.impl] = task.note
            if task.error:
                row["errors"][task.impl] = task.error
                continue
            if not task.ms:
                continue
            samples = sorted(task.ms)
            # limits: the best time is the machine's capability; workloads: the median
            value = samples[0] if task.impl == "limit" else statistics.median(samples)
            quartiles = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [value, value, value]
            row["ms"][task.impl] = value
            row["spread"][task.impl] = (quartiles[2] - quartiles[0]) / value if value else 0.0
            row["samples"][task.impl] = len(samples)
            records.append({"workload": w["name"], "impl": task.impl, "metric": "ms", "value": round(value, 6)})
            if w["bytes"]:
                records.append({"workload": w["name"], "impl": task.impl, "metric": "GB/s",
                                "value": round(w["bytes"] / value / 1e6, 3)})
            if w["flops"]:
                records.append({"workload": w["name"], "impl": task.impl, "metric": "GFLOP/s",
                                "value": round(w["flops"] / value / 1e6, 3)})
        for impl in ("smelt-eager", "smelt-compiled", "torch-eager"):
            reply = memory.get((w["name"], impl))
            if reply is None:
                continue
            if "error" in reply:
                row["errors"][impl + " memory"] = reply["error"]
            else:
                row["mib"][impl] = reply["MiB"]
                records.append({"workload": w["name"], "impl": impl, "metric": "MiB",
                                "value": round(reply["MiB"], 3)})
        rows.append(row)

    def limit_rate(name, amount):  # bytes or flops per ms
        row = next((r for r in rows if r["name"] == name and "limit" in r["ms"]), None)
        return row[amount] / row["ms"]["limit"] if row else None

    dram = limit_rate("STREAM triad", "bytes")
    in_l3 = limit_rate("STREAM triad in L3 (3x4 MiB)", "bytes")
    gemm_rates = [r["flops"] / r["ms"]["limit"] for r in rows if "limit" in r["ms"] and r["flops"]]
    gemm_rate = max(gemm_rates, default=None)
    for row in rows:
        bounds = []  # (time at the ceiling, which ceiling)
        if row["bytes"]:
            # data that fits in half the last-level cache stays there between iterations
            if in_l3 and row["bytes"] <= l3_size / 2:
                bounds.append((row["bytes"] / in_l3, "L3"))
            elif dram:
                bounds.append((row["bytes"] / dram, "DRAM"))
        if row["flops"] and gemm_rate:
            bounds.append((row["flops"] / gemm_rate, "GEMM"))
        row["roofline_ms"], row["roofline_kind"] = max(bounds) if bounds else (None, None)
        row["gemm_rate"] = gemm_rate  # flops per ms: the best sgemm rate of this run
    return {"rows": rows, "records": records}


if __name__ == "__main__":
    main()
