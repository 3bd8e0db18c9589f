"""`kevolve bench --suite ranking --backend triton`: kevolve beside torch, with a report."""

from __future__ import annotations

import json

import click

from ._common import Failed, console, echo, emit_json, progress, require_torch
from .archive import DB_HELP


def _save(partial: dict, out_dir: str) -> None:
    """Keep results.json current after each op (a killed run keeps its rows)."""
    import os

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(partial, f, indent=1)


def _line(row: dict) -> str:
    from ..bench import report

    return (f"{row['op']}: kevolve {report.number(row.get('kevolve_ms'))} ms "
            f"({row.get('kevolve_verdict', '-')}), eager {report.number(row.get('eager_ms'))} "
            f"ms, compile {report.number(row.get('compile_ms'))} ms, "
            f"{report.number(row.get('pct_floor'))}% of the floor")


@click.command("bench", short_help="Benchmark a suite beside torch eager and torch.compile.")
@click.option("--suite", type=click.Choice(["ranking", "cpu", "aten", "model", "search"]),
              default="ranking", show_default=True,
              help="aten: the ATen catalog's ops (--family, --ops, --share), each op's "
              "default schedule and a --budget search beside torch eager and torch.compile, "
              "with fast_1 and the ops that lose by cause. model: the end-to-end ranking "
              "models (--models-dir) in eager, torch.compile and with kevolve's ops swapped "
              "in. search: how fast each --proposers search comes within 5% of the best "
              "known on the cpu suite's ops, over --seeds seeds (no torch timings).")
@click.option("--backend", "-b", "backend_name", default=None,
              help="Default: triton for ranking, cpu for cpu and aten; for model, the "
              "device's (triton on a GPU, else cpu).")
@click.option("--budget", type=int, default=64, show_default=True,
              help="Candidates to evolve per op before timing (unless --from-archive).")
@click.option("--from-archive", is_flag=True, help="Time the archive's best; no search.")
@click.option("--top", type=click.IntRange(min=1), default=1, show_default=True,
              help="Time the archive's K fastest (distinct generated code) once each in "
              "this run, the 3 fastest of those again over --rounds interleaved rounds, "
              "and report the fastest there: archive times may come from older generated "
              "code, and one timing each favours the lucky.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Interleaved timing rounds (eager, torch.compile, kevolve, ... in turn, "
              "the order changing from round to round); times are medians over rounds, "
              "spreads (max - min) / median. --suite search: the rounds in which each op's "
              "runs' best schedules are timed again side by side.")
@click.option("--out", "out_dir", default="bench-out", show_default=True)
@click.option("--db", default=None, envvar="KEVOLVE_DB", metavar="PATH",
              type=click.Path(dir_okay=False, resolve_path=True), help=DB_HELP)
@click.option("--op-db", "op_dbs", multiple=True, metavar="OP=PATH",
              help="One op's archive, in place of --db for that op (repeatable): a search "
              "kept apart, such as one from scratch within a candidate limit.")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--threads", type=int, default=None)
@click.option("--ops", default="", help="Comma-separated ops to bench in place of the "
              "suite's: library names, spec files path/spec.py:name, installed ops; for "
              "--suite aten, catalog op names and families (aten.relu,softmax).")
@click.option("--family", default="", help="--suite aten: comma-separated catalog "
              "families (unary, reduction, softmax, ...), beside --ops.")
@click.option("--share", "share_spec", default=None, metavar="K/N",
              help="--suite aten: only every N-th selected op, starting at the K-th.")
@click.option("--models", default="dlrm,seq", show_default=True,
              help="--suite model: the models to run.")
@click.option("--models-dir", default=None, type=click.Path(file_okay=False),
              help="--suite model: the models' package (default: benchmarks/models of the "
              "working directory, else of the kevolve checkout).")
@click.option("--scale", type=click.IntRange(min=1), default=1, show_default=True,
              help="--suite model: divide the embedding tables' rows (CPU runs).")
@click.option("--batch", "batch_sizes", default="512,8192,4096", show_default=True,
              metavar="SERVE,LARGE,TRAIN", help="--suite model: the batch sizes of the "
              "serving and large inference scenarios and of the training step.")
@click.option("--iters", type=click.IntRange(min=1), default=10, show_default=True,
              help="--suite model: steps per timed round.")
@click.option("--also", default="", help="Other backends to time with default schedules.")
@click.option("--no-compile", is_flag=True, help="Skip torch.compile.")
@click.option("--report-from", metavar="RESULTS.json[,...]",
              help="Only write report.html from an existing results.json (--suite search: "
              "report.md from one or more, every run against one best known per op).")
@click.option("--proposers", default="heuristic", show_default=True,
              help="--suite search: comma-separated proposers to compare.")
@click.option("--seeds", type=click.IntRange(min=1), default=5, show_default=True,
              help="--suite search: seeds per op and proposer.")
@click.option("--transport", type=click.Choice(["anthropic", "openai", "command", "recorded"]),
              default=None, help="--suite search: the llm proposer's transport (see kevolve "
              "evolve --help), with --model, --base-url, --command or --transcripts.")
@click.option("--model", default=None, help="--suite search: the llm proposer's model.")
@click.option("--base-url", default=None, help="--suite search, --transport openai.")
@click.option("--command", "agent_command", default=None,
              help="--suite search, --transport command: the program.")
@click.option("--transcripts", default=None, type=click.Path(exists=True, dir_okay=False),
              help="--suite search, --transport recorded: the archive of a model's prompts.")
@click.option("--label", default="", help="--suite search: a tag for this bench's runs "
              "(`heuristic [TAG]`), to keep versions of a proposer apart in --report-from.")
@click.option("--no-dedup", is_flag=True, help="--suite search: charge candidates whose "
              "generated code was measured already to the budget (what searches did before "
              "dedup), to measure what dedup saves.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the results (results.json's content) on stdout; no progress. Exit 1 "
              "when a kevolve kernel failed.")
def command(suite, backend_name, budget, from_archive, top, rounds, out_dir, db, op_dbs,
            workers, threads, ops, family, share_spec, models, models_dir, scale,
            batch_sizes, iters, also, no_compile, report_from, proposers, seeds, transport,
            model, base_url, agent_command, transcripts, label, no_dedup, as_json) -> None:
    import os

    from ..bench import report

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see kevolve run
    if not report_from:
        require_torch("kevolve bench (it times torch eager and torch.compile)")
    for path in (report_from or "").split(",") if report_from else ():
        if not os.path.isfile(path):
            raise click.BadParameter(f"{path}: no such file", param_hint="--report-from")
    if suite == "search" and report_from:  # several results.json, one best known per op
        import shlex
        import sys

        from ..bench import search_quality
        res = search_quality.combine([json.loads(open(p).read())
                                      for p in report_from.split(",")],
                                     "kevolve " + shlex.join(sys.argv[1:]))
        search_quality.write(res, out_dir)
        if as_json:
            emit_json(res)
        else:
            echo(search_quality.markdown(res))
        return
    if report_from:  # several: one page, e.g. an aten or ranking run beside a model run
        try:
            res = report.combine([json.loads(open(p).read()) for p in report_from.split(",")])
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--report-from") from None
        _, rh = report.write(res, out_dir)
        if res.get("aten"):
            from ..bench import catalog
            (rh.parent / "report.md").write_text(catalog.markdown(res, res.get("command", "")))
        if as_json:
            emit_json({"report": str(rh.resolve())})
        else:
            echo(f"wrote {rh}")
        return
    if suite == "search":
        llm = {k: v for k, v in (("transport", transport), ("model", model),
                                 ("base_url", base_url), ("command", agent_command),
                                 ("transcripts", transcripts)) if v}
        _search(backend_name or "cpu", budget, ops, proposers, seeds, not no_dedup,
                threads if threads is not None else 1, out_dir, as_json, llm, label, rounds)
        return
    if suite == "model":
        _models(models, models_dir, scale, batch_sizes, rounds, iters, db, no_compile,
                threads, out_dir, as_json, backend_name)
        return
    from ..bench.runner import run_suite
    from ..bench.suites import BACKEND, SUITES

    backend_name = backend_name or BACKEND[suite]
    if suite == "aten":
        names = _catalog(family, ops, share_spec)
    else:  # any OP: a suite's name, a spec file or an installed op, through the resolver
        names = tuple(o for o in ops.split(",") if o) or SUITES[suite]
    per_op = {}
    for item in op_dbs:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise click.BadParameter(f"{item!r}: give OP=PATH, e.g. gemm_bias_gelu=fresh.db",
                                     param_hint="--op-db")
        if name not in names:
            raise click.BadParameter(f"{name!r} is not one of the ops benched "
                                     f"({', '.join(names)})", param_hint="--op-db")
        if not os.path.exists(path):
            raise click.BadParameter(f"{path}: no such archive (for {name})",
                                     param_hint="--op-db")
        per_op[name] = path
    from ..ops import resolve

    for o in names:
        resolve(o)
    prog = progress(as_json)
    task = prog.add_task(f"bench {names[0]}", total=len(names))
    quiet_bar = prog.disable

    def on_op(row: dict, partial: dict) -> None:
        _save(partial, out_dir)
        done = len(partial["rows"])
        nxt = f"bench {names[done]}" if done < len(names) else "bench"
        prog.update(task, advance=1, description=nxt)
        if quiet_bar and not as_json:  # piped: one line per op on stderr
            click.echo(f"[{done}/{len(names)}] {_line(row)}", err=True)
        elif not quiet_bar:
            prog.console.print(_line(row))
    with prog:
        res = run_suite(suite, backend_name, db=db, op_dbs=per_op, budget=budget,
                        from_archive=from_archive,
                        workers=workers, threads=threads, compile_=not no_compile,
                        also=tuple(a for a in also.split(",") if a),
                        ops=tuple(names), top=top, rounds=rounds, on_op=on_op)
    res["command"] = _command_line(f"bench --suite {suite}")
    rj, rh = report.write(res, out_dir)
    if suite == "aten":
        from ..bench import catalog
        (rj.parent / "report.md").write_text(catalog.markdown(res, res["command"]))
    failed = [r["op"] for r in res["rows"] if r.get("kevolve_verdict") != "ok"]
    if as_json:
        emit_json(res)
        _exit_on_failure(failed, rj)
        return
    from rich.table import Table

    t = Table(title=f"kevolve bench --suite {suite} --backend {backend_name} "
              f"({res['hardware']})")
    cols = ("op", "eager ms", "compile ms", "kevolve ms", "x eager", "x compile",
            "spread compile / kevolve", "% floor", "verdict")
    for c in cols:
        t.add_column(c)

    f = report.number
    for r in res["rows"]:
        t.add_row(r["op"], f(r.get("eager_ms")), f(r.get("compile_ms")),
                  f(r.get("kevolve_ms")), report.ratio(r.get("speedup_eager")),
                  report.ratio(r.get("speedup_compile")), report.spreads(r),
                  f(r.get("pct_floor")), r.get("kevolve_verdict", "-"))
    console().print(t)
    for r in res["rows"]:
        other = [c for c in r.get("contenders") or [r] if c.get("same_code", c.get(
            "kevolve_same_code")) is False]
        if other:
            echo(f"{r['op']}: {len(other)} of the archive's times were measured on other "
                 "generated code (another shape, kevolve, template or toolchain); `kevolve "
                 f"evolve {r['op']} --backend {backend_name} --budget 0 --refresh N` measures "
                 "the N fastest again")
    if suite == "aten":
        s = res["aten"]
        echo(f"fast_1 {report.share(s['fast_1'])} of {s['ops']} ops (default schedule "
             f"{report.share(s['fast_1_default'])}); correct {s['correct']}/{s['ops']}")
        for k, lost in s["losses"].items():
            echo(f"  {k}: {', '.join(o['op'] for o in lost)}")
    echo(f"geomean x compile {report.ratio(res.get('geomean_speedup_compile'))}, x eager "
         f"{report.ratio(res.get('geomean_speedup_eager'))}; wrote {rj} and {rh}")
    _exit_on_failure(failed, rj)


def _search(backend_name, budget, ops, proposers, seeds, dedup, threads, out_dir,
            as_json, llm: dict, label: str = "", rounds: int = 3) -> None:
    """`--suite search`: kevolve.bench.search_quality over the cpu suite's ops."""
    import shlex
    import sys

    from ..bench import search_quality
    from ..bench.suites import SUITES
    from ..ops import resolve

    names = tuple(o for o in ops.split(",") if o) or SUITES["cpu"]
    for o in names:
        resolve(o)
    props = tuple(p for p in proposers.split(",") if p)
    from ..search.proposers import make, proposer_class
    for p in props:  # an unknown proposer, or an llm without its settings: exit 2 now
        proposer_class(p)
        if p == "llm":
            make(p, **llm)

    def on_run(r):
        if not as_json:
            click.echo(f"{r['op']} {r['proposer']} seed {r['seed']}: best "
                       f"{r['best_ms']} ms, {r['evaluated']} evaluated, {r['reused']} "
                       f"duplicates, {r['seconds']} s", err=True)
    cmd = "kevolve " + shlex.join(sys.argv[1:])
    res = search_quality.run(names, props, seeds, budget, backend_name, threads, dedup,
                             proposer_options={"llm": llm}, out_dir=out_dir, command=cmd,
                             on_run=on_run, label=label, retime_rounds=rounds)
    if as_json:
        emit_json(res)
        return
    echo(search_quality.markdown(res))
    echo(f"wrote {out_dir}/results.json, report.md and curves.png")


def _exit_on_failure(failed: list[str], results) -> None:
    if failed:
        raise Failed(f"kevolve's kernel failed for {', '.join(failed)} (verdicts and messages "
                     f"in {results})")


def _command_line(fallback: str) -> str:
    """The command as typed (what a results file records), or `kevolve FALLBACK` where the
    process was not started as kevolve (a test's runner)."""
    import shlex
    import sys

    if sys.argv[0].endswith(("kevolve", "cli.py", "__main__.py")):
        return "kevolve " + shlex.join(sys.argv[1:])
    return f"kevolve {fallback}"


def _catalog(family: str, ops: str, share_spec: str | None) -> tuple[str, ...]:
    """The aten suite's ops: --family and --ops through the catalog's selection (all when
    both are empty), then the --share slice, as `kevolve conform` selects them."""
    from ..evaluate.conform import share
    from ..ops import aten

    sel = ",".join(p for p in (family, ops) if p) or "all"
    try:
        names = share(aten.select(sel), share_spec)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--share") from None
    if not names:
        raise click.BadParameter(f"{sel!r} selects no op", param_hint="--family/--ops")
    return tuple(n if ":" in n else "aten." + n for n in names)


def _models(models, models_dir, scale, batch_sizes, rounds, iters, db, no_compile, threads,
            out_dir, as_json, backend_name=None) -> None:
    """`--suite model`: kevolve.bench.models over the reference models' package, with
    kevolve.torch.accelerate as the kevolve modes' swap."""
    import os

    from ..bench import models as e2e
    from ..bench import report

    try:
        sizes = [int(x) for x in batch_sizes.split(",")]
        if len(sizes) != 3 or min(sizes) < 1:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"{batch_sizes!r}: give three positive batch sizes, "
                                 "SERVE,LARGE,TRAIN", param_hint="--batch") from None
    zoo = e2e.load_zoo(models_dir)
    names = [m for m in models.split(",") if m]
    unknown = [m for m in names if m not in zoo.MODELS]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or models!r}: the models are "
                                 f"{', '.join(zoo.MODELS)}", param_hint="--models")
    if threads:
        import torch
        torch.set_num_threads(threads)
    from ..torch import accelerate

    modes = ("eager",) + (() if no_compile else ("compile",)) + ("kevolve",) + \
        (() if no_compile else ("kevolve-compile",))
    settings = e2e.Settings(models=tuple(names), modes=modes, archive=db,
                            backend=backend_name, scale=scale,
                            serve_batch=sizes[0], large_batch=sizes[1], train_batch=sizes[2],
                            rounds=rounds, iters=iters)
    say = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
    res = e2e.run(zoo, settings, accelerate, _command_line("bench --suite model"), say)
    os.makedirs(out_dir, exist_ok=True)
    rj, rh = report.write(res, out_dir)
    (rj.parent / "report.md").write_text(e2e.markdown(res))
    if as_json:
        emit_json(res)
    else:
        echo(e2e.markdown(res, details=False))
        echo(f"wrote {rj} and {rh}")
    bad = [f"{name} {mode}" for name, r in res["models"].items()
           for mode, c in r["checks"].items() if not c["ok"]]
    if bad:
        raise Failed(f"outputs or gradients differ from eager: {', '.join(bad)} "
                     f"(see {rj})")
