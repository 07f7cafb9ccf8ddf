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
    if row["name"].startswith("dispatch:"):
        parts.append(f"{ms:.2f} µs/op")  # 1000 ops: ms per call = µs per op
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
        "Limits measured in the same run (best of all iterations): " + "; ".join(
            f"{r['name']} {_limit_rate(r)}" for r in limits) + "."
        + (f" The environment sets OPENBLAS_CORETYPE={run['openblas_coretype']} for both sides."
           if run.get("openblas_coretype") else ""),
        "",
        "Times are medians over all iterations of all rounds (±: half the interquartile range, "
        "shown when above 10% of the median). Speedup = PyTorch eager time / smelt eager time "
        "(above 1: smelt is faster). Roofline = the time the workload's bytes take at the triad "
        "bandwidth (DRAM, or L3 when they fit in half the last-level cache) or its flops at the "
        "best sgemm rate (GEMM), whichever is longer, as a fraction of the measured time. "
        "Bytes count one read of each input and one write of the output; the GELU chain is "
        "compute-bound (erf), so its DRAM fraction stays low.",
        "",
        "| workload | smelt-eager | torch-eager | torch-script | speedup vs torch-eager "
        "| smelt roofline | torch roofline |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in workloads:
        s = speedup(r)
        out.append(f"| {r['name']} | {_cell(r, 'smelt-eager')} | {_cell(r, 'torch-eager')} | "
                   f"{_cell(r, 'torch-script')} | {'—' if s is None else f'{s:.2f}x'} | "
                   f"{_pct(roofline_fraction(r, 'smelt-eager'), r)} | "
                   f"{_pct(roofline_fraction(r, 'torch-eager'), r)} |")
    memory = [r for r in workloads if r["training"]]
    if memory:
        out += ["", "Peak memory of the training steps: growth of the peak resident set (ru_maxrss) "
                "over the steps, above the peak after building the model and inputs, each in a "
                "fresh process; 0 means the steps never went above that earlier peak.", "",
                "| training step | smelt-eager | torch-eager | smelt / torch |", "|---|---:|---:|---:|"]
        for r in memory:
            mib = r["mib"]
            cells = []
            for impl in ("smelt-eager", "torch-eager"):
                if impl in mib:
                    cells.append(f"{mib[impl]:.1f} MiB")
                elif impl in r["missing"]:
                    cells.append(NOT_YET)
                else:
                    cells.append(r["errors"].get(impl + " memory", "—"))
            ratio = (f"{mib['smelt-eager'] / mib['torch-eager']:.2f}"
                     if "smelt-eager" in mib and mib.get("torch-eager") else "—")
            out.append(f"| {r['name']} | {cells[0]} | {cells[1]} | {ratio} |")
    if future:
        out += ["", "Workloads of the issue that smelt cannot run yet:", "",
                "| workload | status |", "|---|---|"]
        for r in future:
            reason = r["missing"].get("smelt-eager", "")
            out.append(f"| {r['name']} | {NOT_YET}: {reason} |")
    if not any("smelt-compiled" in r["ms"] for r in rows):
        out += ["", f"smelt-compiled: {NOT_YET} (no graph compiler entry point in this build)."]
    return "\n".join(out) + "\n"


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

LABEL_W, PANEL_W, GAP, ROW_H, TOP = 370, 300, 70, 24, 80
SMELT, TORCH, FASTER, SLOWER = "#3b6fb6", "#e08a2c", "#3a9a4a", "#c0392b"


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
        for k, (impl, color) in enumerate((("smelt-eager", SMELT), ("torch-eager", TORCH))):
            f = roofline_fraction(r, impl)
            if f is None:
                continue
            h = (ROW_H - 8) / 2
            yy = y + 4 + k * h
            parts.append(f'<rect x="{x2}" y="{yy:.1f}" width="{PANEL_W * min(f, 1.0):.1f}" '
                         f'height="{h:.1f}" fill="{color}"/>')
            parts.append(f'<text x="{x2 + PANEL_W * min(f, 1.0) + 3:.1f}" y="{yy + h - 1:.1f}" '
                         f'font-size="9">{100 * f:.0f}%</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
