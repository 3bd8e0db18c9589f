"""End-to-end benchmark of the reference ranking models: eager PyTorch, torch.compile
(default, and max-autotune when asked) and the same models with kevolve's ops swapped in by
`kevolve.torch.accelerate` (run eagerly, and under torch.compile).

    PYTHONPATH=. python -m benchmarks.models.run --device cuda \
        --archive benchmarks/results/h200-archive.db --out /tmp/model

1. Checks first: every mode's outputs against eager on one batch, and for the kevolve modes
   every parameter's gradient after a backward pass (fp32; relative to the gradient's
   largest magnitude, or 1e-5 of the model's largest gradient if that is larger). A failed
   check is recorded and that mode is not timed.
2. Then samples/s for inference at a serving batch and a large batch and for a training
   step (forward, backward, SGD), the modes interleaved round by round, medians reported.
   Batches rotate among a few generated ones (jagged lengths differ batch to batch).
3. A profiler breakdown (top kernels by device time per step) for each scenario and mode.

Writes OUT.json and OUT.md. `--scale N` divides the embedding tables' rows (CPU runs).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from . import data, dlrm, seq

MODULES = {"DotInteraction": "dot_interaction", "JaggedSoftmax": "jagged_softmax",
           "JaggedSum": "jagged_sum", "JaggedToDense": "jagged_to_padded_dense"}
ALL_MODES = ("eager", "compile", "max-autotune", "kevolve", "kevolve-compile")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def build(name: str, scale: int, device):
    if name == "dlrm":
        cfg = dlrm.DLRMConfig().scaled(scale) if scale > 1 else dlrm.DLRMConfig()
        model = dlrm.DLRM(cfg)
        bounds = {f"embeddings.{k}": {"max_len": c} for k, c in enumerate(cfg.caps)}
        return cfg, model.to(device), bounds, data.dlrm_batch
    cfg = seq.SeqConfig().scaled(scale) if scale > 1 else seq.SeqConfig()
    model = seq.SeqModel(cfg)
    bounds = {"softmax": {"max_len": cfg.max_len}, "pool": {"max_len": cfg.max_len}}
    return cfg, model.to(device), bounds, data.seq_batch


def batches(gen, cfg, size: int, n: int, seed: int, device, dynamic: bool):
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
    with torch.no_grad():
        return model(*b.args())


def train_step(model, opt, b):
    opt.zero_grad(set_to_none=True)
    loss = F.binary_cross_entropy_with_logits(model(*b.args()), b.labels)
    loss.backward()
    opt.step()
    return loss


def grads(model, b) -> dict:
    model.zero_grad(set_to_none=True)
    F.binary_cross_entropy_with_logits(model(*b.args()), b.labels).backward()
    out = {n: p.grad.detach().clone() for n, p in model.named_parameters()
           if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def rel_err(a: torch.Tensor, b: torch.Tensor, floor: float = 1e-12) -> float:
    scale = max(b.abs().max().item(), floor)
    return (a.float() - b.float()).abs().max().item() / scale


def _param_key(name: str) -> str:
    """Parameter names of an accelerated model back to the original's (swapped embedding
    bags hold the same Parameter as `weight` and `original.weight`)."""
    return name.replace("_orig_mod.", "").replace(".original.", ".")


def make_modes(model, modes, archive, bounds, log):
    out, swaps = {}, []
    kv = None
    for mode in modes:
        t0 = time.perf_counter()
        if mode == "eager":
            m = model
        elif mode == "compile":
            m = torch.compile(model)
        elif mode == "max-autotune":
            m = torch.compile(model, mode="max-autotune")
        else:
            if kv is None:
                import kevolve.torch as kt
                kv = copy.deepcopy(model)
                swaps = kt.accelerate(kv, archive=archive, modules=MODULES, bounds=bounds)
                log(f"  accelerate: {[(s.path, s.op) for s in swaps]}")
            m = kv if mode == "kevolve" else torch.compile(kv)
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
        r = {"output_rel_err": rel_err(infer(m, b), ref)}
        if mode.startswith("kevolve"):
            g = {_param_key(n): v for n, v in grads(m, b).items()}
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
        r["seconds"] = time.perf_counter() - t0
        res[mode] = r
        log(f"  check {mode}: {r}")
    return res


def timed(fn, device, iters: int) -> float:
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


def run_model(name, args, device, log) -> dict:
    torch.manual_seed(0)
    cfg, model, bounds, gen = build(name, args.scale, device)
    log(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
    modes = [m for m in args.modes if m in ALL_MODES]
    dyn = any("compile" in m or m == "max-autotune" for m in modes)
    models, swaps = make_modes(model, modes, args.archive, bounds, log)
    scen = {"serve": (args.serve_batch, False), "large": (args.large_batch, False),
            "train": (args.train_batch, True)}
    data_by = {s: batches(gen, cfg, n, args.batches, 1000 * k, device, dyn)
               for k, (s, (n, _)) in enumerate(scen.items())}
    t0 = time.perf_counter()
    checks = check(models, data_by["train"][0], args.tol, log)
    out = {"params_m": sum(p.numel() for p in model.parameters()) / 1e6,
           "swaps": [s.__dict__ for s in swaps], "checks": checks,
           "check_seconds": time.perf_counter() - t0, "scenarios": {}}
    live = ["eager"] + [m for m in models if m != "eager" and checks[m]["ok"]]
    opts = {m: torch.optim.SGD(models[m].parameters(), lr=1e-3) for m in live}
    for s, (n, training) in scen.items():
        bs = data_by[s]
        fns = {}
        for m in live:
            it = {"k": 0}

            def fn(m=m, it=it, bs=bs, training=training):
                b = bs[it["k"] % len(bs)]
                it["k"] += 1
                return train_step(models[m], opts[m], b) if training else infer(models[m], b)
            fns[m] = fn
        warm = {}
        for m in live:  # warm-up: compiles, kernel builds, every batch once
            t1 = time.perf_counter()
            for _ in range(len(bs) + 1):
                fns[m]()
            sync(device)
            warm[m] = time.perf_counter() - t1
        rounds = {m: [] for m in live}
        for _ in range(args.rounds):
            for m in live:
                rounds[m].append(n * args.iters / timed(fns[m], device, args.iters))
        med = {m: statistics.median(v) for m, v in rounds.items()}
        res = {"batch": n, "samples_per_s": med, "rounds": rounds, "warmup_s": warm}
        if args.profile:
            res["profile"] = {m: profile(fns[m], device) for m in live}
        out["scenarios"][s] = res
        log(f"  {s} (batch {n}): " + ", ".join(f"{m} {v:,.0f}/s" for m, v in med.items()))
    kv = models.get("kevolve")
    if kv is not None:
        out["kernels"] = kernel_stats(kv)
        log(f"  kernels: {out['kernels']}")
    return out


def markdown(rep: dict) -> str:
    lines = [f"# End-to-end ranking models: {rep['device_name']}", "",
             f"Command: `{rep['command']}`", "",
             f"torch {rep['torch']}, {rep['started']}. Samples/s, median of {rep['rounds']} "
             f"interleaved rounds of {rep['iters']} steps; x = over torch.compile.", ""]
    for name, r in rep["models"].items():
        lines += [f"## {name} ({r['params_m']:.0f}M parameters)", "",
                  "Swapped: " + ", ".join(f"{s['path']} ({s['op']})" for s in r["swaps"]), "",
                  "Checks against eager: " + "; ".join(
                      f"{m}: output {c['output_rel_err']:.1e}"
                      + (f", worst grad {c['grad_rel_err']:.1e} ({c['worst_grad']}, "
                         f"{c['grads_checked']} grads)" if "grad_rel_err" in c else "")
                      + ("" if c["ok"] else " FAILED") for m, c in r["checks"].items()), ""]
        for k in r.get("kernels", {}).values():
            lines.append(f"- {k['op']}: forward {k['forward']['kernels']} shape classes on "
                         f"kevolve kernels, {k['forward']['fallback']} on PyTorch; backward "
                         f"{k['backward']['kernels']} on kevolve, {k['backward']['fallback']} "
                         "on PyTorch")
        lines.append("")
        modes = list(next(iter(r["scenarios"].values()))["samples_per_s"])
        lines += ["| scenario | batch | " + " | ".join(modes) + " |",
                  "|---|---|" + "---|" * len(modes)]
        for s, sr in r["scenarios"].items():
            base = sr["samples_per_s"].get("compile")
            cells = []
            for m in modes:
                v = sr["samples_per_s"][m]
                cells.append(f"{v:,.0f}" + (f" ({v / base:.2f}x)" if base else ""))
            lines.append(f"| {s} | {sr['batch']} | " + " | ".join(cells) + " |")
        lines.append("")
        for s, sr in r["scenarios"].items():
            for m, rows in sr.get("profile", {}).items():
                lines += [f"<details><summary>{name} {s} {m}: top kernels (ms per step)"
                          "</summary>", "", "| kernel | ms/step | calls |", "|---|---|---|"]
                lines += [f"| `{x['name'][:70]}` | {x['ms_per_step']:.3f} | "
                          f"{x['calls_per_step']:.0f} |" for x in rows]
                lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--models", default="dlrm,seq")
    ap.add_argument("--modes", default="eager,compile,kevolve,kevolve-compile")
    ap.add_argument("--archive", default=None, help="kevolve archive (default schedules "
                    "without one)")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--serve-batch", type=int, default=512)
    ap.add_argument("--large-batch", type=int, default=8192)
    ap.add_argument("--train-batch", type=int, default=4096)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", required=True, help="output prefix (writes OUT.json, OUT.md)")
    args = ap.parse_args(argv)
    args.modes = args.modes.split(",")
    device = torch.device(args.device)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    rep = {"command": " ".join(["python -m benchmarks.models.run", *(argv or sys.argv[1:])]),
           "torch": torch.__version__, "python": platform.python_version(),
           "device_name": torch.cuda.get_device_name() if device.type == "cuda" else
           platform.processor() or "cpu",
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "rounds": args.rounds, "iters": args.iters, "args": vars(args), "models": {}}
    try:
        import triton
        rep["triton"] = triton.__version__
    except ImportError:
        pass
    for name in args.models.split(","):
        t0 = time.perf_counter()
        rep["models"][name] = run_model(name, args, device, log)
        rep["models"][name]["seconds"] = time.perf_counter() - t0
        with open(args.out + ".json", "w") as f:  # after each model: a timeout keeps some
            json.dump(rep, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(markdown(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
