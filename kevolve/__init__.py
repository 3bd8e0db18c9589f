"""kevolve: accelerator kernels as a search problem.

Light to import: the embedding API (`kevolve.lower`, `kevolve.build`, `kevolve.plan`;
`kevolve.api.schedule`, since `kevolve.schedule` is the package) loads on first use, and
no backend toolchain (torch, triton, numba) is imported until a backend needs it."""

_API = ("lower", "build", "plan", "backend", "as_trace")


def __getattr__(name: str):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'kevolve' has no attribute {name!r}")
