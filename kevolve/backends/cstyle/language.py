"""CStyleLanguage: the C family's one statement printer and the data a language changes.

A language is a class whose attributes are data (types, `code_for_op`, identities,
combine, casts, store casts, loop pragmas, barrier, shared declaration, shuffle, vector
types); languages.py holds the small subclasses (tinygrad's `renderer/cstyle.py` shape).
`render(stmts)` prints a statement tree by looking each statement's type up in `rules`: a
language with statements of its own (MTIA's DMA, numba's Python syntax) puts its rules in
front of the shared ones, `rules = {**CStyleLanguage.rules, Dma: print_dma}`, and so do
the tables: `code_for_op = {**CStyleLanguage.code_for_op, "rsqrt": "rsqrtf({})"}`."""

from __future__ import annotations

import re
from functools import cached_property

from ...ir import dtypes as dt
from ...ir.nodes import dtype_of
from ..pyexpr import PyLang
from .stmts import (
    AddTo,
    Assign,
    Check,
    Comment,
    Decl,
    For,
    If,
    Line,
    Prefetch,
    Range,
    Scope,
    Unroll,
)


def c_float(v: float) -> str:
    """A float constant in C (single precision)."""
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    r = repr(float(v))
    return (r if ("e" in r or "." in r) else r + ".0") + "f"


# -- print rules: (language, statement, indent level, inside grid loops) -> lines -------------


def _decl(lang, s: Decl, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    if s.size:
        return [f"{pad}{lang.types[s.ctype]} {s.name}[{s.size}];"]
    return [f"{pad}{lang.types[s.ctype]} {s.name}{' = ' + s.init if s.init is not None else ''};"]


def _assign(lang, s: Assign, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.target} = {s.value};"]


def _add_to(lang, s: AddTo, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    if lang.atomic_add is not None:
        return [pad + lang.atomic_add(s)]
    pre = [f"{pad}#pragma omp atomic"] if lang.omp_atomic else []  # harmless outside a team
    return pre + [f"{pad}{s.target} += {s.value};"]


def _comment(lang, s: Comment, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}/* {s.text} */"]


def _check(lang, s: Check, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}if (!({s.cond})) return {s.code};"]


def _prefetch(lang, s: Prefetch, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{lang.prefetch.format(s.addr)};"] if lang.prefetch else []


def _line(lang, s: Line, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.text}"]


def _if(lang, s: If, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    return [f"{pad}if ({s.cond}) {{", *lang.render(s.body, ind + 1, in_grid), f"{pad}}}"]


def _scope(lang, s: Scope, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    return [f"{pad}{{", *lang.render(s.body, ind + 1, in_grid), f"{pad}}}"]


def _unroll(lang, s: Unroll, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    body = lang.render(s.body, ind + 1, in_grid)
    var = re.compile(rf"\b{s.var}\b")
    out: list[str] = []
    for i in range(s.count):
        out.append(f"{pad}{{  /* {s.var} = {i} */")
        out.extend(var.sub(str(i), line) for line in body)
        out.append(f"{pad}}}")
    return out


def _for(lang, s: For, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    return [*(pad + p for p in lang.loop_pragmas(s, in_grid)), f"{pad}{lang.loop_head(s)} {{",
            *lang.render(s.body, ind + 1, s.kind == "grid"), f"{pad}}}"]


def _range(lang, s: Range, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    return [*(pad + p for p in lang.loop_pragmas(s, in_grid)),
            f"{pad}for (int64_t {s.var} = {s.start}; {s.var} < {s.stop}; {s.var} += {s.step}) {{",
            *lang.render(s.body, ind + 1, in_grid), f"{pad}}}"]


class CStyleLanguage:
    """C syntax, single-precision math; the defaults every C-family language starts from."""

    name = "c"
    # -- expressions ---------------------------------------------------------------------
    code_for_op: dict[str, str] = {
        "exp": "expf({})", "log": "logf({})", "sqrt": "sqrtf({})", "rsqrt": "(1.0f / sqrtf({}))",
        "sigmoid": "(1.0f / (1.0f + expf(-({}))))", "erf": "erff({})", "abs": "fabsf({})",
        "tanh": "tanhf({})", "not": "(!({}))", "sin": "sinf({})", "cos": "cosf({})",
        "floor": "floorf({})", "ceil": "ceilf({})", "trunc": "truncf({})",
        "round": "rintf({})", "log1p": "log1pf({})", "expm1": "expm1f({})"}
    binops: dict[str, str] | None = {
        "add": "+", "sub": "-", "mul": "*", "mod": "%", "lt": "<", "le": "<=", "gt": ">",
        "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}
    power: str | None = "powf({a}, {b})"  # floats; integer powers go through double
    int_power: str | None = "((int64_t)pow((double)({a}), (double)({b})))"
    intdiv = "/"
    floor_native = False  # `/` and `%` of integers truncate toward zero
    maximum, minimum = "fmaxf", "fminf"
    int_maximum, int_minimum = "kv_max", "kv_min"
    ternary = "(({c}) ? ({a}) : ({b}))"
    float_const = staticmethod(c_float)
    # element type of a buffer (its pointer's type); bf16 buffers are float on the host
    buffer_types: dict[str, str] = {"f32": "float", "f64": "double", "i32": "int32_t",
                                    "i64": "int64_t", "i8": "int8_t", "bool": "uint8_t",
                                    "f16": "_Float16",
                                    "bf16": "float"}
    casts: dict[str, str] = {t: f"(({c})({{}}))" for t, c in buffer_types.items()}
    load_casts: dict[str, str] = {}  # buffer dtype -> "{}" template applied to loaded values
    # -- statements ----------------------------------------------------------------------
    types: dict[str, str] = {"f32": "float", "i64": "int64_t", "i32": "int32_t", "i8": "int8_t",
                             "f64": "double", "bool": "int"}  # of declarations
    ident = {"sum": "0.0f", "max": "(-INFINITY)", "min": "INFINITY",
             "prod": "1.0f"}  # reduction identities
    combine = {"sum": "{a} + {b}", "max": "fmaxf({a}, {b})", "min": "fminf({a}, {b})",
               "prod": "{a} * {b}"}
    min_call = "kv_min({a}, {b})"
    to_acc = "(float)({})"  # a value converted to the accumulator type
    # an integer reduction's accumulator: int64, exact (f32 would be to 2^24 only)
    int_ident = {"sum": "0", "prod": "1", "max": "(-9223372036854775807LL - 1)",
                 "min": "9223372036854775807LL"}
    int_to_acc = "(int64_t)({})"
    zero = "0.0f"
    store_cast = {"bf16": "kv_round_bf16({})", "i64": "(int64_t)({})", "i32": "(int32_t)({})",
                  "i8": "(int8_t)({})", "bool": "(uint8_t)({})"}
    prefetch: str | None = None  # "{}" template for a prefetch of an address, if any
    line_bytes = 64
    unroll_pragma: str | None = "#pragma GCC unroll {}"
    unroll_full: str | None = None  # the pragma for a full unroll, where it differs
    simd_head: str | None = None  # "{var}", "{hi}": a loop head for simd loops
    reduce_head: str | None = None  # "{op}", "{acc}", "{var}", "{hi}": simd reductions
    # -- GPU dialects --------------------------------------------------------------------
    wavefront = 1
    thread_idx = block_idx = ""
    barrier = warp_barrier = ""
    shfl = ""  # "{v}", "{o}", "{w}"
    shared_prefix = "__shared__"
    wmma = False
    vectors: dict[str, dict[int, str]] = {}  # dtype -> {lanes: type of one access}
    # -- accumulating stores (AddTo) ------------------------------------------------------
    atomic_add = None  # AddTo -> one statement (a GPU's atomicAdd); None: `+=`
    omp_atomic = False  # `#pragma omp atomic` before the `+=` (OpenMP's parallel grid loops)
    serial_accumulate = False  # no atomics: an accumulating kernel's grid loops run in order

    rules = {Decl: _decl, Assign: _assign, AddTo: _add_to, Comment: _comment, Check: _check,
             Prefetch: _prefetch, Line: _line, If: _if, Scope: _scope, Unroll: _unroll,
             For: _for, Range: _range}

    # -- the printer ---------------------------------------------------------------------
    def render(self, stmts: list, ind: int = 1, in_grid: bool = False) -> list[str]:
        """The statement tree as lines, indented `ind` levels (`in_grid`: inside grid loops)."""
        out: list[str] = []
        for s in stmts:
            rule = self.rules.get(type(s))
            if rule is None:
                raise TypeError(f"{self.name} cannot print {type(s).__name__}")
            out.extend(rule(self, s, ind, in_grid))
        return out

    def loop_pragmas(self, s, in_grid: bool) -> list[str]:
        if not s.unroll or self.unroll_pragma is None:
            return []
        if s.unroll == "full" and self.unroll_full:
            return [self.unroll_full]
        return [self.unroll_pragma.format(s.unroll)]

    def loop_head(self, s: For) -> str:
        if s.kind == "simd" and s.reduction and self.reduce_head:
            return self.reduce_head.format(op=s.reduction[0], acc=s.reduction[1], var=s.var,
                                           hi=s.hi)
        if s.kind == "simd" and self.simd_head:
            return self.simd_head.format(var=s.var, hi=s.hi)
        return f"for (int64_t {s.var} = 0; {s.var} < {s.hi}; ++{s.var})"

    def acc(self, r) -> tuple[str, str, str, str]:
        """(type, identity, combine template, conversion template) of reduction `r`'s
        accumulator: f32 for a float body, int64 for an integer one."""
        if dtype_of(r.body).is_float:
            return "f32", self.ident[r.op], self.combine[r.op], self.to_acc
        mx, mn = self.int_maximum or self.maximum, self.int_minimum or self.minimum
        combine = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": mx + "({a}, {b})",
                   "min": mn + "({a}, {b})"}
        return "i64", self.int_ident[r.op], combine[r.op], self.int_to_acc

    # -- expressions ---------------------------------------------------------------------
    def load(self, ptr: str, off: str, mask, ld) -> str:
        return self.load_casts.get(ld.buffer.dtype.name, "{}").format(f"{ptr}[{off}]")

    def cast(self, code: str, t: dt.DType) -> str:
        return self.casts[t.name].format(code)

    def ptr_type(self, dtype: dt.DType) -> str:
        return self.buffer_types[dtype.name]

    @cached_property
    def expr(self) -> PyLang:
        """This language's expression printer data (pyexpr.emit)."""
        extra = {} if self.binops is None else {"binops": self.binops}
        return PyLang(unary={k: v.format for k, v in self.code_for_op.items()},
                      maximum=self.maximum, minimum=self.minimum,
                      where=lambda c, a, b: self.ternary.format(c=c, a=a, b=b),
                      load=self.load, cast=self.cast, float_const=self.float_const,
                      intdiv=self.intdiv, int_maximum=self.int_maximum,
                      int_minimum=self.int_minimum, power=self._power,
                      floor_native=self.floor_native, **extra)

    def _power(self, a: str, b: str, floating: bool) -> str:
        if self.power is None:
            return f"({a} ** {b})"
        return (self.power if floating else self.int_power).format(a=a, b=b)
