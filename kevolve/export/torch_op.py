"""The PyTorch custom-op module that `kevolve export` writes for an archived best kernel.

The module registers the kernel with `torch.library.custom_op` (plus a fake implementation,
so it works under torch.compile) and autograd (the backward through kevolve.torch's backward
op for the same op and backend). It embeds the trace, the shape it was tuned
for and the generated source, and builds kernels through kevolve (which must be installed
where the module runs): for each shape class it meets, the same trace lowered for that shape
class, built once per distinct generated code.

Why not reuse a built kernel whenever its launch guards accept a shape: the guards do not
yet cover every dim a plan is specialized on (an embedding_bag kernel lowered for max_len 4
accepts max_len 25 and reads only 4 rows of each bag), so the module compares generated
code instead, which is exact.

The text is templates/export/torch_op.py.j2. Archive text (hardware names, traces, paths,
shapes) is untrusted there: it reaches the module only through the filters below, which
write Python literals, so no archived string can end a string early and become code. The
environment's `finalize` enforces it: an expression whose value is neither such a literal,
a number, an identifier-like word nor text marked `generated` (kevolve's own rendering of
validated data: IR text, a re-serialized trace, a signature of identifiers) refuses to
render."""

from __future__ import annotations

import json
import keyword
import pprint
import re
from functools import lru_cache

import jinja2

from ..assets import templates_dir

TEMPLATE = "export/torch_op.py.j2"
SHAPE_OPS = ("add", "sub", "mul", "floordiv", "mod", "max", "min")


class NotExportable(ValueError):
    """The op cannot be written as a custom op (an output shape the module cannot compute)."""


class BadOpName(ValueError):
    """A custom op name that is not `namespace::name`."""


class UnsafeText(ValueError):
    """A template tried to write text that is neither a literal nor plain words: a bug in a
    template, refused before anything is written."""


class Literal(str):
    """Text that is safe where the template puts it: a Python literal made by a filter, or
    text kevolve generated from validated data."""


PLAIN = re.compile(r"[A-Za-z0-9_ .,:*+\-/=\[\]()>]*")


def finalize(v):
    """Every `{{ }}` value passes through here: literals, numbers and plain words only."""
    if v is None or isinstance(v, (Literal, bool, int, float)):
        return v
    if isinstance(v, str) and PLAIN.fullmatch(v):
        return v
    raise UnsafeText(f"export template: refusing to write {str(v)[:80]!r} unescaped")


def _literal(f):
    return lambda *a, **k: Literal(f(*a, **k))


def source_literal(text: str) -> str:
    """A readable Python literal for source text: a raw triple-quoted string when the text
    allows one, else repr."""
    if "'''" in text or text.endswith(("\\", "'")) or "\r" in text or "\0" in text:
        return repr(text)
    return "r'''" + text + "'''"


def docstring(text: str) -> str:
    """A triple-quoted literal whose value is exactly `text`: raw (as written) when the text
    allows it, else with backslashes, quotes and unprintable characters escaped."""
    if '"""' not in text and not text.endswith(('"', "\\")) and \
            all(c.isprintable() or c in "\n\t" for c in text):
        return 'r"""' + text + '"""'
    escaped = "".join(
        "\\\\" if c == "\\" else '\\"' if c == '"' else c if c.isprintable() or c == "\n"
        else c.encode("unicode_escape").decode("ascii") for c in text)
    return '"""' + escaped + '"""'


def call_dict(pairs: list[tuple[str, str]]) -> str:
    """`{'name': identifier, ...}`: the keys as literals, the values as the Python
    parameters (identifiers made by `ident`) that hold them."""
    return "{" + ", ".join(f"{k!r}: {v}" for k, v in pairs) + "}"


def ident(name: str) -> str:
    """A Python identifier for a name: other characters become `_`."""
    s = re.sub(r"\W", "_", name)
    if not s or s[0].isdigit():
        s = "_" + s
    return s + "_" if keyword.iskeyword(s) else s


def custom_op_name(qualname: str | None, op: str, backend: str) -> tuple[str, str]:
    """(namespace, name) of the custom op: `qualname` ("ns::name") or
    kevolve::<op>_<backend>. BadOpName when `qualname` has no `::`."""
    ns, _, name = (qualname or f"kevolve::{ident(op)}_{ident(backend)}").partition("::")
    if not name:
        raise BadOpName("--name must look like namespace::name")
    return ident(ns), ident(name)


def shape_expr(e):
    """A shape expression as data the module evaluates: a dim name, an int, or [op, a, b]."""
    from ..ir.nodes import Binary, Const, Dim

    if isinstance(e, Dim):
        return e.name
    if isinstance(e, Const) and isinstance(e.value, int):
        return e.value
    if isinstance(e, Binary) and e.op in SHAPE_OPS:
        return [e.op, shape_expr(e.a), shape_expr(e.b)]
    raise NotExportable(f"cannot export: output shape expression {e!r} is not plain "
                        "arithmetic over dims")


@lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    e = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False, finalize=finalize)
    e.filters.update(py=_literal(repr), source=_literal(source_literal),
                     docstring=_literal(docstring), call_dict=_literal(call_dict),
                     generated=Literal,
                     pformat=_literal(lambda v: pprint.pformat(v, width=90, sort_dicts=False)))
    return e


def module_text(rec: dict, db: str, module: str, qualname: str | None = None,
                opdef=None) -> str:
    """The Python module for an archived best record (Archive.best_record), to be imported
    as `module`; `opdef` is the op's (kevolve.ops.resolve; default: the record's op name
    resolved). BadOpName for a malformed `qualname`; NotExportable for an op whose
    output shapes the module cannot compute."""
    from .. import api
    from ..ir.nodes import dim_offset
    from ..ir.printer import op_text
    from ..ops import resolve
    from ..schedule import Trace

    opdef = opdef if opdef is not None else resolve(rec["op"])
    shape = dict(rec["shape"])
    op = opdef.op_for(shape)
    dims = opdef.dims(shape)
    trace = Trace.from_json(rec["trace_json"])
    be = api.backend(rec["backend"])
    src = api.lower(op, trace, be, dims)
    ns, name = custom_op_name(qualname, op.name, rec["backend"])
    inputs = [(b.name, b.dtype.name) for b in op.inputs]
    params = [p.name for p in op.params]
    outputs = [(n, op.stage(n).out.dtype.name, [shape_expr(s) for s in op.stage(n).out.shape])
               for n in op.outputs]
    sources = {}
    for b in op.inputs:
        for k, s in enumerate(b.shape):
            d = dim_offset(s)
            if d is not None and d[0] not in sources and d[0] not in params:
                sources[d[0]] = (b.name, k, d[1])
    pyname = {n: ident(n) for n, _ in inputs} | {p: ident(p) for p in params}
    single = len(outputs) == 1
    r = rec["result"]
    speed = f", {r.baseline_ms / r.time_ms:.2f}x torch eager" if r.baseline_ms and \
        r.time_ms else ""
    return env().get_template(TEMPLATE).render(
        title=f"{ident(op.name)} on {ident(rec['backend'])}: the best kernel kevolve found, "
              f"as the PyTorch custom op {ns}::{name}.",
        db=db, candidate=rec["candidate_id"], op=op.name, opdef_ref=opdef.ref or opdef.name,
        backend=ident(rec["backend"]), hardware=rec["hardware"],
        measured=(f"{r.time_ms:.4g} ms median{speed} on {rec['hardware']}" if r.time_ms
                  else f"measured on {rec['hardware']}"),
        tuned_for=shape, tuned_for_json=json.dumps(shape), tuned_dims=dims,
        module=module, fn=ident(op.name), ns=ns, opname=name, qualname=f"{ns}::{name}",
        outs=", ".join(n for n, _, _ in outputs),
        args=", ".join(pyname[n] for n, _ in inputs) + "".join(f", {pyname[p]}=..."
                                                               for p in params),
        pretty=trace.pretty(), trace=trace.to_dict(),
        time_ms=r.time_ms, baseline_ms=r.baseline_ms, source_hash=src.hash,
        inputs=inputs, params=params, outputs=outputs, dim_sources=sources, source=src.text,
        bf16_on_host=be.target.tensor_lib == "numpy",
        signature=", ".join([f"{pyname[n]}: torch.Tensor" for n, _ in inputs] +
                            [f"{pyname[p]}: int" for p in params]),
        returns="torch.Tensor" if single else
        f"tuple[{', '.join('torch.Tensor' for _ in outputs)}]",
        ir=op_text(op).strip(),
        tensor_args=[(n, pyname[n]) for n, _ in inputs],
        param_args=[(p, pyname[p]) for p in params],
        ret="out[0]" if single else "out")
