"""Reports of bench/run.py: the markdown table, the SVG chart (drawn by hand) and README update."""
import math
import re
from html import escape

README_BEGIN = "<!-- results:begin (written by bench/run.py; do not edit by hand) -->"
README_END = "<!-- results:end -->"
NOT_YET = "not yet available"


def _rate(row, ms):
    parts = []
    if row["bytes"]:
        parts.append(f"{row['bytes'] / ms / 1e6:.1f} GB/s")
    if row["flops"]:
        parts.append(f"{row['flops'] / ms / 1e6:.1f} GFLOP/s")
    if row["name"].startswith(("dispatch:", "chain:")):
        parts.append(f"{ms * 1e3:.3g} ns/op")  # 1000 ops: ms per call * 1000 = ns per op
    return f" ({', '.join(parts)})" if parts else ""


def _ms(value):
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _cell(row, impl):
    if impl in row["ms"]:
        ms = row["ms"][impl]
        noisy = row["spread"].get(impl, 0.0)
        note = f" ±{50 * noisy:.0f}%" if noisy > 0.2 else ""  # half the interquartile range
        return f"{_ms(ms)} ms{_rate(row, ms)}{note}"
    if impl in row["missing"]:
        return f"{NOT_YET}: {row['missing'][impl]}"
    if impl in row["errors"]:
        return f"error: {row['errors'][impl]}"
    return "—"


def speedup(row, impl="smelt-eager", baseline="torch-eager"):
    """baseline time / impl time: above 1 means impl is faster."""
    if impl in row["ms"] and baseline in row["ms"]:
        return row["ms"][baseline] / row["ms"][impl]
    return None


def roofline_fraction(row, impl):
    if row["roofline_ms"] and impl in row["ms"]:
        return row["roofline_ms"] / row["ms"][impl]
    return None


def _pct(x, row=None):
    if x is None:
        return "—"
    return f"{100 * x:.0f}%" + (f" ({row['roofline_kind']})" if row else "")


IMPLS = ("smelt-eager", "smelt-compiled", "torch-eager", "torch-script")


def _ratio(row, impl, baseline):
    s = speedup(row, impl, baseline)
    return "—" if s is None else f"{s:.2f}x"


def _peer_line(run):
    peer = run.get("peer") or {}
    if not peer:
        return "Peer: PyTorch (its version was not reported)."
    cfg = peer.get("config", {})
    libs = []
    if cfg.get("BLAS_INFO"):
        mapped = ", ".join(cfg.get("blas_library", [])) or "not seen"
        libs.append(f"BLAS_INFO={cfg['BLAS_INFO']} (library loaded: {mapped})")
    libs += cfg.get("libraries", [])
    libs.append("MKL" if peer.get("mkl") else "no MKL")
    libs.append("oneDNN/mkldnn on" if peer.get("mkldnn") else "no oneDNN")
    return (f"Peer: PyTorch {peer.get('version', '?')} under {peer.get('python', '?')} (Python "
            f"{peer.get('python_version', '?')}); {'; '.join(libs)} (from torch.__config__). "
            "Debian's PyTorch 1.13 is an old peer; `bench/run.py --python PYTHON` runs the suite "
            "against a current one.")


def _limit(rows, name):
    """A limit's rate: bytes per ms (bandwidth) or flops per ms; None when not measured."""
    row = next((r for r in rows if r["name"] == name and "limit" in r["ms"]), None)
    if not row:
        return None
    return (row["bytes"] or row["flops"]) / row["ms"]["limit"]


def _median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def compile_time_summary(runs):
    """Median compile time (first call - one replay), first call, kernels compiled, per kind."""
    out = {}
    for kind, replies in runs.items():
        ok = [r for r in replies if "first_call_ms" in r]
        if not ok:
            out[kind] = {"error": next((r.get("error") for r in replies), "no run")}
            continue
        out[kind] = {"n": len(ok), "compile_ms": _median([r["first_call_ms"] - r["replay_ms"] for r in ok]),
                     "first_call_ms": _median([r["first_call_ms"] for r in ok]),
                     "pipeline_ms": _median([r["pipeline_ms"] for r in ok]),
                     "replay_ms": _median([r["replay_ms"] for r in ok]),
                     "kernels": ok[0]["kernels"], "compiled": _median([r["kernels_compiled"] for r in ok]),
                     "disk_hits": _median([r["disk_hits"] for r in ok]),
                     "gxx_ms": _median([r.get("compile_seconds", 0) * 1e3 for r in ok])}
    return out


# The performance targets for the compiled path (never asserted in tests: reported here).
COMPILE_TIME_TARGET = "MLP 784-1024-1024-10 train step b256"  # issue 8: the MLP training step


def targets(results, busy=False):
    """[(target, measured, verdict)] for each performance target of smelt::compile. On a busy
    machine (load above its CPUs) a verdict says so: times and limits were both measured under
    contention, and a fraction of a depressed limit can even exceed 100%."""
    rows = results["rows"]
    by_name = {r["name"]: r for r in rows}
    ms = lambda name, impl: by_name.get(name, {}).get("ms", {}).get(impl)
    triad, triad_l3 = _limit(rows, "STREAM triad"), _limit(rows, "STREAM triad in L3 (3x4 MiB)")
    caveat = " (busy machine: unreliable)" if busy else ""
    verdict = lambda ok: "—" if ok is None else ("**met**" if ok else "not met") + caveat
    above = lambda fraction: " (above the measured limit: the limit was depressed by load)" if fraction > 1 else ""
    out = []

    name = "gelu(x*a+b) 16M"
    eager, comp = ms(name, "smelt-eager"), ms(name, "smelt-compiled")
    if eager and comp:
        out.append((f"{name}: smelt-compiled at least 4x faster than smelt-eager",
                    f"{eager / comp:.2f}x ({_ms(eager)} -> {_ms(comp)} ms)", verdict(eager / comp >= 4)))
    else:
        out.append((f"{name}: at least 4x smelt-eager", "not measured", "—"))
    if comp and triad:
        gbs = by_name[name]["bytes"] / comp
        out.append((f"{name}: at least 50% of STREAM triad (one read, one write)",
                    f"{gbs / 1e6:.1f} GB/s = {100 * gbs / triad:.0f}% of {triad / 1e6:.1f} GB/s{above(gbs / triad)}",
                    verdict(gbs / triad >= 0.5)))
    for name in ("softmax 2048x1024", "log_softmax 2048x1024", "layer_norm 2048x1024"):
        comp = ms(name, "smelt-compiled")
        if comp and triad:
            gbs = by_name[name]["bytes"] / comp
            l3 = f"; {100 * gbs / triad_l3:.0f}% of the in-L3 triad, where its 16 MiB fit" if triad_l3 else ""
            out.append((f"{name}: at least 70% of STREAM triad",
                        f"{gbs / 1e6:.1f} GB/s = {100 * gbs / triad:.0f}% of {triad / 1e6:.1f} GB/s{above(gbs / triad)}{l3}",
                        verdict(gbs / triad >= 0.7)))
        else:
            out.append((f"{name}: at least 70% of STREAM triad", "not measured", "—"))
    comp, gemm, gemm_c = (ms("linear+bias+relu 1024^3", "smelt-compiled"), ms("sgemm 1024^3", "smelt-eager"),
                          ms("sgemm 1024^3", "smelt-compiled"))
    if comp and gemm:
        also = f"; {comp / gemm_c:.2f}x the compiled plain GEMM ({_ms(gemm_c)} ms)" if gemm_c else ""
        out.append(("linear+bias+relu 1024^3 compiled: at most 1.03x the plain GEMM's time",
                    f"{comp / gemm:.2f}x ({_ms(comp)} ms vs sgemm {_ms(gemm)} ms on smelt-eager){also}",
                    verdict(comp / gemm <= 1.03)))
    comp, unfused = ms("chain: 1000 tiny adds", "smelt-compiled"), ms("chain: 1000 tiny adds, unfused plan", "smelt-compiled")
    if comp:
        extra = f"; unfused plan (1000 op steps): {unfused * 1e3:.0f} ns per op" if unfused else ""
        out.append(("replaying a compiled chain of 1,000 tiny ops: at most 100 ns per op",
                    f"{comp * 1e3:.1f} ns per op (default fusion){extra}", verdict(comp * 1e3 <= 100)))
    summary = compile_time_summary(results.get("compile_time", {}).get(COMPILE_TIME_TARGET, {}))
    what = "compile time of the MLP 784-1024-1024-10 training step b256 (joint forward+backward graph)"
    for kind, limit_ms, label in (("cold", 3000, "cold (empty disk cache) at most 3 s"),
                                  ("warm", 50, "warm (disk cache) at most 50 ms")):
        t = summary.get(kind)
        if t and "compile_ms" in t:
            out.append((f"{what}: {label}", f"{_ms(t['compile_ms'])} ms (median of {t['n']} fresh processes)",
                        verdict(t["compile_ms"] <= limit_ms)))
        else:
            out.append((f"{what}: {label}", (t or {}).get("error", "not measured"), "—"))
    return out


def markdown(run, results):
    rows = results["rows"]
    is_limit = lambda r: "limit" in r["impls"] or "limit" in r["missing"]
    limits = [r for r in rows if is_limit(r) and "limit" in r["ms"]]
    future = [r for r in rows if not is_limit(r) and not r["impls"]]  # no side can run it yet
    workloads = [r for r in rows if not is_limit(r) and r["impls"]]
    load = ", ".join(f"{x:.2f}" for x in run["load_before"])
    load_after = ", ".join(f"{x:.2f}" for x in run["load_after"])
    out = [
        f"Run of {run['date']}: `{run['command']}` ({run['mode']} mode, {run['rounds']} interleaved "
        f"rounds, {run['seconds'] / 60:.1f} min).",
        "",
        f"Machine: {run['cpu']}, {run['cores']} cores ({run['logical_cpus']} logical CPUs); "
        f"{run['threads']} threads for both sides (smelt reports {run['smelt_threads']}, "
        f"PyTorch {run['torch_threads']}). Load average (1, 5, 15 min) {load} before the run, "
        f"{load_after} after." + (
            f" **The machine was busy** (load above its {run['logical_cpus']} CPUs): other work "
            "competed for the cores, so times are inflated and noisy, on both sides alike."
            if max(run["load_before"][0], run["load_after"][0]) > run["logical_cpus"] else ""),
        "",
        _peer_line(run),
        "",
        "Limits measured in the same run (best of all iterations): " + "; ".join(
            f"{r['name']} {_limit_rate(r)}" for r in limits) + "."
        + (f" The environment sets OPENBLAS_CORETYPE={run['openblas_coretype']} for both sides."
           if run.get("openblas_coretype") else ""),
        "",
        "Times are medians over all iterations of all rounds (±: half the interquartile range, "
        "shown when above 10% of the median). smelt-compiled: `smelt::compile(fn, {.backend = "
        "\"cpp\", .freeze = true})` (captured weights as constants), every kernel generated, "
        "compiled and loaded before the first timed call. "
        "Ratios are time ratios (above 1: the first named is faster): compiled vs eager = "
        "smelt-eager / smelt-compiled; vs torch = torch-eager / smelt. Roofline = the time the "
        "workload's bytes take at the triad bandwidth (DRAM, or L3 when they fit in half the "
        "last-level cache) or its flops at the best sgemm rate (GEMM), whichever is longer, as a "
        "fraction of the measured time (smelt-eager / smelt-compiled / torch-eager). Bytes count "
        "one read of each input and one write of the output; the GELU chain is compute-bound "
        "(erf), so its DRAM fraction stays low.",
        "",
        "| workload | smelt-eager | smelt-compiled | torch-eager | torch-script | compiled vs eager "
        "| eager vs torch | compiled vs torch | roofline eager / compiled / torch |",
        "|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    missing_notes = {}  # reason -> mark
    for r in workloads:
        cells = []
        for impl in IMPLS:
            if impl not in r["ms"] and impl in r["missing"]:
                mark = missing_notes.setdefault(r["missing"][impl], "†" * (len(missing_notes) + 1))
                cells.append(f"not yet{mark}")
            else:
                cells.append(_cell(r, impl))
        fractions = [roofline_fraction(r, impl) for impl in ("smelt-eager", "smelt-compiled", "torch-eager")]
        roof = ("—" if not any(f is not None for f in fractions) else
                " / ".join("—" if f is None else f"{100 * f:.0f}%" for f in fractions) + f" ({r['roofline_kind']})")
        out.append(f"| {r['name']} | {' | '.join(cells)} | {_ratio(r, 'smelt-compiled', 'smelt-eager')} | "
                   f"{_ratio(r, 'smelt-eager', 'torch-eager')} | {_ratio(r, 'smelt-compiled', 'torch-eager')} | "
                   f"{roof} |")
    for reason, mark in missing_notes.items():
        out += ["", f"{mark} {reason}."]

    out += model_section(run, workloads)
    out += int8_section(workloads)

    out += ["", "### Targets of smelt::compile (issue 8), this run", ""]
    busy = max(run["load_before"][0], run["load_after"][0]) > run["logical_cpus"]
    if busy:
        out += ["Verdicts of a busy run are marked: the times and the limits they are compared "
                "with were both taken under contention; rerun on a quiet machine to settle them.", ""]
    out += ["| target | measured | verdict |", "|---|---|---|"]
    for target, measured, verdict in targets(results, busy):
        out.append(f"| {target} | {measured} | {verdict} |")

    compiles = results.get("compile_time", {})
    if compiles:
        out += ["", "Compile time: the first call of a compiled function in a fresh process, minus "
                "one replay (what the first call ran besides compiling), medians; cold = an empty "
                "temporary SMELT_CACHE_DIR (every kernel through g++), warm = a fresh process on the "
                "disk cache the cold one filled (nothing cached in memory). The pipeline column is "
                "CompileReport::compile_ms (passes, fusion, plan, kernels; without the trace); g++ "
                "time is the kernel cache's total time in the compiler.", "",
                "| function | cold | warm | cold: first call, pipeline, g++ runs (time) | warm: first "
                "call, pipeline, disk hits | replay |", "|---|---:|---:|---|---|---:|"]
        for name, runs in compiles.items():
            t = compile_time_summary(runs)
            cold, warm = t.get("cold", {}), t.get("warm", {})
            if "compile_ms" not in cold or "compile_ms" not in warm:
                out.append(f"| {name} | error: {cold.get('error') or warm.get('error')} | | | | |")
                continue
            out.append(f"| {name} | {_ms(cold['compile_ms'])} ms | {_ms(warm['compile_ms'])} ms | "
                       f"{_ms(cold['first_call_ms'])} ms, {_ms(cold['pipeline_ms'])} ms, "
                       f"{cold['compiled']:.0f} of {cold['kernels']} kernels ({_ms(cold['gxx_ms'])} ms) | "
                       f"{_ms(warm['first_call_ms'])} ms, {_ms(warm['pipeline_ms'])} ms, "
                       f"{warm['disk_hits']:.0f} | {_ms(warm['replay_ms'])} ms |")

    notes = [(r["name"], r["notes"]["smelt-compiled"]) for r in workloads if r.get("notes", {}).get("smelt-compiled")]
    if notes:
        out += ["", "What smelt::compile made of each workload (`build/bench/smelt_bench --describe NAME` "
                "prints the plan):", "", "| workload | compiled plan |", "|---|---|"]
        for name, note in notes:
            out.append(f"| {name} | {note} |")

    memory = [r for r in workloads if r["training"]]
    if memory:
        out += ["", "Peak memory of the training steps: growth of the peak resident set (ru_maxrss) "
                "over the steps, above the peak after building the model and inputs, each in a "
                "fresh process; 0 means the steps never went above that earlier peak.", "",
                "| training step | smelt-eager | smelt-compiled | torch-eager | eager / torch | "
                "compiled / torch |", "|---|---:|---:|---:|---:|---:|"]
        for r in memory:
            mib = r["mib"]
            cells = []
            for impl in ("smelt-eager", "smelt-compiled", "torch-eager"):
                if impl in mib:
                    cells.append(f"{mib[impl]:.1f} MiB")
                elif impl in r["missing"]:
                    cells.append(NOT_YET)
                else:
                    cells.append(r["errors"].get(impl + " memory", "—"))

            def over_torch(impl):
                return f"{mib[impl] / mib['torch-eager']:.2f}" if impl in mib and mib.get("torch-eager") else "—"
            out.append(f"| {r['name']} | {' | '.join(cells)} | {over_torch('smelt-eager')} | "
                       f"{over_torch('smelt-compiled')} |")
    if future:
        out += ["", "Workloads of the issue that smelt cannot run yet:", "",
                "| workload | status |", "|---|---|"]
        for r in future:
            reason = r["missing"].get("smelt-eager", "")
            out.append(f"| {r['name']} | {NOT_YET}: {reason} |")
    return "\n".join(out) + "\n"


MODEL_SUFFIX = "inference b1 224x224"
# Issue 9's second target (at least 2x PyTorch eager) named the CNNs and the LSTM tagger; issue 24's
# (at most ONNX Runtime's time, and the zoo's geometric mean of compiled / ONNX Runtime at most
# 0.85) holds for every model of the zoo.
ZOO_GEOMEAN_TARGET = 0.85
TORCH_TARGETED_MODELS = ("ResNet-18 inference b1 224x224", "MobileNetV2 inference b1 224x224",
                         "SqueezeNet 1.1 inference b1 224x224", "MobileNetV3-small inference b1 224x224",
                         "EfficientNet-B0 inference b1 224x224", "LSTM tagger h256 l2 bidirectional s64 inference b1")


def _model_label(name):
    return name.replace(" " + MODEL_SUFFIX, "").replace(" inference b1", "")


def model_section(run, workloads):
    """The real models against ONNX Runtime and PyTorch, with the issue-9 targets: smelt compiled
    at most ONNX Runtime's latency and at least 2x faster than PyTorch eager."""
    models = [r for r in workloads if " inference b1" in r["name"] and INT8_TAG not in r["name"]]
    if not models:
        return []
    ort = run.get("ort_peer") or {}
    peer = (f"ONNX Runtime {ort['version']} ({ort.get('package', '')} under node {ort.get('node', '?')}; "
            f"{ort.get('options', '')})" if ort else "ONNX Runtime: not run (" + run.get("ort_missing", "no node") + ")")
    out = ["", "### Real models (issue 9): smelt against ONNX Runtime and PyTorch", "",
           f"Peers: {peer}; PyTorch {(run.get('peer') or {}).get('version', '?')} eager, and TorchScript "
           "(torch.jit.trace + torch.jit.freeze, which folds batch norms). smelt interpreted: the "
           "imported graph on the IR interpreter (`smelt run`); smelt compiled: passes (batch norms "
           "folded), fusion, memory plan, generated kernels, plan replay (`smelt run --compile "
           "--backend cpp`). Models: tests/models/make_models.py large (random weights, batch-norm "
           "statistics from the network's activations), the same ONNX file for smelt and ONNX Runtime. "
           "Targets: compiled / ONNX Runtime at most 1.00 (time ratio) for every model of the zoo, and "
           f"their geometric mean at most {ZOO_GEOMEAN_TARGET:.2f} (issue 24); torch eager / compiled at "
           "least 2.00 for issue 9's models (the CNNs of the first rows, the squeeze-excitation networks "
           "and the LSTM tagger; — elsewhere). The list: bench/models.json.", "",
           "| model | smelt interpreted | smelt compiled | ONNX Runtime | torch eager | torch frozen | "
           "compiled / ORT (≤ 1) | torch eager / compiled (≥ 2) | verdict |",
           "|---|---|---|---|---|---|---:|---:|---|"]
    missed, ratios = [], []
    for r in models:
        ms = r["ms"]
        cells = [_cell(r, impl) for impl in ("smelt-eager", "smelt-compiled", "ort", "torch-eager", "torch-script")]
        vs_ort = ms["smelt-compiled"] / ms["ort"] if "smelt-compiled" in ms and "ort" in ms else None
        vs_torch = ms["torch-eager"] / ms["smelt-compiled"] if "smelt-compiled" in ms and "torch-eager" in ms else None
        torch_targeted = r["name"] in TORCH_TARGETED_MODELS
        if vs_ort is None:
            verdict = "—"
        else:
            ratios.append(vs_ort)
            misses = ([f"{vs_ort:.2f}x ONNX Runtime's time"] if vs_ort > 1.0 else []) + (
                [f"only {vs_torch:.2f}x faster than torch eager"]
                if torch_targeted and vs_torch is not None and vs_torch < 2.0 else [])
            verdict = "**met**" if not misses else "not met: " + ", ".join(misses)
        torch_cell = "—" if vs_torch is None else f"{vs_torch:.2f}x" + ("" if torch_targeted else " (no target)")
        out.append(f"| {_model_label(r['name'])} | {' | '.join(cells)} | "
                   f"{'—' if vs_ort is None else f'{vs_ort:.2f}'} | {torch_cell} | {verdict} |")
        if verdict not in ("—", "**met**") and r.get("profile"):
            missed.append(r)
    if ratios:
        geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        at_most = sum(1 for x in ratios if x <= 1.0)
        out += ["", f"Zoo: geometric mean of compiled / ONNX Runtime over {len(ratios)} models **{geomean:.2f}** "
                    f"(target ≤ {ZOO_GEOMEAN_TARGET:.2f}: {'met' if geomean <= ZOO_GEOMEAN_TARGET else 'not met'}); "
                    f"{at_most} of {len(ratios)} at most ONNX Runtime's time."]
    return out + holding_back(missed)


INT8_TAG = " INT8 QDQ"


def int8_section(workloads):
    """The INT8 QDQ files of the CNNs (issue 25's targets): smelt INT8 compiled at least 1.8x faster
    than smelt's own float compiled time, and at most ONNX Runtime's time on the same QDQ file."""
    by_name = {r["name"]: r for r in workloads}
    rows = [r for r in workloads if INT8_TAG in r["name"]]
    if not rows:
        return []
    out = ["", "### INT8 (issue 25): smelt's quantized CNNs against its float plan and ONNX Runtime", "",
           "The QDQ file `smelt quantize --format qdq` writes (entropy thresholds on 8 random-normal "
           "images; per-channel weights), run by smelt compiled (`fold_qdq` makes the integer ops) and "
           "by ONNX Runtime; the float rows are the same models' float files above. Targets: float / INT8 "
           "at least 1.80 (smelt's own speedup), INT8 / ORT INT8 at most 1.00.", "",
           "| model | smelt float compiled | smelt INT8 compiled | ONNX Runtime INT8 | ONNX Runtime float | "
           "float / INT8 (≥ 1.8) | INT8 / ORT INT8 (≤ 1) | verdict |",
           "|---|---|---|---|---|---:|---:|---|"]
    missed = []
    for r in rows:
        base = by_name.get(r["name"].replace(INT8_TAG, ""), {"ms": {}, "missing": {}, "errors": {}, "spread": {}})
        ms, float_ms = r["ms"], base["ms"]
        gain = float_ms["smelt-compiled"] / ms["smelt-compiled"] if "smelt-compiled" in ms and "smelt-compiled" in float_ms else None
        vs_ort = ms["smelt-compiled"] / ms["ort"] if "smelt-compiled" in ms and "ort" in ms else None
        if gain is None or vs_ort is None:
            verdict = "—"
        else:
            misses = ([f"only {gain:.2f}x faster than float"] if gain < 1.8 else []) + (
                [f"{vs_ort:.2f}x ONNX Runtime's time"] if vs_ort > 1.0 else [])
            verdict = "**met**" if not misses else "not met: " + ", ".join(misses)
        out.append(f"| {_model_label(r['name'].replace(INT8_TAG, ''))} | {_cell(base, 'smelt-compiled')} | "
                   f"{_cell(r, 'smelt-compiled')} | {_cell(r, 'ort')} | {_cell(base, 'ort')} | "
                   f"{'—' if gain is None else f'{gain:.2f}x'} | {'—' if vs_ort is None else f'{vs_ort:.2f}'} | {verdict} |")
        if verdict not in ("—", "**met**") and r.get("profile"):
            missed.append(r)
    return out + holding_back(missed)


# Kernels listed per model that misses its targets.
TOP_KERNELS = 6


def holding_back(models):
    """For each model that misses: its most expensive plan steps (the compiled plan's per-step
    profile), each with its share of the profiled time and its GFLOP/s as a fraction of the best
    sgemm rate of the run (the GEMM roofline)."""
    if not models:
        return []
    gemm = models[0].get("gemm_rate")
    out = ["", "Where a model misses, the plan steps that hold it back (per-step profile of the compiled "
           "plan over calls after the timed ones; share of the profiled time; GFLOP/s and its fraction of the "
           + (f"best sgemm rate of this run, {gemm / 1e6:.0f} GFLOP/s" if gemm else "sgemm rate (not measured)")
           + "; steps without flops: GB/s):", ""]
    for r in models:
        kernels = r["profile"]
        total = sum(k["ms"] for k in kernels)
        out += [f"{_model_label(r['name'])} ({total:.2f} ms profiled, {len(kernels)} steps):", "",
                "| step | ms | share | rate | of GEMM roofline |", "|---|---:|---:|---:|---:|"]
        for k in kernels[:TOP_KERNELS]:
            ms = k["ms"]
            if k["flops"] and ms > 0:
                rate = f"{k['flops'] / ms / 1e6:.1f} GFLOP/s"
                roof = f"{100 * k['flops'] / ms / gemm:.0f}%" if gemm else "—"
            else:
                rate = f"{k['bytes'] / ms / 1e6:.1f} GB/s" if ms > 0 else "—"
                roof = "—"
            name = k["name"].replace("|", "/")
            out.append(f"| {name} | {ms:.3f} | {100 * ms / total:.0f}% | {rate} | {roof} |")
        out.append("")
    return out



def _limit_rate(row):
    ms = row["ms"]["limit"]
    if row["flops"]:
        return f"{row['flops'] / ms / 1e6:.1f} GFLOP/s"
    return f"{row['bytes'] / ms / 1e6:.1f} GB/s"


def update_readme(path, markdown_text):
    text = path.read_text()
    block = f"{README_BEGIN}\n{markdown_text}{README_END}"
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


# ---- the chart: left, smelt's speedup over PyTorch eager (log scale); right, the fraction of the
# roofline that smelt and PyTorch reach.

LABEL_W, PANEL_W, GAP, ROW_H, TOP = 370, 300, 70, 30, 80
SMELT, TORCH, FASTER, SLOWER, COMPILED = "#3b6fb6", "#e08a2c", "#3a9a4a", "#c0392b", "#7b4fb0"


def svg(run, results):
    rows = [r for r in results["rows"] if "limit" not in r["impls"] and r["ms"]]
    width = LABEL_W + 2 * PANEL_W + GAP + 30
    height = TOP + ROW_H * max(1, len(rows)) + 50
    x1, x2 = LABEL_W, LABEL_W + PANEL_W + GAP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">smelt vs PyTorch and vs the '
        f'roofline — {escape(run["date"])}, {escape(run["cpu"])}, {run["threads"]} threads</text>',
        f'<text x="{x1}" y="45" font-weight="bold">speedup over PyTorch</text>',
        f'<text x="{x1}" y="62">torch-eager time / smelt-eager time, log scale</text>',
        f'<text x="{x2}" y="45" font-weight="bold">fraction of the roofline</text>',
        f'<text x="{x2}" y="62"><tspan fill="{SMELT}">■ smelt-eager</tspan>  '
        f'<tspan fill="{COMPILED}">■ smelt-compiled</tspan>  '
        f'<tspan fill="{TORCH}">■ torch-eager</tspan></text>',
    ]
    # speedup axis: log2 from 1/8x to 8x, 1x in the middle
    span = 3.0
    to_x = lambda s: x1 + PANEL_W / 2 * (1 + max(-span, min(span, math.log2(s))) / span)
    bottom = TOP + ROW_H * len(rows)
    for tick in (0.125, 0.25, 0.5, 1, 2, 4, 8):
        x = to_x(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP - 5}" x2="{x:.1f}" y2="{bottom}" '
                     f'stroke="{"#555" if tick == 1 else "#ddd"}"/>')
        label = f"{tick:g}x" if tick >= 1 else f"1/{1 / tick:g}x"
        parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{label}</text>')
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = x2 + PANEL_W * tick
        parts.append(f'<line x1="{x:.1f}" y1="{TOP - 5}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{100 * tick:.0f}%</text>')
    for i, r in enumerate(rows):
        y = TOP + ROW_H * i
        parts.append(f'<text x="{LABEL_W - 8}" y="{y + 16}" text-anchor="end">{escape(r["name"])}</text>')
        s = speedup(r)
        if s is None:
            why = NOT_YET if "smelt-eager" in r["missing"] else "no comparison"
            parts.append(f'<text x="{x1 + PANEL_W / 2 + 4}" y="{y + 16}" fill="#888">{why}</text>')
        else:
            a, b = sorted((to_x(1), to_x(s)))
            parts.append(f'<rect x="{a:.1f}" y="{y + 4}" width="{max(b - a, 1):.1f}" height="{ROW_H - 8}" '
                         f'fill="{FASTER if s >= 1 else SLOWER}"/>')
            # the value right of the bar (faster) or right of the 1x line (slower)
            parts.append(f'<text x="{(b if s >= 1 else to_x(1)) + 4:.1f}" y="{y + 16}">{s:.2f}x</text>')
        bars = (("smelt-eager", SMELT), ("smelt-compiled", COMPILED), ("torch-eager", TORCH))
        for k, (impl, color) in enumerate(bars):
            f = roofline_fraction(r, impl)
            if f is None:
                continue
            h = (ROW_H - 6) / 3
            yy = y + 4 + k * h
            parts.append(f'<rect x="{x2}" y="{yy:.1f}" width="{PANEL_W * min(f, 1.0):.1f}" '
                         f'height="{h:.1f}" fill="{color}"/>')
            parts.append(f'<text x="{x2 + PANEL_W * min(f, 1.0) + 3:.1f}" y="{yy + h - 1:.1f}" '
                         f'font-size="9">{100 * f:.0f}%</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
