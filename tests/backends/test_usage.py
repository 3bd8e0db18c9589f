"""Resource estimates (kevolve.backends.usage, triton/usage.py) and the proposers' use of them.

The estimate is held against what the H200 did with the committed archives'
gemm_bias_gelu candidates (their results, as a fixture: tests/fixtures/
h200_gemm_bias_gelu_results.json): ptxas's shared memory for those that compiled, Triton's
"Required" for those that did not, and the spills of those over 255 registers."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from kevolve.archive.records import Scored
from kevolve.backends.triton import TritonBackend
from kevolve.backends.usage import Usage, check_fits, resident_programs
from kevolve.evaluate.job import Result
from kevolve.ir.printer import op_text
from kevolve.ops import LIBRARY
from kevolve.plan import lower
from kevolve.schedule import MoveError, Trace, apply_trace
from kevolve.search.proposers.base import ProposalContext
from kevolve.search.proposers.heuristic import HeuristicProposer
from kevolve.search.proposers.prove import prove

# every Triton result of a gemm_bias_gelu candidate in three committed H200 archives
RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "h200_gemm_bias_gelu_results.json"
H200 = {"shared_bytes": 232448, "registers_per_thread": 255, "registers_per_program": 65536}
GEMM = LIBRARY["gemm_bias_gelu"]
DIMS = GEMM.dims("gpu")


def gemm_trace(bm: int, bn: int, bk: int, warps: int, stages: int) -> Trace:
    """kevolve's gemm_bias_gelu schedule shape (the H200 ranking's kind), with its numbers."""
    return Trace.from_dict({
        "version": 1, "op": "gemm_bias_gelu", "decisions": {"$BM": bm, "$BN": bn, "$BK": bk},
        "moves": [{"m": "split", "stage": "y", "axis": "i", "size": "$BM", "into": ["io", "ii"]},
                  {"m": "split", "stage": "y", "axis": "j", "size": "$BN", "into": ["jo", "ji"]},
                  {"m": "reorder", "stage": "y", "order": ["io", "jo", "ii", "ji"]},
                  {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
                  {"m": "bind", "stage": "y", "axis": "jo", "to": "grid"},
                  {"m": "launch", "num_warps": warps, "num_stages": stages, "group_m": 8},
                  {"m": "compute_at", "stage": "acc", "at": ["y", "jo"]},
                  {"m": "split", "stage": "acc", "axis": "k", "size": "$BK"}]})


def usage_of(trace: Trace, opdef=GEMM, dims=DIMS) -> tuple[Usage, ...]:
    op = next(v for v in (opdef.op, *opdef.variants.values()) if v.name == trace.op)
    return TritonBackend().usage(lower(apply_trace(op, trace), dims))


def test_the_estimate_counts_stages_of_both_operand_tiles_and_the_accumulator_per_thread():
    (u,) = usage_of(gemm_trace(128, 256, 64, warps=8, stages=4))
    assert (u.kernel, u.stage, u.tile, u.stages) == ("k_y", "acc", (128, 256, 64), 4)
    assert u.shared_bytes == 4 * (128 * 64 + 64 * 256) * 2  # bf16 operands
    assert u.registers == 128 * 256 // (8 * 32)
    (u2,) = usage_of(gemm_trace(128, 128, 32, warps=2, stages=3))
    assert u2.shared_bytes == 2 * (128 * 32 + 32 * 128) * 2  # under 4 warps: a buffer fewer
    assert u2.registers == 256


def test_bulk_copied_operands_add_a_barrier_per_buffer_where_they_are_rendered():
    t = gemm_trace(128, 256, 64, 8, 3)
    bulk = Trace.from_dict({**t.to_dict(), "moves": [*t.to_dict()["moves"], {
        "m": "cache", "stage": "acc", "buffer": "W", "scope": "shared", "copy": "bulk"}]})
    (plain,), (tma,) = usage_of(t), usage_of(bulk)
    assert tma.shared_bytes == plain.shared_bytes + 3 * 8 == 147480  # the H200's ptxas
    # rows of 100 bf16 (200 bytes): pointer tiles at that shape class, no barriers
    odd = {"M": 256, "K": 64, "N": 100}
    assert usage_of(bulk, dims=odd)[0].shared_bytes == usage_of(t, dims=odd)[0].shared_bytes


def test_an_output_written_in_bulk_adds_its_staging_buffer_where_it_is_rendered():
    t = gemm_trace(128, 256, 64, 8, 4)
    moves = [*t.to_dict()["moves"], *({"m": "cache", "stage": "acc", "buffer": b,
                                        "scope": "shared", "copy": "bulk"} for b in "AW")]
    bulk = Trace.from_dict({**t.to_dict(), "moves": moves})
    write = Trace.from_dict({**t.to_dict(), "moves": [*moves, {
        "m": "cache", "stage": "y", "buffer": "y", "scope": "shared", "copy": "bulk",
        "parts": 2}]})
    (u,), (w,) = usage_of(bulk), usage_of(write)
    assert w.shared_bytes == u.shared_bytes + 128 * 128 * 2 == 229408  # the H200's ptxas
    # rows of 100 bf16 (200 bytes): pointer stores at that shape class, no staging
    odd = {"M": 256, "K": 64, "N": 100}
    assert usage_of(write, dims=odd)[0].shared_bytes == usage_of(bulk, dims=odd)[0].shared_bytes


def test_contractions_triton_stages_differently_get_no_estimate():
    f32 = LIBRARY["gemm"]  # f32 operands
    t = Trace.from_dict({**json.loads(gemm_trace(128, 128, 32, 4, 3).to_json()), "op": "gemm"})
    t = Trace.from_dict({**json.loads(t.to_json()), "moves": [
        m for m in json.loads(t.to_json())["moves"] if m.get("stage") != "acc"] + [
        {"m": "split", "stage": "y", "axis": "k", "size": "$BK"}]})
    assert usage_of(t, f32, f32.dims("gpu")) == ()
    di = LIBRARY["dot_interaction"]  # a Gram matrix: one operand, loaded once
    from kevolve.schedule.defaults import default_trace
    assert usage_of(default_trace(di.op, di.dims("gpu")), di, di.dims("gpu")) == ()
    sm = LIBRARY["softmax"]  # no contraction at all
    assert usage_of(default_trace(sm.op, sm.dims("gpu")), sm, sm.dims("gpu")) == ()


def test_over_a_limit_is_a_structured_error_that_says_what_to_change():
    big = usage_of(gemm_trace(128, 512, 64, warps=8, stages=4))
    with pytest.raises(MoveError) as e:
        check_fits(big, H200)
    assert e.value.code == "resources.shared_memory"
    assert "k_y" in e.value.message and "327680" in e.value.message
    assert "232448" in e.value.message and "num_stages" in e.value.hint
    spill = usage_of(gemm_trace(128, 128, 32, warps=2, stages=3))
    with pytest.raises(MoveError) as e:
        check_fits(spill, H200)
    assert e.value.code == "resources.registers" and "256 registers" in e.value.message
    assert "num_warps" in e.value.hint
    check_fits(usage_of(gemm_trace(128, 256, 64, warps=8, stages=4)), H200)
    check_fits(big + spill, {})  # no device: no limits, nothing held


def _archived_gemm_results(archive: str = "h200-archive.db"):
    """(trace JSON, verdict, message, diagnostics JSON) of each result, as archived."""
    got = json.loads(RESULTS.read_text())
    moves = got["moves"]
    return [(json.dumps({"version": 1, "op": "gemm_bias_gelu", "decisions": r["decisions"],
                         "moves": [moves[i] for i in r["moves"]]}, sort_keys=True),
             r["verdict"], r["message"], json.dumps(r["diagnostics"]))
            for r in got["archives"][archive]]


def _launch(tj: str) -> dict:
    return {k: v for m in json.loads(tj)["moves"] if m["m"] == "launch" for k, v in m.items()}


def test_the_estimate_matches_the_h200s_compiles_of_the_archived_gemm_candidates():
    """Never over the limit for a kernel that compiled (so no good candidate is skipped);
    ptxas's figure exactly for all but 16-wide K tiles (Triton pads those by a third); at
    least Triton's "Required" for every refused kernel under 32 warps (two persistent
    32-warp programs with K compiled in asked 64 KiB more than the estimate). A loop
    pipelined across tiles beside a bulk write holds 1 KiB more than counted (the archive's
    2 such kernels: persistent 128x256x64 programs, operands and output copied in bulk)."""
    compiled = refused = spilled = 0
    for tj, verdict, message, diag in _archived_gemm_results():
        t = Trace.from_json(tj)
        try:
            (u,) = usage_of(t)
        except MoveError:  # over the backend's tile limit: never compiled
            continue
        d = json.loads(diag)
        asked = re.search(r"shared memory, Required: (\d+), Hardware limit: (\d+)", message)
        if asked:
            need, limit = map(int, asked.groups())
            assert limit == H200["shared_bytes"], tj
            if _launch(tj).get("num_warps", 4) < 32:
                assert u.shared_bytes >= need > limit, tj
            refused += 1
        elif verdict == "ok" and "compiler.shared_bytes" in d:
            assert u.shared_bytes <= H200["shared_bytes"], tj
            across = _launch(tj).get("pipeline") == "across_tiles"
            if dict(t.decisions)["$BK"] >= 32:
                assert u.shared_bytes + (1024 if across else 0) == \
                    d["compiler.shared_bytes"], tj
            compiled += 1
            if u.registers > H200["registers_per_thread"]:
                assert d["compiler.spills"] > 0, tj
                spilled += 1
    assert compiled >= 330 and refused >= 14 and spilled >= 8  # 334, 15, 8 as committed


def test_a_program_whose_accumulator_takes_its_threads_whole_register_share_fails():
    """In every committed H200 gemm archive: ptxas ran out of registers (or the kernel
    spilled) exactly where the accumulator estimate takes all of each thread's share of
    the program's 65536 registers; the limit skips those, and no kernel that compiled
    without spilling."""
    share = H200["registers_per_program"]
    (wide,) = usage_of(gemm_trace(256, 256, 64, warps=16, stages=2))  # 128 KiB: fits
    with pytest.raises(MoveError) as e:
        check_fits((wide,), H200)
    assert "128 registers per thread" in e.value.message and "65536" in e.value.message
    assert "512 threads" in e.value.message and "num_warps" in e.value.hint
    caught = 0
    for db in ("h200-archive.db", "h200-gemm-fresh-archive.db", "h200-gemm-resident-archive.db"):
        for tj, _, message, diag in _archived_gemm_results(db):
            try:
                (u,) = usage_of(Trace.from_json(tj))
            except MoveError:
                continue
            short = "Insufficient registers" in (message or "")
            spills = json.loads(diag).get("compiler.spills", 0)
            if u.registers >= share // u.threads:
                assert short or spills > 0 or u.registers > 255, tj
                with pytest.raises(MoveError) as e:
                    check_fits((u,), {"registers_per_program": share})
                assert e.value.code == "resources.registers"
                caught += short or spills > 0
            else:
                assert not short, tj
                check_fits((u,), {"registers_per_program": share})
    assert caught >= 45


def _ctx(limits: dict, parents: tuple[Scored, ...]) -> ProposalContext:
    be = TritonBackend()
    default = gemm_trace(128, 256, 64, 8, 4).to_json()
    return ProposalContext("gemm_bias_gelu", op_text(GEMM.op), "triton", asdict(be.caps),
                           default, parents, parents[0], len(parents), 3, DIMS, True,
                           {"copy_bytes_per_s": 4.3e12, "matmul_flops": 6.9e14},
                           limits=limits)


def _over(trace_json: str) -> bool:
    try:
        check_fits(usage_of(Trace.from_json(trace_json)), H200)
        return False
    except MoveError:
        return True


def test_the_heuristic_proposer_skips_what_the_device_could_not_hold():
    """Parents at the edge of the H200's limits, as in its gemm search: without limits
    (off a GPU) a good share of the mutations are over them; with them, none, and the
    skips are counted by reason."""
    parents = tuple(Scored(gemm_trace(*p).to_json(), Result("ok", time_ms=0.4 + i / 100), i)
                    for i, p in enumerate([(128, 256, 64, 8, 4), (128, 256, 64, 4, 3),
                                           (128, 128, 64, 4, 4), (256, 128, 64, 8, 3)]))
    free = HeuristicProposer(seed=5).propose(_ctx({}, parents), 60)
    assert sum(_over(p.trace_json) for p in free) >= 5
    held = HeuristicProposer(seed=5)
    got = held.propose(_ctx(H200, parents), 60)
    assert len(got) >= 30 and not any(_over(p.trace_json) for p in got)
    assert held.skipped["resources.shared_memory"] > 0
    assert held.skipped["resources.registers"] > 0


def test_prove_runs_the_backends_legality_layer_too():
    """A tile over Triton's element limit is refused before any worker sees it."""
    op = GEMM.op
    with pytest.raises(MoveError) as e:
        prove(op, gemm_trace(1024, 1024, 64, 8, 2), DIMS, TritonBackend(), {})
    assert e.value.code == "backend.tile_too_large"
    prove(op, gemm_trace(128, 256, 64, 8, 4), DIMS, TritonBackend(), H200)


def test_resident_programs_counts_what_shared_memory_holds():
    big = usage_of(gemm_trace(128, 256, 64, warps=8, stages=4))  # 192 KiB
    small = usage_of(gemm_trace(128, 128, 64, warps=4, stages=3))  # 96 KiB
    assert resident_programs(big, H200) == 1
    assert resident_programs(small, H200) == 2
    assert resident_programs(big, {}) is None and resident_programs((), H200) is None


def _persistent(trace: Trace) -> int | None:
    return next((m.to_dict().get("persistent") for m in trace.moves
                 if m.to_dict()["m"] == "launch"), None)


def test_the_heuristic_proposer_starts_no_more_persistent_programs_than_fit():
    """A 128x256x64 parent with 4 persistent programs per multiprocessor, of which the H200
    holds one: every proposal whose last step was the persistent or pipeline mutation has
    no more programs per multiprocessor than its own estimate fits (4 stay possible off a
    GPU, where no limit is known)."""
    d = json.loads(gemm_trace(128, 256, 64, 8, 4).to_json())
    next(m for m in d["moves"] if m["m"] == "launch")["persistent"] = 4
    parents = (Scored(json.dumps(d), Result("ok", time_ms=0.4), 0),)

    def over(limits: dict) -> list[bool]:
        got = HeuristicProposer(seed=3).propose(_ctx(limits, parents), 80)
        out = []
        for p in got:
            t = Trace.from_json(p.trace_json)
            n = _persistent(t)
            if p.note.rsplit("+", 1)[-1] in ("persistent", "pipeline") and n:
                out.append(n > resident_programs(usage_of(t), H200))
        return out

    held, free = over(H200), over({})
    assert held and not any(held)
    assert any(free)
