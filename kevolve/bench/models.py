"""The end-to-end model benchmark (`kevolve bench --suite model`): reference models in eager
PyTorch, torch.compile (default; max-autotune and reduce-overhead, which replays CUDA graphs,
when asked) and with kevolve's ops swapped in (run eagerly, under torch.compile, and under
reduce-overhead when asked), in one process.

1. Checks first: every mode's outputs against eager on one batch, and for the kevolve modes
   every parameter's gradient after a backward pass (fp32; relative to the gradient's
   largest magnitude, or 1e-5 of the model's largest gradient if that is larger). A failed
   check is recorded and that mode is not timed.
2. Then samples/s for inference at a serving batch and a large batch and for a training
   step (forward, backward, SGD): each round times `iters` steps of every mode, the modes in
   the bench's interleaved orders (kevolve.evaluate.timing), medians over rounds reported.
   Batches rotate among a few generated ones (jagged lengths differ batch to batch).
3. Optionally a profiler breakdown (top kernels by device time per step).

The models live outside the package (benchmarks/models in the repository): a *zoo* is a
Python package with `MODELS` (names), `MODULES` (module class name -> kevolve op) and
`build(name, scale, device) -> (config, model, bounds, batch generator)`, loaded from its
directory by `load_zoo`. The swap itself (kevolve.torch.accelerate, a layer above this one)
is handed in by the caller."""

from __future__ import annotations

import copy
import importlib.util
import os
import platform
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ALL_MODES = ("eager", "compile", "max-autotune", "reduce-overhead", "kevolve",
             "kevolve-compile", "kevolve-reduce-overhead")
ZOO = Path("benchmarks") / "models"


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] = ("dlrm", "seq")
    modes: tuple[str, ...] = ("eager", "compile", "kevolve", "kevolve-compile")
    archive: str | None = None  # kevolve archive (default schedules without one)
    backend: str | None = None  # the kevolve modes' backend (default: the device's)
    device: str | None = None  # default: cuda where there is one
    scale: int = 1
    serve_batch: int = 512
    large_batch: int = 8192
    train_batch: int = 4096
    batches: int = 3
    rounds: int = 5
    iters: int = 10
    tol: float = 1e-3
    profile: bool = False


def load_zoo(path: str | os.PathLike | None = None):
    """The models' package at `path` (default: benchmarks/models under the working
    directory, else under the checkout kevolve runs from), imported as a package of its own
    so that its relative imports work. A missing one is a SetupError that says where it
    looked."""
    from ..errors import SetupError

    tried = [Path(path)] if path else [Path.cwd() / ZOO,
                                       Path(__file__).resolve().parents[2] / ZOO]
    for d in tried:
        if (d / "zoo.py").is_file():
            name = f"_kevolve_zoo_{zlib.crc32(str(d.resolve()).encode()):08x}"
            if name not in sys.modules:
                spec = importlib.util.spec_from_file_location(
                    name, d / "__init__.py", submodule_search_locations=[str(d)])
                pkg = importlib.util.module_from_spec(spec)
                sys.modules[name] = pkg
                spec.loader.exec_module(pkg)
            return importlib.import_module(f"{name}.zoo")
    raise SetupError(f"no reference models at {' or '.join(map(str, tried))} (a package "
                     "with zoo.py: MODELS, MODULES, build); give --models-dir, e.g. the "
                     "benchmarks/models folder of a kevolve checkout")


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def batches(gen, cfg, size: int, n: int, seed: int, device, dynamic: bool) -> list:
    import torch

    out = []
    for k in range(n):
        b = gen(cfg, size, seed + k, device)
        if dynamic:  # jagged totals and batch sizes vary: one compiled graph serves all
            for t in b.args():
                for x in (t if isinstance(t, list) else [t]):
                    torch._dynamo.maybe_mark_dynamic(x, 0)
            torch._dynamo.maybe_mark_dynamic(b.labels, 0)
        out.append(b)
    return out


def infer(model, b):
    import torch

    with torch.no_grad():
        return model(*b.args())


def train_step(model, opt, b):
    import torch.nn.functional as F

    opt.zero_grad(set_to_none=True)
    loss = F.binary_cross_entropy_with_logits(model(*b.args()), b.labels)
    loss.backward()
    opt.step()
    return loss


def grads(model, b) -> dict:
    import torch.nn.functional as F

    model.zero_grad(set_to_none=True)
    F.binary_cross_entropy_with_logits(model(*b.args()), b.labels).backward()
    out = {n: p.grad.detach().clone() for n, p in model.named_parameters()
           if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def rel_err(a, b, floor: float = 1e-12) -> float:
    scale = max(b.abs().max().item(), floor)
    return (a.float() - b.float()).abs().max().item() / scale


def param_key(name: str) -> str:
    """Parameter names of an accelerated model back to the original's (swapped embedding
    bags hold the same Parameter as `weight` and `original.weight`)."""
    return name.replace("_orig_mod.", "").replace(".original.", ".")


def make_modes(model, modes, accelerate, s: Settings, modules, bounds, log):
    import torch

    out, swaps = {}, []
    kv = None
    for mode in modes:
        t0 = time.perf_counter()
        if mode == "eager":
            m = model
        elif mode == "compile":
            m = torch.compile(model)
        elif mode in ("max-autotune", "reduce-overhead"):
            m = torch.compile(model, mode=mode)
        else:
            if kv is None:
                kv = copy.deepcopy(model)
                swaps = accelerate(kv, archive=s.archive, modules=modules, bounds=bounds,
                                   **({"backend": s.backend} if s.backend else {}))
                log(f"  accelerate: {[(s.path, s.op) for s in swaps]}")
            m = kv if mode == "kevolve" else torch.compile(
                kv, **({"mode": "reduce-overhead"} if mode.endswith("reduce-overhead") else {}))
        out[mode] = m
        log(f"  {mode}: wrapped in {time.perf_counter() - t0:.1f}s")
    return out, swaps


def check(models: dict, b, tol: float, log) -> dict:
    """Outputs of every mode, and gradients of the kevolve modes, against eager."""
    ref = infer(models["eager"], b)
    ref_g = grads(models["eager"], b)
    res = {}
    for mode, m in models.items():
        if mode == "eager":
            continue
        t0 = time.perf_counter()
        try:
            r = _check_mode(mode, m, b, ref, ref_g, tol)
        except Exception as e:  # a mode that cannot run is reported, the others go on
            r = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        r["seconds"] = time.perf_counter() - t0
        res[mode] = r
        log(f"  check {mode}: {r}")
    return res


def _check_mode(mode: str, m, b, ref, ref_g, tol: float) -> dict:
    r = {"output_rel_err": rel_err(infer(m, b), ref)}
    if mode.startswith("kevolve"):
        g = {param_key(n): v for n, v in grads(m, b).items()}
        # a gradient that is 0 up to roundoff (a bias in front of a softmax) is
        # compared on the scale of the model's largest gradient
        floor = 1e-5 * max(v.abs().max().item() for v in ref_g.values())
        errs = {n: rel_err(g[n], ref_g[n], floor) for n in ref_g if n in g}
        missing = sorted(set(ref_g) - set(g))
        worst = max(errs, key=errs.get)
        r.update(grad_rel_err=errs[worst], worst_grad=worst, grads_checked=len(errs),
                 grads_missing=missing)
    r["ok"] = r["output_rel_err"] <= tol and r.get("grad_rel_err", 0.0) <= tol and \
        not r.get("grads_missing")
    return r


def timed(fn, device, iters: int) -> float:
    """Seconds for `iters` calls of `fn`, the device synchronized before and after."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return time.perf_counter() - t0


def profile(fn, device, iters: int = 3, top: int = 12) -> list[dict]:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    fn()
    sync(device)
    with prof(activities=acts) as p:
        for _ in range(iters):
            fn()
        sync(device)
    rows = []
    for e in p.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0)
        t = dev if device.type == "cuda" else e.self_cpu_time_total
        rows.append({"name": e.key[:90], "ms_per_step": t / 1e3 / iters,
                     "calls_per_step": e.count / iters})
    rows.sort(key=lambda r: -r["ms_per_step"])
    return [r for r in rows if r["ms_per_step"] > 0][:top]


def kernel_stats(model) -> dict:
    """Per kevolve op in the model: shape classes served by a kernel, and those that fell
    back to the original PyTorch code (no archived trace lowers for them)."""
    out = {}
    for mod in model.modules():
        kop = getattr(mod, "kop", None)
        if kop is None or kop.name in out:
            continue
        row = {}
        for part, table in (("forward", kop.fwd), ("backward", kop.bwd)):
            classes = list(table._by_class.values()) if table is not None else []
            row[part] = {"kernels": sum(k is not None for k in classes),
                         "fallback": sum(k is None for k in classes)}
        row["op"] = kop.opdef.name
        out[kop.name] = row
    return out


def run_model(zoo, name: str, s: Settings, accelerate: Callable, device, log) -> dict:
    import torch

    from ..evaluate.timing import interleaved

    torch.manual_seed(0)
    cfg, model, bounds, gen = zoo.build(name, s.scale, device)
    log(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
    modes = [m for m in s.modes if m in ALL_MODES]
    dyn = any("compile" in m or m == "max-autotune" for m in modes)
    models, swaps = make_modes(model, modes, accelerate, s, zoo.MODULES, bounds, log)
    scen = {"serve": (s.serve_batch, False), "large": (s.large_batch, False),
            "train": (s.train_batch, True)}
    data_by = {sc: batches(gen, cfg, n, s.batches, 1000 * k, device, dyn)
               for k, (sc, (n, _)) in enumerate(scen.items())}
    t0 = time.perf_counter()
    checks = check(models, data_by["train"][0], s.tol, log)
    out = {"params_m": sum(p.numel() for p in model.parameters()) / 1e6,
           "swaps": [sw.__dict__ for sw in swaps], "checks": checks,
           "check_seconds": time.perf_counter() - t0, "scenarios": {}}
    live = ["eager"] + [m for m in models if m != "eager" and checks[m]["ok"]]
    opts = {m: torch.optim.SGD(models[m].parameters(), lr=1e-3) for m in live}
    for sc, (n, training) in scen.items():
        bs = data_by[sc]
        fns = {}
        for m in live:
            it = {"k": 0}

            def fn(m=m, it=it, bs=bs, training=training):
                b = bs[it["k"] % len(bs)]
                it["k"] += 1
                return train_step(models[m], opts[m], b) if training else infer(models[m], b)
            fns[m] = fn
        warm = {}
        for m in live:  # warm-up: compiles, kernel builds, CUDA graphs recorded per batch
            t1 = time.perf_counter()
            for _ in range(2 * len(bs) + 1):
                fns[m]()
            sync(device)
            warm[m] = time.perf_counter() - t1
        secs = interleaved(fns, s.rounds, lambda fn: timed(fn, device, s.iters))
        rounds = {m: [n * s.iters / t for t in ts] for m, ts in secs.items()}
        med = {m: statistics.median(v) for m, v in rounds.items()}
        res = {"batch": n, "samples_per_s": med, "rounds": rounds, "warmup_s": warm}
        base = med.get("compile")
        if base:
            res["over_compile"] = {m: v / base for m, v in med.items()}
        if s.profile:
            res["profile"] = {m: profile(fns[m], device) for m in live}
        out["scenarios"][sc] = res
        log(f"  {sc} (batch {n}): " + ", ".join(f"{m} {v:,.0f}/s" for m, v in med.items()))
    kv = models.get("kevolve")
    if kv is not None:
        out["kernels"] = kernel_stats(kv)
        log(f"  kernels: {out['kernels']}")
    return out


def run(zoo, s: Settings, accelerate: Callable, command: str, log=print,
        on_model=None) -> dict:
    """Every model of `s.models`: checks, then samples/s per scenario and mode; results as
    one JSON-able dict (the bench report's `models` section). `on_model(partial)` after
    each model (a run cut short keeps what it did)."""
    import torch

    device = torch.device(s.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    name = torch.cuda.get_device_name() if device.type == "cuda" else \
        platform.processor() or "cpu"
    res = {"suite": "model",
           "backend": s.backend or ("triton" if device.type == "cuda" else "cpu"),
           "hardware": name, "device_name": name, "command": command,
           "torch": torch.__version__, "python": platform.python_version(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "rounds": s.rounds, "iters": s.iters, "args": asdict(s), "models": {}}
    try:
        import triton
        res["triton"] = triton.__version__
    except ImportError:
        pass
    for m in s.models:
        t0 = time.perf_counter()
        res["models"][m] = run_model(zoo, m, s, accelerate, device, log)
        res["models"][m]["seconds"] = time.perf_counter() - t0
        if on_model:
            on_model(res)
    return res


def _check_line(mode: str, c: dict) -> str:
    if "error" in c:
        return f"{mode}: FAILED ({c['error'].splitlines()[0][:200]})"
    return (f"{mode}: output {c['output_rel_err']:.1e}"
            + (f", worst grad {c['grad_rel_err']:.1e} ({c['worst_grad']}, "
               f"{c['grads_checked']} grads)" if "grad_rel_err" in c else "")
            + ("" if c["ok"] else " FAILED"))


def modes_of(r: dict) -> list[str]:
    """The modes timed in a model's scenarios, in the order they ran."""
    seen: list[str] = []
    for sr in r["scenarios"].values():
        seen += [m for m in sr["samples_per_s"] if m not in seen]
    return seen


def markdown(rep: dict, details: bool = True) -> str:
    """The run as Markdown: per model, the swaps, the checks, and samples/s per scenario
    and mode with the ratio over torch.compile (`details`: the profiles too)."""
    lines = [f"# End-to-end ranking models: {rep['device_name']}", "",
             f"Command: `{rep['command']}`", "",
             f"torch {rep['torch']}, {rep['started']}. Samples/s, median of {rep['rounds']} "
             f"interleaved rounds of {rep['iters']} steps; x = over torch.compile.", ""]
    for name, r in rep["models"].items():
        lines += [f"## {name} ({r['params_m']:.0f}M parameters)", "",
                  "Swapped: " + ", ".join(f"{s['path']} ({s['op']})" for s in r["swaps"]), "",
                  "Checks against eager: " + "; ".join(
                      _check_line(m, c) for m, c in r["checks"].items()), ""]
        for k in r.get("kernels", {}).values():
            lines.append(f"- {k['op']}: forward {k['forward']['kernels']} shape classes on "
                         f"kevolve kernels, {k['forward']['fallback']} on PyTorch; backward "
                         f"{k['backward']['kernels']} on kevolve, {k['backward']['fallback']} "
                         "on PyTorch")
        lines.append("")
        if not r["scenarios"]:
            continue
        modes = modes_of(r)
        lines += ["| scenario | batch | " + " | ".join(modes) + " |",
                  "|---|---|" + "---|" * len(modes)]
        for sc, sr in r["scenarios"].items():
            base = sr["samples_per_s"].get("compile")
            cells = []
            for m in modes:
                v = sr["samples_per_s"].get(m)
                cells.append("-" if v is None else
                             f"{v:,.0f}" + (f" ({v / base:.2f}x)" if base else ""))
            lines.append(f"| {sc} | {sr['batch']} | " + " | ".join(cells) + " |")
        lines.append("")
        if not details:
            continue
        for sc, sr in r["scenarios"].items():
            for m, rows in sr.get("profile", {}).items():
                lines += [f"<details><summary>{name} {sc} {m}: top kernels (ms per step)"
                          "</summary>", "", "| kernel | ms/step | calls |", "|---|---|---|"]
                lines += [f"| `{x['name'][:70]}` | {x['ms_per_step']:.3f} | "
                          f"{x['calls_per_step']:.0f} |" for x in rows]
                lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"
