"""The benchmark report: results.json rendered as one self-contained HTML page (tables and
matplotlib charts embedded as PNG data URIs: no external assets)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _charts(res: dict) -> list[tuple[str, str]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    ops = [r["op"] for r in rows]
    charts = []
    fig, ax = plt.subplots(figsize=(9, 3.2))
    w = 0.38
    xs = range(len(ops))
    ax.bar([x - w / 2 for x in xs], [r.get("speedup_eager") or 0 for r in rows], w,
           label="vs torch eager")
    ax.bar([x + w / 2 for x in xs], [r.get("speedup_compile") or 0 for r in rows], w,
           label="vs torch.compile")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs), ops, rotation=30, ha="right")
    ax.set_ylabel("speedup (x)")
    ax.legend()
    charts.append(("Speedup of kevolve's best schedule", _png(fig)))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for k, (key, lab) in enumerate((("eager_pct_floor", "torch eager"),
                                    ("compile_pct_floor", "torch.compile"),
                                    ("pct_floor", "kevolve"))):
        ax.bar([x + (k - 1) * 0.27 for x in xs], [r.get(key) or 0 for r in rows], 0.27,
               label=lab)
    ax.set_xticks(list(xs), ops, rotation=30, ha="right")
    ax.set_ylabel("% of roofline floor")
    ax.set_ylim(0, 110)
    ax.legend()
    charts.append(("Time as % of the roofline floor (higher is better)", _png(fig)))
    plt.close(fig)
    hist = {k: v for k, v in res.get("history", {}).items() if any(x for x in v)}
    if hist:
        fig, ax = plt.subplots(figsize=(9, 3.2))
        for op, series in hist.items():
            first = next(x for x in series if x)
            ax.plot(range(1, len(series) + 1), [first / x if x else None for x in series],
                    label=op)
        ax.set_xlabel("candidates evaluated")
        ax.set_ylabel("best so far (speedup over first)")
        ax.legend(fontsize=7)
        charts.append(("Search: best-so-far against candidates", _png(fig)))
        plt.close(fig)
    return charts


def number(x, p=3) -> str:
    """A table cell: `p` significant digits for a float, "-" for none."""
    return "-" if x is None else f"{x:.{p}g}" if isinstance(x, float) else str(x)


def _f(x, p=3) -> str:
    return html.escape(number(x, p))


def ratio(x) -> str:
    """A speedup or ratio to three decimals: 1.005 is not 1 where spreads are 0.6%."""
    return "-" if x is None else f"{x:.3f}"


def spreads(row: dict) -> str:
    """torch.compile's and kevolve's spreads over the rounds, in %: whether a difference
    between the two is larger than the run-to-run noise."""
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"
    return f"{pct(row.get('compile_spread'))} / {pct(row.get('kevolve_spread'))}"


def render_html(res: dict) -> str:
    def get(key):
        return lambda r: _f(r.get(key))

    def rat(key):
        return lambda r: ratio(r.get(key))
    cols = [("op", get("op")), ("floor ms", get("floor_ms")), ("eager ms", get("eager_ms")),
            ("compile ms", get("compile_ms")), ("kevolve ms", get("kevolve_ms")),
            ("x eager", rat("speedup_eager")), ("x compile", rat("speedup_compile")),
            ("spread compile / kevolve", spreads), ("% floor", get("pct_floor")),
            ("searched", get("searched")), ("within 5% at", get("within_5pct_at")),
            ("bare matmul / kevolve", rat("bare_over_kevolve")),
            ("verdict", get("kevolve_verdict"))]
    extra = sorted({k[:-3] for r in res["rows"] for k in r
                    if k.endswith("_ms") and not k.endswith("_rounds_ms")} -
                   {"floor", "eager", "compile", "kevolve", "bare_matmul"})
    cols += [(f"{b.replace('_', ' ')} ms", get(f"{b}_ms")) for b in extra]
    head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r)}</td>" for _, cell in cols) + "</tr>"
                   for r in res["rows"])
    try:
        charts = "".join(f"<h2>{html.escape(t)}</h2><img src='{src}'/>"
                         for t, src in _charts(res))
    except ImportError:
        charts = "<p>(matplotlib is not installed: no charts)</p>"
    c = res.get("ceilings", {})
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>kevolve bench: {html.escape(res['suite'])}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
</style></head><body>
<h1>kevolve bench --suite {html.escape(res['suite'])} --backend {html.escape(res['backend'])}</h1>
<p>{html.escape(res['hardware'])}, {html.escape(res.get('date', ''))}. Ceilings measured in
the same run: copy {_f(c.get('copy_bytes_per_s', 0) / 1e9)} GB/s, matmul
{_f(c.get('matmul_flops', 0) / 1e12)} TFLOP/s. {_protocol(res)} Geomean speedup over
torch.compile:
{ratio(res.get('geomean_speedup_compile'))}; over eager: {ratio(res.get('geomean_speedup_eager'))}.
Toolchain: {html.escape(json.dumps(res.get('toolchain', {})))}</p>
<table><tr>{head}</tr>{body}</table>{_rounds(res)}{charts}</body></html>"""


def _rounds(res: dict) -> str:
    """Each contestant's time in each round, in round order: which rounds moved, and
    whether all contestants moved together (a clock) or one alone."""
    n = res.get("rounds") or 0
    lines = []
    for r in res["rows"]:
        for key in sorted(k for k in r if k.endswith("_rounds_ms")):
            cells = "".join(f"<td>{_f(t, 4)}</td>" for t in r[key])
            who = key[:-len("_rounds_ms")].replace("_", " ")
            lines.append(f"<tr><td>{html.escape(r['op'])}</td><td>{html.escape(who)}</td>"
                         f"{cells}</tr>")
    if not lines:
        return ""
    head = "".join(f"<th>round {i + 1}</th>" for i in range(n))
    return (f"<h2>Each round's times (ms)</h2><table><tr><th>op</th><th>contestant</th>{head}"
            f"</tr>{''.join(lines)}</table>")


def _protocol(res: dict) -> str:
    if "rounds" not in res:  # results from before interleaved rounds
        return ("Times are medians after warm-up; each was taken twice and \"spread\" is "
                "their relative difference.")
    return (f"Each time is a median after warm-up, taken in {res['rounds']} interleaved "
            "rounds (eager, torch.compile, kevolve, ... in turn, in an order that changes "
            "from round to round so that each follows every other equally often): the "
            "table shows the median over rounds, and \"spread\" is (max - min) / median "
            "over them.")


def write(res: dict, out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rj = out / "results.json"
    rj.write_text(json.dumps(res, indent=1))
    rh = out / "report.html"
    rh.write_text(render_html(res))
    return rj, rh
