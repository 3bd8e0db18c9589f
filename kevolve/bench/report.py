"""The benchmark report: results.json rendered as one self-contained HTML page through the
Jinja2 template templates/report/report.html.j2 (autoescaped: op names and messages are
data, never markup), with matplotlib charts embedded as PNG data URIs (no external assets),
each with alt text that states what it shows.

Charts: the times beside the roofline floor, the speedups, the time as a % of the floor, a
roofline per backend (each kernel placed by arithmetic intensity and achieved FLOP/s under
the ceilings measured in the same run) and the search's best-so-far. An axis is
logarithmic where its data spans a decade or more. An aten run adds its summary (fast_1,
geomeans, the ops that lose by cause); a model run's end-to-end figures (samples/s per
scenario and mode, ratios over torch.compile) show beside the per-op ones when both are
given (`combine`)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

TEMPLATE = "report/report.html.j2"
CONTESTANTS = (("eager", "torch eager"), ("compile", "torch.compile"), ("kevolve", "kevolve"))


def number(x, p=3) -> str:
    """A table cell: `p` significant digits for a float, "-" for none."""
    return "-" if x is None else f"{x:.{p}g}" if isinstance(x, float) else str(x)


def plain(x: float) -> str:
    """A rate for people: 4,275 rather than 4.27e+03."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def ratio(x) -> str:
    """A speedup or ratio to three decimals: 1.005 is not 1 where spreads are 0.6%."""
    return "-" if x is None else f"{x:.3f}"


def share(x) -> str:
    """A fraction as a whole percentage."""
    return "-" if x is None else f"{100 * x:.0f}%"


def spreads(row: dict) -> str:
    """torch.compile's and kevolve's spreads over the rounds, in %: whether a difference
    between the two is larger than the run-to-run noise."""
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"
    return f"{pct(row.get('compile_spread'))} / {pct(row.get('kevolve_spread'))}"


def extra_times(res: dict) -> list[str]:
    """Other `<name>_ms` columns: backends timed beside the suite's own (`--also`) and
    kevolve's archived time."""
    return sorted({k[:-3] for r in res["rows"] for k in r
                   if k.endswith("_ms") and not k.endswith("_rounds_ms")} -
                  {"floor", "eager", "compile", "kevolve", "bare_matmul"})


def other_backends(res: dict) -> list[str]:
    """Backends timed with their default schedules beside the suite's own (`--also`):
    those with a verdict of their own."""
    return [b for b in extra_times(res) if any(f"{b}_verdict" in r for r in res["rows"])]


# -- tables ----------------------------------------------------------------------------

def _columns(res: dict) -> list[tuple[str, object]]:
    def get(key):
        return lambda r: number(r.get(key))

    def rat(key):
        return lambda r: ratio(r.get(key))
    cols = [("op", get("op")), ("floor ms", get("floor_ms")), ("eager ms", get("eager_ms")),
            ("compile ms", get("compile_ms")), ("kevolve ms", get("kevolve_ms")),
            ("x eager", rat("speedup_eager")), ("x compile", rat("speedup_compile")),
            ("spread compile / kevolve", spreads), ("% floor", get("pct_floor")),
            ("searched", get("searched")), ("within 5% at", get("within_5pct_at")),
            ("bare matmul / kevolve", rat("bare_over_kevolve")),
            ("verdict", get("kevolve_verdict"))]
    cols += [(f"{b.replace('_', ' ')} ms", get(f"{b}_ms")) for b in extra_times(res)]
    if any("cause" in r for r in res["rows"]):  # an aten run: family, and why an op loses
        cols[1:1] = [("family", get("family"))]
        cols += [("default x compile", rat("default_speedup_compile")),
                 ("strategies", lambda r: ",".join(r.get("strategies") or []) or "-"),
                 ("cause", lambda r: r.get("cause") or "-")]
    return cols


def _rounds(res: dict) -> list[list[str]]:
    """Each contestant's time in each round, in round order: which rounds moved, and
    whether all contestants moved together (a clock) or one alone."""
    return [[r["op"], key[:-len("_rounds_ms")].replace("_", " ")] +
            [number(t, 4) for t in r[key]]
            for r in res.get("rows", ())
            for key in sorted(k for k in r if k.endswith("_rounds_ms"))]


def _protocol(res: dict) -> str:
    if "rounds" not in res:  # results from before interleaved rounds
        return ("Times are medians after warm-up; each was taken twice and \"spread\" is "
                "their relative difference.")
    return (f"Each time is a median after warm-up, taken in {res['rounds']} interleaved "
            "rounds (eager, torch.compile, kevolve, ... in turn, in an order that changes "
            "from round to round so that each follows every other equally often): the "
            "table shows the median over rounds, and \"spread\" is (max - min) / median "
            "over them.")


def _messages(res: dict) -> list[tuple[str, str, str]]:
    """(op, contestant, message) for every contestant that failed."""
    out = []
    for r in res.get("rows", ()):
        for key in [k for k in r if k.endswith("_verdict")]:
            who = key[:-len("_verdict")]
            if r[key] != "ok":
                out.append((r["op"], who, f"{r[key]}: {r.get(f'{who}_message') or ''}"))
        if r.get("compile_error"):
            out.append((r["op"], "torch.compile", r["compile_error"]))
        if r.get("search_error"):
            out.append((r["op"], "search", r["search_error"]))
    return out


# -- charts ----------------------------------------------------------------------------

def spans_decades(values) -> bool:
    """Do the positive values span a factor of 10 or more (then a log axis reads better)?"""
    v = [x for x in values if x and x > 0]
    return len(v) > 1 and max(v) / min(v) >= 10


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _listing(pairs) -> str:
    return "; ".join(f"{op} {v}" for op, v in pairs)


def _times_chart(plt, res):
    rows = res["rows"]
    ops = [r["op"] for r in rows]
    series = [("floor", "roofline floor")] + list(CONTESTANTS)
    fig, ax = plt.subplots(figsize=(9, 3.4))
    w = 0.8 / len(series)
    for k, (key, label) in enumerate(series):
        ax.bar([x + (k - (len(series) - 1) / 2) * w for x in range(len(ops))],
               [r.get(f"{key}_ms") or 0 for r in rows], w, label=label)
    values = [r.get(f"{key}_ms") for r in rows for key, _ in series]
    log = spans_decades(values)
    if log:
        ax.set_yscale("log")
    ax.set_xticks(list(range(len(ops))), ops, rotation=30, ha="right")
    ax.set_ylabel("median time (ms)" + (", log scale" if log else ""))
    ax.legend(fontsize=8)
    alt = ("Bar chart of median times in milliseconds per op, " +
           ("on a logarithmic axis, " if log else "") + "for the roofline floor, torch "
           "eager, torch.compile and kevolve: " + _listing(
               (r["op"], f"kevolve {number(r.get('kevolve_ms'))} ms, eager "
                         f"{number(r.get('eager_ms'))} ms, floor {number(r.get('floor_ms'))} ms")
               for r in rows) + ".")
    return "Median times beside the roofline floor (lower is better)", alt, fig


def _speedup_chart(plt, res):
    rows = res["rows"]
    ops = [r["op"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 3.2))
    w = 0.38
    xs = range(len(ops))
    eager = [r.get("speedup_eager") for r in rows]
    comp = [r.get("speedup_compile") for r in rows]
    ax.bar([x - w / 2 for x in xs], [v or 0 for v in eager], w, label="vs torch eager")
    ax.bar([x + w / 2 for x in xs], [v or 0 for v in comp], w, label="vs torch.compile")
    log = spans_decades(eager + comp + [1.0])
    if log:
        ax.set_yscale("log")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs), ops, rotation=30, ha="right")
    ax.set_ylabel("speedup (x)" + (", log scale" if log else ""))
    ax.legend(fontsize=8)
    alt = ("Bar chart of kevolve's speedup per op over torch eager and over torch.compile "
           "(above the line at 1 kevolve is faster): " + _listing(
               (r["op"], f"{ratio(r.get('speedup_eager'))}x eager, "
                         f"{ratio(r.get('speedup_compile'))}x compile") for r in rows) + ".")
    return "Speedup of kevolve's best schedule", alt, fig


def _floor_chart(plt, res):
    rows = res["rows"]
    ops = [r["op"] for r in rows]
    xs = range(len(ops))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    keys = (("eager_pct_floor", "torch eager"), ("compile_pct_floor", "torch.compile"),
            ("pct_floor", "kevolve"))
    for k, (key, lab) in enumerate(keys):
        ax.bar([x + (k - 1) * 0.27 for x in xs], [r.get(key) or 0 for r in rows], 0.27,
               label=lab)
    top = max([110.0] + [r.get(key) or 0 for r in rows for key, _ in keys])
    ax.axhline(100.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(list(xs), ops, rotation=30, ha="right")
    ax.set_ylabel("% of roofline floor")
    ax.set_ylim(0, top * 1.05)
    ax.legend(fontsize=8)
    alt = ("Bar chart of each contender's time as a percentage of the roofline floor "
           "(100% is the hardware's limit at the measured ceilings): " + _listing(
               (r["op"], f"kevolve {number(r.get('pct_floor'))}%, eager "
                         f"{number(r.get('eager_pct_floor'))}%") for r in rows) + ".")
    return "Time as % of the roofline floor (higher is better)", alt, fig


def roofline_points(res: dict, key: str) -> list[tuple[str, float, float]]:
    """(op, arithmetic intensity in FLOP/byte, achieved FLOP/s) of contestant `key` (e.g.
    kevolve, eager, cuda) for each op with floor bytes, floor FLOPs and a time."""
    out = []
    for r in res["rows"]:
        b, f, ms = r.get("floor_bytes"), r.get("floor_flops"), r.get(f"{key}_ms")
        if b and f and ms:
            out.append((r["op"], f / b, f / (ms * 1e-3)))
    return out


def _roofline_chart(plt, res, backend: str, key: str):
    c = res.get("ceilings") or {}
    bw, peak = c.get("copy_bytes_per_s"), c.get("matmul_flops")
    pts = roofline_points(res, key)
    if not pts or not bw or not peak:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    xs = [p[1] for p in pts]
    lo, hi = min(xs + [peak / bw]) / 4, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(bw * x, peak) for x in grid], color="k", lw=1.2,
            label=f"roof: {bw / 1e9:.4g} GB/s copy, {peak / 1e12:.4g} TFLOP/s matmul")
    ax.scatter(xs, [p[2] for p in pts], zorder=3,
               label=f"kevolve's best ({backend})" if key == "kevolve"
               else f"{backend}, default schedule")
    if key == "kevolve":
        eager = roofline_points(res, "eager")
        if eager:
            ax.scatter([p[1] for p in eager], [p[2] for p in eager], marker="x",
                       color="grey", zorder=2, label="torch eager")
    for op, x, y in pts:
        ax.annotate(op, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (floor FLOP / floor byte), log scale")
    ax.set_ylabel("achieved FLOP/s, log scale")
    ax.legend(fontsize=7, loc="lower right")
    skipped = [r["op"] for r in res["rows"] if r["op"] not in {p[0] for p in pts}]
    alt = (f"Roofline of the {backend} backend on {res.get('hardware', '?')}, both axes "
           f"logarithmic: the roof rises with memory bandwidth {bw / 1e9:.4g} GB/s and "
           f"flattens at {peak / 1e12:.4g} TFLOP/s; each op's kernel is placed by "
           "arithmetic intensity and achieved FLOP/s: " + _listing(
               (op, f"{x:.3g} FLOP/byte at {y / 1e9:.4g} GFLOP/s, "
                    f"{100 * y / min(bw * x, peak):.0f}% of the roof") for op, x, y in pts)
           + "." + (f" Not placed (no FLOPs or no time): {', '.join(skipped)}."
                    if skipped else ""))
    return f"Roofline: {backend}", alt, fig


def _history_chart(plt, res):
    hist = {k: v for k, v in res.get("history", {}).items() if any(x for x in v)}
    if not hist:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.2))
    gains = []
    for op, series in hist.items():
        first = next(x for x in series if x)
        ys = [first / x if x else None for x in series]
        gains += [y for y in ys if y]
        ax.plot(range(1, len(series) + 1), ys, label=op)
    longest = max(len(s) for s in hist.values())
    if longest >= 10:
        ax.set_xscale("log")
    if spans_decades(gains + [1.0]):
        ax.set_yscale("log")
    ax.set_xlabel("candidates evaluated" + (", log scale" if longest >= 10 else ""))
    ax.set_ylabel("best so far (speedup over first)")
    ax.legend(fontsize=7)
    alt = ("Line chart of the search: for each op, the best time so far as a speedup over "
           "the first correct candidate, against the number of candidates evaluated: " +
           _listing((op, f"{len(s)} candidates, final {_gain(s):.3g}x")
                    for op, s in hist.items()) + ".")
    return "Search: best-so-far against candidates", alt, fig


def _gain(series: list) -> float:
    known = [x for x in series if x]
    return known[0] / min(known)


def _models_chart(plt, res):
    """Each model's samples/s per scenario and mode over torch.compile's."""
    bars = [(f"{name} {sc}", {m: v / sr["samples_per_s"]["compile"]
                              for m, v in sr["samples_per_s"].items()})
            for name, r in res.get("models", {}).items() for sc, sr in r["scenarios"].items()
            if sr["samples_per_s"].get("compile")]
    if not bars:
        return None
    modes = [m for m in dict.fromkeys(m for _, oc in bars for m in oc)]
    fig, ax = plt.subplots(figsize=(9, 3.2))
    w = 0.8 / len(modes)
    for k, m in enumerate(modes):
        ax.bar([x + (k - (len(modes) - 1) / 2) * w for x in range(len(bars))],
               [oc.get(m) or 0 for _, oc in bars], w, label=m)
    values = [v for _, oc in bars for v in oc.values()]
    log = spans_decades(values + [1.0])
    if log:
        ax.set_yscale("log")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(range(len(bars))), [b for b, _ in bars], rotation=30, ha="right")
    ax.set_ylabel("samples/s over torch.compile" + (", log scale" if log else ""))
    ax.legend(fontsize=8)
    alt = ("Bar chart of each model's throughput per scenario and mode as a multiple of "
           "torch.compile's (above the line at 1 the mode is faster): " + _listing(
               (b, ", ".join(f"{m} {ratio(v)}x" for m, v in oc.items())) for b, oc in bars)
           + ".")
    return "End to end: samples/s over torch.compile", alt, fig


def charts(res: dict) -> list[dict]:
    """[{title, alt, src}] for the report; matplotlib is imported here, with Agg."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    if res.get("rows"):
        made += [_times_chart(plt, res), _speedup_chart(plt, res), _floor_chart(plt, res),
                 _roofline_chart(plt, res, res["backend"], "kevolve")]
        made += [_roofline_chart(plt, res, b, b) for b in other_backends(res)]
        made.append(_history_chart(plt, res))
    made.append(_models_chart(plt, res))
    out = []
    for m in made:
        if m is None:
            continue
        title, alt, fig = m
        out.append({"title": title, "alt": alt, "src": _png(fig)})
        plt.close(fig)
    return out


# -- the page --------------------------------------------------------------------------

def _environment():
    import jinja2

    from ..assets import templates_dir

    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir()),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def _aten(res: dict) -> dict | None:
    """The aten summary as the page shows it."""
    s = res.get("aten")
    if not s:
        return None
    losses = [(cause, [(o["op"], ratio(o.get("speedup_compile")),
                        number(o.get("pct_floor")), ",".join(o.get("strategies") or []),
                        (o.get("message") or "")[:300]) for o in ops])
              for cause, ops in s["losses"].items()]
    fams = [(f, v["ops"], share(v["fast_1"]), ratio(v["geomean_speedup_compile"]))
            for f, v in s["families"].items()]
    return {"ops": s["ops"], "correct": s["correct"], "timed": s["timed_vs_compile"],
            "fast_1": share(s["fast_1"]), "fast_1_default": share(s["fast_1_default"]),
            "geomean_compile": ratio(s["geomean_speedup_compile"]),
            "geomean_default": ratio(s["geomean_default_speedup_compile"]),
            "geomean_eager": ratio(s["geomean_speedup_eager"]),
            "budget": res.get("budget"), "families": fams, "losses": losses}


def _models(res: dict) -> list[dict]:
    """Each model's end-to-end table: samples/s per scenario (rows) and mode (columns),
    with the ratio over torch.compile; and its checks against eager."""
    from .models import modes_of

    out = []
    for name, r in (res.get("models") or {}).items():
        modes = modes_of(r)
        rows = []
        for sc, sr in r["scenarios"].items():
            base = sr["samples_per_s"].get("compile")
            cells = []
            for m in modes:
                v = sr["samples_per_s"].get(m)
                cells.append("-" if v is None else plain(v) +
                             (f" ({ratio(v / base)}x)" if base else ""))
            rows.append([sc, str(sr["batch"])] + cells)
        checks = [f"{m}: output {c['output_rel_err']:.1e}" +
                  (f", worst gradient {c['grad_rel_err']:.1e} ({c['worst_grad']})"
                   if "grad_rel_err" in c else "") + ("" if c["ok"] else ", FAILED")
                  for m, c in r["checks"].items()]
        out.append({"name": name, "params_m": f"{r['params_m']:.1f}", "modes": modes,
                    "rows": rows, "checks": checks,
                    "swaps": ", ".join(f"{s['path']} ({s['op']})" for s in r["swaps"])})
    return out


def combine(results: list[dict]) -> dict:
    """One page's results from several files: at most one per-op run (ranking, cpu, aten)
    and at most one model run, whose end-to-end figures show beside the per-op ones."""
    ops = [r for r in results if "models" not in r]
    models = [r for r in results if "models" in r]
    if len(ops) > 1 or len(models) > 1:
        raise ValueError("give at most one per-op results file and one model results file")
    if not ops:
        return models[0]
    out = dict(ops[0])
    if models:
        m = models[0]
        out["models"] = m["models"]
        out["model_run"] = {k: m.get(k) for k in ("command", "device_name", "rounds",
                                                  "iters", "torch", "started")}
    return out


def render_html(res: dict, with_charts: bool = True) -> str:
    cols = _columns(res) if res.get("rows") else []
    try:
        figs = charts(res) if with_charts else []
        charts_note = ""
    except ImportError:
        figs = []
        charts_note = ("matplotlib is not installed, so this report has no charts: "
                       "pip install 'kevolve[report]'")
    c = res.get("ceilings", {})
    n_rounds = res.get("rounds") or 0
    run = res.get("model_run") or (res if res.get("models") else {})
    return _environment().get_template(TEMPLATE).render(
        suite=res["suite"], backend=res.get("backend", "-"),
        hardware=res.get("hardware") or res.get("device_name", "-"),
        has_rows=bool(res.get("rows")), aten=_aten(res), models=_models(res),
        model_run={"command": run.get("command"), "rounds": run.get("rounds"),
                   "iters": run.get("iters"), "device": run.get("device_name")},
        date=res.get("date", ""),
        copy_gbs=plain(c.get("copy_bytes_per_s", 0) / 1e9),
        matmul_tflops=plain(c.get("matmul_flops", 0) / 1e12),
        copy_threads=c.get("copy_threads"),
        protocol=_protocol(res),
        geomean_compile=ratio(res.get("geomean_speedup_compile")),
        geomean_eager=ratio(res.get("geomean_speedup_eager")),
        toolchain=json.dumps(res.get("toolchain", {})),
        headers=[h for h, _ in cols],
        rows=[[cell(r) for _, cell in cols] for r in res.get("rows", ())],
        rounds_header=[f"round {i + 1}" for i in range(n_rounds)],
        rounds=_rounds(res), messages=_messages(res),
        charts=figs, charts_note=charts_note)


def write(res: dict, out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rj = out / "results.json"
    rj.write_text(json.dumps(res, indent=1))
    rh = out / "report.html"
    rh.write_text(render_html(res))
    return rj, rh

