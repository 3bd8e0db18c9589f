"""The examples table: every operator of some spec files through the command line, as a user
runs it — `kevolve run` (the default schedule), `kevolve evolve --budget N` and `kevolve
export` — on one backend, with kevolve's time beside torch eager and torch.compile.

    python benchmarks/examples_table.py examples/*.py --backend cpu --budget 24 \\
        --db /tmp/examples.db --out benchmarks/results/2026-12-05-cpu-examples

writes OUT.json (one record per op, rewritten after each op, so a cut run keeps what it
finished and `--resume` continues it) and OUT.md (the table). Times are the search's best
kernel timed again beside the torch baselines in the same process (evolve's `paired_ms`),
so a speedup compares figures measured together. Each step is a separate `kevolve` process:
nothing here takes a path through kevolve that a user would not. `--jobs N` runs N ops at
once: their builds and checks overlap, while kevolve's machine-wide timing lock lets only one
process time at a time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


def spec_refs(files: list[str], only: set[str] | None = None) -> list[str]:
    """`file.py:NAME` for every operator each spec file binds, in file order."""
    from kevolve.ir.specfile import spec_names

    refs = []
    for f in files:
        for name in spec_names(f):
            if only is None or name in only or name.lower() in only:
                refs.append(f"{f}:{name}")
    return refs


def cli(args: list[str], timeout: float) -> tuple[int, dict | None, str]:
    """(exit code, the --json document or None, the last line of stderr)."""
    cmd = [sys.executable, "-m", "kevolve.cli", *args, "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, None, f"timed out after {timeout:.0f} s"
    doc = None
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        pass
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return p.returncode, doc, err[-1] if err else ""


def one(ref: str, a, export_dir: Path) -> dict:
    """The record of one operator: run, evolve, export."""
    shape = ["--shape", a.shape]
    threads = ["--threads", str(a.threads)] if a.threads else []
    rec: dict = {"ref": os.path.relpath(ref.rpartition(":")[0]) + ":" + ref.rpartition(":")[2],
                 "shape": a.shape}
    t0 = time.perf_counter()
    if a.no_run:
        rec.update(op=resolve_name(ref), run_verdict="not run", default_ms=None)
    else:
        rc, doc, err = cli(["run", ref, "--backend", a.backend, *shape, *threads], a.timeout)
        doc = doc or {}
        rec.update(op=doc.get("op"), run_verdict=doc.get("verdict") or f"error: {err}",
                   default_ms=doc.get("time_ms"), sizes=doc.get("shape"))
    rc, doc, err = cli(["evolve", ref, "--backend", a.backend, "--budget", str(a.budget),
                        "--db", a.db, "--seed", str(a.seed), *shape, *threads], a.timeout)
    doc = doc or {}
    ok = rc == 0 and doc.get("best_time_ms") is not None
    rec.update(evolve_verdict="ok" if ok else f"error: {doc.get('failures') or err}",
               evaluated=doc.get("evaluated"), failed=doc.get("failed"),
               stalled=doc.get("stalled"), hardware=doc.get("hardware"),
               best_ms=doc.get("best_time_ms"),
               kevolve_ms=doc.get("paired_ms") or doc.get("best_time_ms"),
               eager_ms=doc.get("baseline_ms"), compile_ms=doc.get("compile_ms"),
               compile_error=doc.get("compile_error"), speedup_eager=doc.get("speedup"),
               speedup_compile=doc.get("speedup_compile"), best_trace=doc.get("best_trace"))
    if ok:
        module = export_dir / f"{rec['op']}_{a.backend}.py"
        rc, doc, err = cli(["export", ref, "--backend", a.backend, "--db", a.db,
                            "-o", str(module)], a.timeout)
        rec["export"] = "ok" if rc == 0 and module.is_file() else f"error: {err}"
    else:
        rec["export"] = "skipped (no passing schedule)"
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    return rec


def resolve_name(ref: str) -> str:
    from kevolve.ops import resolve

    return resolve(ref).name


def combine(files: list[Path], out: Path) -> int:
    """One table from several (same backend and budget): their ops in the order given."""
    docs = [json.loads(f.read_text()) for f in files]
    doc = {**docs[0], "ops": [r for d in docs for r in d["ops"]],
           "command": " ; ".join(d["command"] for d in docs)}
    doc["combined"] = [str(f) for f in files]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(doc))
    return 0


def geomean(xs) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def markdown(doc: dict) -> str:
    def f(x, spec=".4g"):
        return "-" if x is None else format(x, spec)

    rows = doc["ops"]
    g_e = geomean(r.get("speedup_eager") for r in rows)
    g_c = geomean(r.get("speedup_compile") for r in rows)
    beat = [r for r in rows if (r.get("speedup_compile") or 0) > 1]
    # rows measured on different machines (a table resumed elsewhere) say which is whose
    mixed = len({r["hardware"] for r in rows if r.get("hardware")}) > 1
    hw_head, hw_rule = (" hardware |", " --- |") if mixed else ("", "")
    lines = [f"# Examples table: {doc['backend']}, evolve --budget {doc['budget']}", "",
             f"Command: `{doc['command']}`", "",
             *[f"Resumed (after removing the records to run again): `{c}`" for c in
               doc.get("resumed", [])], *([""] if doc.get("resumed") else []),
             f"Date {doc['date']}; hardware "
             f"{'per row (several machines)' if mixed else doc['hardware']}; torch {doc['torch']}; "
             f"Python {doc['python']}.", "",
             "kevolve ms: the best schedule of the search, timed again beside torch eager and "
             "torch.compile in one process. `run`: the default schedule's verdict at the same "
             "shape. Speedup = torch time / kevolve time (above 1: kevolve is faster).", "",
             f"{len(rows)} ops; evolve passed for "
             f"{sum(r['evolve_verdict'] == 'ok' for r in rows)}, export for "
             f"{sum(r['export'] == 'ok' for r in rows)}; faster than torch.compile: "
             f"{len(beat)}; geomean speedup vs eager {f(g_e, '.3g')}, "
             f"vs torch.compile {f(g_c, '.3g')}.", "",
             "| op | spec | run | evolve | default ms | kevolve ms | eager ms | compile ms "
             "| vs eager | vs compile | evaluated (failed) | export |" + hw_head,
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
             + hw_rule]
    for r in rows:
        lines.append(
            f"| {r.get('op') or '-'} | `{r['ref']}` | {r['run_verdict']} | "
            f"{r['evolve_verdict']} | {f(r.get('default_ms'))} | {f(r.get('kevolve_ms'))} | "
            f"{f(r.get('eager_ms'))} | {f(r.get('compile_ms'))} | "
            f"{f(r.get('speedup_eager'), '.3g')} | {f(r.get('speedup_compile'), '.3g')} | "
            f"{r.get('evaluated') or 0} ({r.get('failed') or 0}) | {r['export']} |"
            + (f" {r.get('hardware') or '-'} |" if hw_head else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="spec files (every operator each binds); with "
                   "--combine, OUT.json files of earlier runs")
    p.add_argument("--backend", "-b")
    p.add_argument("--budget", type=int, default=24)
    p.add_argument("--shape", default=None, help="preset (default: cpu, or gpu on a GPU "
                   "backend)")
    p.add_argument("--db", help="the archive the searches write")
    p.add_argument("--out", required=True, help="OUT.json and OUT.md are written")
    p.add_argument("--only", default=None, help="comma-separated op names to keep")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    p.add_argument("--resume", action="store_true", help="keep the ops OUT.json has (and "
                   "its command line); run the others")
    p.add_argument("--jobs", "-j", type=int, default=1, help="ops run at once (their "
                   "timings still take turns: kevolve's machine-wide timing lock)")
    p.add_argument("--stop-after", type=float, default=None, help="start no op after "
                   "this many seconds (those left are for --resume)")
    p.add_argument("--no-run", action="store_true", help="skip `kevolve run` (the default "
                   "schedule's check and time): evolve and export only")
    p.add_argument("--combine", action="store_true", help="write OUT from the tables FILES "
                   "(runs split over several commands, e.g. one spec file each)")
    a = p.parse_args(argv)
    if a.combine:
        return combine([Path(f) for f in a.files], Path(a.out))
    if not a.backend or not a.db:
        p.error("--backend and --db are required (unless --combine)")
    if a.shape is None:
        a.shape = "cpu" if a.backend in ("cpu", "numba", "mtia") else "gpu"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    export_dir = Path(a.db).resolve().parent / "exported"
    export_dir.mkdir(parents=True, exist_ok=True)
    only = {s.strip() for s in a.only.split(",")} if a.only else None
    refs = spec_refs(a.files, only)
    import torch

    doc = {"command": "python " + " ".join(map(shlex.quote, [sys.argv[0], *(argv or
                                                                          sys.argv[1:])])),
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "backend": a.backend, "budget": a.budget, "shape": a.shape,
           "hardware": None, "torch": torch.__version__,
           "python": platform.python_version(), "ops": []}
    js = out.with_suffix(".json")
    if a.resume and js.is_file():
        old = json.loads(js.read_text())
        doc["ops"], doc["command"] = old["ops"], old["command"]
        doc["resumed"] = old.get("resumed", []) + ["python " + " ".join(
            map(shlex.quote, [sys.argv[0], *(argv or sys.argv[1:])]))]
    done = {r["ref"] for r in doc["ops"]}
    todo = [ref for ref in refs
            if os.path.relpath(ref.rpartition(":")[0]) + ":" + ref.rpartition(":")[2]
            not in done]
    written = threading.Lock()

    def finished(rec: dict) -> None:
        with written:
            doc["ops"].append(rec)
            doc["hardware"] = doc["hardware"] or rec.get("hardware")
            print(f"{rec.get('op')}: run {rec['run_verdict']}, evolve "
                  f"{rec['evolve_verdict']}, vs compile {rec.get('speedup_compile')}, export "
                  f"{rec['export']} ({rec['seconds']} s)", file=sys.stderr, flush=True)
            js.write_text(json.dumps(doc, indent=1) + "\n")
            out.with_suffix(".md").write_text(markdown(doc))
    # Several ops at once: their compiles and checks overlap, their timings do not (every
    # kevolve process takes the machine's timing lock to time)
    start = time.monotonic()

    def job(ref: str) -> dict | None:
        if a.stop_after is not None and time.monotonic() - start > a.stop_after:
            return None  # left for --resume
        return one(ref, a, export_dir)
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for fut in as_completed([pool.submit(job, ref) for ref in todo]):
            if fut.result() is not None:
                finished(fut.result())
    order = {os.path.relpath(r.rpartition(":")[0]) + ":" + r.rpartition(":")[2]: n
             for n, r in enumerate(refs)}
    doc["ops"].sort(key=lambda r: order.get(r["ref"], len(order)))  # resumed: file order
    js.write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(doc))
    left = len(refs) - len(doc["ops"])
    if left:
        print(f"{left} ops not run (--stop-after): --resume runs them", file=sys.stderr)
    return 0 if not left and all(r["evolve_verdict"] == "ok" for r in doc["ops"]) else 1


if __name__ == "__main__":
    sys.exit(main())
