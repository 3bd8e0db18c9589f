"""The MTIA backend: MTIA-style C++ for a grid of processing elements (PEs), run emulated.

One program of a kernel plan is one PE's work item: programs are spread over the PEs
(`kv_pid = kv_pe_id(); kv_pid += kv_num_pes()`). Inside a program the C-like emitter's
loop tree (`ScalarEmitter`, subclassed in builder.py) is kept as it is, with three
MTIA-specific rewrites done by the staging pass (staging.py):

- a load whose index is a rectangular slab of the step's block loops (each buffer dim a
  scalar, one block loop's axis plus a scalar, or rows picked by an index buffer) is staged:
  a DMA copies the slab into a local-memory tile before the outermost loop of the slab,
  hoisted out of loops it does not depend on, and later steps that read the same slab reuse
  the tile (softmax reads its row from DRAM once). Loads under `where(axis < limit, ..)`
  are staged with the DMA cut at the limit; other irregular accesses stay direct (`kv_ld`);
- the root's stores go to a local tile that one DMA writes back after its loops;
- a contraction lowered with the `dot` strategy whose operands are both staged becomes one
  `kv_dot` call per reduction chunk (the dot-product engine).

Accumulators and tiles are allocated from the PE's local memory at the top of the program;
their total is checked against the machine's local memory (`backend.local_memory`). The
intrinsics are implemented for the host in templates/mtia/kv_mtia.h, so the generated code
compiles with g++ and runs on the CPU; the time is an analytical estimate from
`model.MachineModel` (`MtiaBackend.estimate`), reported as an estimate, never as a
measurement. docs/backends.md ("MTIA") describes the intrinsics and the model."""

from .backend import MtiaBackend, MtiaCaps, caps_for
from .model import MachineModel

__all__ = ["MachineModel", "MtiaBackend", "MtiaCaps", "caps_for"]
