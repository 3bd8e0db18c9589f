"""The C family's languages: small subclasses of CStyleLanguage that set data; where a
language differs it puts the difference in front of the shared table."""

from __future__ import annotations

from ..pyexpr import py_float
from .language import CStyleLanguage
from .stmts import AddTo, Assign, Check, Comment, Decl, For


class CLanguage(CStyleLanguage):
    """C11 with OpenMP for the host: grid loops become `omp parallel for`, innermost block
    loops `omp simd`. Built with -ffast-math (libmvec's vector math), so max/min start from
    -/+FLT_MAX, not infinities."""

    name = "c"
    ident = {**CStyleLanguage.ident, "max": "(-FLT_MAX)", "min": "FLT_MAX"}
    prefetch = "__builtin_prefetch(&{}, 0, 0)"
    omp_atomic = True  # OpenMP's atomic update: a lock-free add for float and integers

    def loop_pragmas(self, s, in_grid: bool) -> list[str]:
        if s.kind == "grid" and not in_grid:
            return [f"#pragma omp parallel for collapse({len(_grid_chain(s))}) schedule(static)"]
        if s.kind == "simd" and (s.vector or not s.reduction):
            # A reduction loop is left to the auto-vectorizer (-ffast-math lets it
            # reassociate): GCC 12 fails to vectorize `omp simd reduction` loops nested
            # in other loops (it privatizes the accumulator through memory).
            extra = f" reduction({_OMP_OP[s.reduction[0]]}:{s.reduction[1]})" \
                if s.reduction else ""
            extra += f" simdlen({s.vector})" if s.vector else ""
            return [f"#pragma omp simd{extra}"]
        return super().loop_pragmas(s, in_grid)


_OMP_OP = {"sum": "+", "max": "max", "min": "min", "prod": "*"}


def _grid_chain(s: For) -> list[For]:
    chain = [s]
    while len(s.body) == 1 and isinstance(s.body[0], For) and s.body[0].kind == "grid":
        s = s.body[0]
        chain.append(s)
    return chain


_VECTORS = {"f32": {2: "float2", 4: "float4"}, "i32": {2: "int2", 4: "int4"},
            "i64": {2: "longlong2"}}  # both GPU languages; kv_*: raw bits (see the templates)


def _gpu_atomic_add(s: AddTo) -> str:
    """atomicAdd has float, int and unsigned long long overloads: an i64 adds as its
    two's-complement bits."""
    if s.dtype == "i64":
        return f"atomicAdd((unsigned long long *)&{s.target}, " \
            f"(unsigned long long)({s.value}));"
    return f"atomicAdd(&{s.target}, {s.value});"


class CudaLanguage(CStyleLanguage):
    """CUDA C++: one thread block per program, 32-lane warps, WMMA for 16-bit dots."""

    name = "cuda"
    code_for_op = {**CStyleLanguage.code_for_op, "rsqrt": "rsqrtf({})"}
    casts = {**CStyleLanguage.casts, "bf16": "kv_round_bf16({})", "f16": "kv_round_f16({})"}
    load_casts = {"bf16": "kv_f32({})", "f16": "kv_f32({})"}  # 16-bit loads widen to float
    buffer_types = {**CStyleLanguage.buffer_types, "bf16": "__nv_bfloat16",
                    "f16": "__half"}
    store_cast = {**CStyleLanguage.store_cast, "bf16": "kv_bf16({})", "f16": "kv_f16({})"}
    unroll_pragma, unroll_full = "#pragma unroll {}", "#pragma unroll"
    wavefront = 32
    thread_idx, block_idx = "threadIdx.x", "blockIdx.x"
    barrier, warp_barrier = "__syncthreads();", "__syncwarp();"
    shfl = "__shfl_xor_sync(0xffffffffu, {v}, {o}, {w})"
    wmma = True  # tensor-core fragments (nvcuda::wmma) for bf16/f16 contractions
    atomic_add = staticmethod(_gpu_atomic_add)
    vectors = {**_VECTORS, "bf16": {2: "__nv_bfloat162", 4: "kv_bf16x4", 8: "kv_bf16x8"},
               "f16": {2: "__half2", 4: "kv_f16x4", 8: "kv_f16x8"}}

    def __init__(self, wavefront: int | None = None):
        if wavefront is not None:
            self.wavefront = wavefront


class HipLanguage(CudaLanguage):
    """HIP: CUDA's syntax; wavefronts of 64 on AMD (32 on the HIP-on-CUDA path), no WMMA.
    ROCm 5.2 has float4 and __half2 but no bf16 pair: kv_bf16x2 is its 4 bytes."""

    name = "hip"
    buffer_types = {**CudaLanguage.buffer_types, "bf16": "hip_bfloat16"}
    wavefront = 64
    shfl = "__shfl_xor({v}, {o}, {w})"
    wmma = False
    vectors = {**CudaLanguage.vectors, "bf16": {2: "kv_bf16x2", 4: "kv_bf16x4", 8: "kv_bf16x8"}}


# -- numba: the same tree in Python syntax ------------------------------------------------------


def _py_decl(lang, s: Decl, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    if s.size:
        dtype = "np.float32" if s.ctype.startswith("f") else "np.int64"
        return [f"{pad}{s.name} = np.empty({s.size}, dtype={dtype})"]
    return [f"{pad}{s.name} = {s.init if s.init is not None else '0'}"]


def _py_assign(lang, s: Assign, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.target} = {s.value}"]


def _py_add_to(lang, s: AddTo, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.target} += {s.value}"]


def _py_comment(lang, s: Comment, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}# {s.text}"]


def _py_check(lang, s: Check, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    return [f"{pad}if not ({s.cond}):", f"{pad}    return {s.code}"]


def _py_for(lang, s: For, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    body = lang.render(s.body, ind + 1)
    return [f"{pad}for {s.var} in {'prange' if s.kind == 'grid' else 'range'}({s.hi}):",
            *(body or [f"{pad}    pass"])]


class NumbaLanguage(CStyleLanguage):
    """Python for numba: grid loops become `prange`, math comes from `math`, fastmath."""

    name = "numba"
    code_for_op = {"exp": "math.exp({})", "log": "math.log({})", "sqrt": "math.sqrt({})",
                   "rsqrt": "(1.0 / math.sqrt({}))",
                   "sigmoid": "(1.0 / (1.0 + math.exp(-({}))))", "erf": "math.erf({})",
                   "abs": "abs({})", "tanh": "math.tanh({})", "not": "(not ({}))",
                   "sin": "math.sin({})", "cos": "math.cos({})", "floor": "np.floor({})",
                   "ceil": "np.ceil({})", "trunc": "np.trunc({})", "round": "np.rint({})",
                   "log1p": "math.log1p({})", "expm1": "math.expm1({})"}
    binops = None  # Python's own
    power = None  # Python's `**`
    intdiv = "//"
    floor_native = True  # Python's `//` and `%`
    maximum, minimum, int_maximum, int_minimum = "max", "min", "max", "min"
    ternary = "(({a}) if ({c}) else ({b}))"
    float_const = staticmethod(lambda v: py_float(v, "math.inf", "math.nan"))
    casts = {"f32": "np.float32({})", "f64": "np.float64({})", "bf16": "kv_round_bf16({})",
             "f16": "np.float16({})", "i32": "np.int32({})", "i64": "np.int64({})",
             "i8": "np.int8({})", "bool": "bool({})"}
    types: dict[str, str] = {}
    ident = {"sum": "np.float32(0.0)", "max": "-np.inf", "min": "np.inf",
             "prod": "np.float32(1.0)"}
    combine = {**CStyleLanguage.combine, "max": "max({a}, {b})", "min": "min({a}, {b})"}
    min_call = "min({a}, {b})"
    to_acc = "{}"
    int_ident = {"sum": "np.int64(0)", "prod": "np.int64(1)",
                 "max": "np.int64(-9223372036854775808)", "min": "np.int64(9223372036854775807)"}
    int_to_acc = "np.int64({})"
    zero = "0.0"
    store_cast = {"bf16": "kv_round_bf16({})"}
    # numba has no atomic add on array elements (and a prange body's `a[i] += v` races):
    # an accumulating kernel's programs run one after another
    serial_accumulate = True
    rules = {**CStyleLanguage.rules, Decl: _py_decl, Assign: _py_assign, AddTo: _py_add_to,
             Comment: _py_comment,
             Check: _py_check, For: _py_for}
