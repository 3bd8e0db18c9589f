"""Load operators from users' spec files: `path/to/spec.py:name`.

A spec file is plain Python that builds an `Op` with the DSL (kevolve.ir.builder) and binds
it to a module-level name. `load_op` executes the file as a fresh module and returns that Op;
every way a spec can fail becomes a `SpecError` that names the file and the line:

- a Python syntax error (the line from the SyntaxError),
- a `SpecError` from the builder (it already carries its line; kept as it is),
- any other exception while executing the file (the innermost frame inside the file),
- no Op under the requested name (the message lists the Ops the file defines).

`kevolve.ops.resolve` accepts either a library op name (`softmax`) or a spec reference.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback
from types import ModuleType

from .errors import SpecError
from .nodes import Op

__all__ = ["load_op", "load_spec", "is_spec_ref", "split_ref", "spec_names"]


def is_spec_ref(ref: str) -> bool:
    """A spec reference names a `.py` file (optionally `:name`); anything else is a library
    op name."""
    path, _ = split_ref(ref)
    return path.endswith(".py") or os.sep in path or "/" in path


def split_ref(ref: str) -> tuple[str, str | None]:
    """`path/to/spec.py:name` -> (path, name); `path/to/spec.py` -> (path, None)."""
    if ref.endswith(".py") or ":" not in ref:
        return ref, None
    path, name = ref.rsplit(":", 1)
    if not path or os.sep in name or "/" in name:  # a drive letter or a path with a colon
        return ref, None
    return path, name or None


def load_op(ref: str) -> Op:
    """Execute the spec file in `ref` and return its Op (see the module docstring)."""
    value, _ = load_spec(ref)
    return value if isinstance(value, Op) else value.op


def load_spec(ref: str):
    """Execute the spec file in `ref`: (the bound value, its name). The value is an Op or an
    object carrying one as `.op` (an OpDef from kevolve.ops.define); without `:name`, the
    file's one such value (an Op wrapped by an OpDef the file also binds counts once)."""
    path, name = split_ref(ref)
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "does not exist"
        raise SpecError(f"spec file {path!r} {why}",
                        "pass path/to/spec.py:name, a Python file that builds an Op",
                        loc=path)
    module = _execute(path)
    return _pick(module, path, name)


def _module_name(path: str) -> str:
    digest = hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:12]
    return f"kevolve_spec_{digest}"


def _execute(path: str) -> ModuleType:
    """Run the file as a new module (registered in sys.modules under a name derived from its
    path, so dataclasses and pickling inside the spec work); failures become SpecErrors.
    While it runs, its folder comes first on sys.path, as for a script: a spec imports the
    helper modules beside it."""
    folder = os.path.dirname(os.path.abspath(path))
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        return _execute_module(path)
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def _execute_module(path: str) -> ModuleType:
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"cannot load {path!r} as Python", "give the spec file a .py name",
                        loc=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    except SpecError as e:
        if e.loc is None:
            e.loc = _innermost(e, path)
        raise
    except SyntaxError as e:
        if e.filename and _same_file(e.filename, path):
            loc = f"{path}:{e.lineno}" if e.lineno else path
        else:  # a module the spec imports is broken: point at the import
            loc = _innermost(e, path)
        raise SpecError(f"syntax error: {e.msg}", "", loc=loc) from e
    except Exception as e:
        msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise SpecError(f"executing the spec raised {msg}", "",
                        loc=_innermost(e, path)) from e
    return module


def _innermost(e: BaseException, path: str) -> str:
    """`path:line` of the innermost traceback frame that runs inside the spec file."""
    loc = path
    for frame in traceback.extract_tb(e.__traceback__):
        if _same_file(frame.filename, path):
            loc = f"{path}:{frame.lineno}"
    return loc


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _carries_op(v) -> bool:
    return isinstance(v, Op) or isinstance(getattr(v, "op", None), Op)


def _op_of(v) -> Op:
    return v if isinstance(v, Op) else v.op


def _ops_in(module: ModuleType) -> dict:
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and not isinstance(v, (type, ModuleType))
            and _carries_op(v)}


def _pick(module: ModuleType, path: str, name: str | None):
    found = _ops_in(module)
    listing = ", ".join(sorted(found)) or "none"
    choose = f"use {' or '.join(f'{path}:{k}' for k in sorted(found))}" if found else \
        "bind the result of op(...) or define(...) to a module-level name"
    if name is None:
        wrapped = {id(v.op) for v in found.values() if not isinstance(v, Op)}
        distinct = {id(v): k for k, v in found.items() if id(v) not in wrapped}
        if len(distinct) == 1:
            k = next(iter(distinct.values()))
            return found[k], k
        if not found:
            raise SpecError("the spec file defines no Op", choose, loc=path)
        raise SpecError(f"the spec file defines several Ops ({listing})", choose, loc=path)
    if name not in vars(module):
        # the Op's own name (op("col_sum", ...)) where the file binds it as COL_SUM
        named = {id(_op_of(v)): k for k, v in found.items() if _op_of(v).name == name}
        if len(named) == 1:
            k = next(iter(named.values()))
            wrapper = [kk for kk, v in found.items() if not isinstance(v, Op)
                       and _op_of(v).name == name]
            k = wrapper[0] if wrapper else k
            return found[k], k
        raise SpecError(f"no Op named {name!r} in the spec file (Ops in the file: {listing})",
                        choose, loc=path)
    value = vars(module)[name]
    if _carries_op(value):
        return value, name
    raise SpecError(f"{name!r} is a {type(value).__name__}, not an Op (Ops in the file: "
                    f"{listing})", choose, loc=path)


def spec_names(path: str) -> list[str]:
    """The names under which a spec file binds operators (an Op or an OpDef), in the order
    the file binds them; an Op that an OpDef of the file wraps is not listed on its own."""
    found = _ops_in(_execute(path))
    wrapped = {id(v.op) for v in found.values() if not isinstance(v, Op)}
    return [k for k, v in found.items() if id(v) not in wrapped]
