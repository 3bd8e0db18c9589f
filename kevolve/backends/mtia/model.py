"""The machine model behind the MTIA backend's time estimate.

An MTIA-style accelerator (after Meta's public descriptions of MTIA: an 8x8 grid of
processing elements, each with local SRAM, a DMA engine, a vector engine and a dot-product
engine, fed from LPDDR DRAM). The numbers below are ILLUSTRATIVE: a few are public figures
of MTIA v2 (1.35 GHz, 177 TFLOPS bf16 GEMM, 204.8 GB/s LPDDR5, 64 PEs, as reported in
"Our next generation Meta Training and Inference Accelerator", Meta 2024, and at Hot Chips
2024), the rest are assumptions chosen to be plausible. They are not MTIA specifications,
and the estimate is a model, never a measurement: docs/backends.md ("MTIA") explains it.

The estimate is computed from the generated program itself (`ProgramCost`, filled in by
the backend while it walks the loop tree it prints):

    per program: t = overhead + sum over DMAs (latency + burst bytes / PE DMA bandwidth)
                 + direct DRAM accesses * access time + vector cycles / clock
                 + scalar cycles / clock + dot FLOPs / dot-engine rate
    per kernel:  launch + max(ceil(programs / PEs) * t, DMA bytes / SRAM bw,
                              DRAM bytes / DRAM bw)

DMAs go through the on-chip SRAM: when every buffer the kernel touches fits in it, DRAM
moves each byte once (the footprint) and re-reads hit the SRAM; otherwise every DMA byte
comes from DRAM (no reuse assumed). The generated code waits for each DMA before computing,
so the terms of one program add (no overlap is assumed); PEs run programs in parallel and
share the SRAM and DRAM bandwidths."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class MachineModel:
    name: str = "mtia-illustrative-v1"
    num_pes: int = 64  # 8 x 8 grid (public)
    local_bytes: int = 384 * 1024  # local memory per PE (assumed; see docs)
    clock_hz: float = 1.35e9  # (public, MTIA v2)
    dram_bw: float = 204.8e9  # chip-wide LPDDR5 bytes/s (public, MTIA v2)
    sram_bytes: int = 256 * 1024 * 1024  # on-chip SRAM shared by the PEs (public, MTIA v2)
    sram_bw: float = 2.7e12  # its bandwidth, bytes/s (public, MTIA v2)
    dma_bw_per_pe: float = 25.6e9  # one PE's DMA engine, bytes/s (assumed)
    dma_latency_s: float = 2e-7  # fixed cost of one DMA transfer (assumed)
    dma_align: int = 64  # DRAM burst: every contiguous run is rounded up to it (assumed)
    direct_access_s: float = 2.5e-8  # one direct (non-DMA) DRAM load/store (assumed)
    vector_lanes: int = 32  # f32 elements per vector-engine instruction (assumed)
    transcendental_cycles: int = 4  # exp, log, erf, tanh, sqrt per vector instruction
    # dot-product engine FLOP/s per PE by operand dtype: 177 TFLOPS bf16 over 64 PEs
    # (public); f32 operands at a quarter of that rate (assumed).
    dot_flops_per_pe: dict = field(default_factory=lambda: {"bf16": 177e12 / 64,
                                                            "f16": 177e12 / 64,
                                                            "f32": 177e12 / 64 / 4})
    launch_s: float = 1e-6  # job launch (public: "under 1 microsecond")
    program_overhead_cycles: int = 64  # per program: loop control, address setup (assumed)

    def as_dict(self) -> dict:
        return asdict(self)

    def bursts(self, runs: float, run_bytes: float) -> float:
        """DRAM bytes moved for `runs` contiguous runs of `run_bytes` each."""
        if run_bytes <= 0 or runs <= 0:
            return 0.0
        return runs * math.ceil(run_bytes / self.dma_align) * self.dma_align


@dataclass
class ProgramCost:
    """What one average program of a kernel does (filled in by the backend's walk)."""

    dma_count: float = 0.0
    dma_bytes: float = 0.0  # element bytes the DMAs move (what the emulator counts)
    dma_burst_bytes: float = 0.0  # the same, rounded up to DRAM bursts
    direct: float = 0.0  # direct DRAM loads and stores
    vector_cycles: float = 0.0
    scalar_cycles: float = 0.0
    dot_flops: dict = field(default_factory=dict)  # operand dtype -> FLOPs

    def time_parts(self, m: MachineModel) -> dict[str, float]:
        dot = sum(f / m.dot_flops_per_pe.get(dt, m.dot_flops_per_pe["f32"])
                  for dt, f in self.dot_flops.items())
        return {"dma": self.dma_count * m.dma_latency_s + self.dma_burst_bytes /
                m.dma_bw_per_pe,
                "direct": self.direct * m.direct_access_s,
                "vector": self.vector_cycles / m.clock_hz,
                "scalar": (self.scalar_cycles + m.program_overhead_cycles) / m.clock_hz,
                "dot": dot}

    def traffic_bytes(self, m: MachineModel) -> float:
        """Bytes one program moves between DRAM/SRAM and its PE (bursts)."""
        return self.dma_burst_bytes + self.direct * m.dma_align


def kernel_estimate(name: str, programs: int, cost: ProgramCost, local_bytes: int,
                    footprint: int, m: MachineModel) -> dict:
    """`footprint`: bytes of every buffer the kernel reads or writes."""
    parts = cost.time_parts(m)
    t_prog = sum(parts.values())
    waves = math.ceil(programs / m.num_pes) if programs else 0
    traffic = programs * cost.traffic_bytes(m)
    dram = min(traffic, footprint) if footprint <= m.sram_bytes else traffic
    times = {"pes": waves * t_prog, "sram": traffic / m.sram_bw, "dram": dram / m.dram_bw}
    worst = max(times, key=times.get)
    bound = (max(parts, key=parts.get) if programs else "launch") if worst == "pes" else worst
    return {"kernel": name, "programs": programs, "waves": waves,
            "program_us": t_prog * 1e6,
            "program_parts_us": {k: v * 1e6 for k, v in parts.items()},
            "footprint_bytes": footprint, "sram_traffic_bytes": traffic,
            "dram_bytes": dram,
            "dma_bytes": programs * cost.dma_bytes, "dma_transfers": programs * cost.dma_count,
            "direct_accesses": programs * cost.direct,
            "dot_flops": programs * sum(cost.dot_flops.values()),
            "vector_cycles": programs * cost.vector_cycles,
            "local_bytes": local_bytes, "bound": bound,
            "time_ms": (m.launch_s + times[worst]) * 1e3}


def total_estimate(kernels: list[dict], m: MachineModel) -> dict:
    """The op's estimate: kernels run one after another (a grid barrier between them)."""
    ms = sum(k["time_ms"] for k in kernels)
    return {"estimate": True, "estimate_ms": ms, "model": m.name,
            "note": "analytical estimate from an illustrative machine model, not a "
                    "measurement",
            "dram_bytes": sum(k["dram_bytes"] for k in kernels),
            "dma_bytes": sum(k["dma_bytes"] for k in kernels),
            "dot_flops": sum(k["dot_flops"] for k in kernels),
            "local_bytes": max((k["local_bytes"] for k in kernels), default=0),
            "bound": max(kernels, key=lambda k: k["time_ms"])["bound"] if kernels else "",
            "kernels": kernels}
