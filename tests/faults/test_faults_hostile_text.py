"""Text from an archive, a spec file, a trace file or an LLM answer is data: it never
drives the terminal, never becomes code in a generated source or module, and a trace that
does not fit its op is an error. Plus the two hygiene items: the Ray executor listens on
localhost unless told otherwise, and every search writes its `runs` row."""

from __future__ import annotations

import ast
import json
import sqlite3
import types

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kevolve.archive import Archive
from kevolve.cli import main
from kevolve.evaluate.job import Result
from kevolve.ops import LIBRARY
from kevolve.schedule import MoveError, Trace, default_trace

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
ESC = "\x1b[2J\x1b]0;owned\x07\r\x00"


def trace_json() -> str:
    return default_trace(SOFTMAX.op_for(SMALL), SOFTMAX.dims(SMALL)).to_json()


def test_replay_prints_no_raw_escape_sequences(tmp_path):
    db = tmp_path / "a.db"
    with Archive(db) as a:
        cid, _ = a.add_candidate(a.op_id(SOFTMAX.op_for(SMALL)), trace_json(),
                                 proposer="heuristic" + ESC, note="note" + ESC)
        a.add_result(cid, "cpu:x" + ESC, "cpu", {}, Result("ok", time_ms=1.0,
                                                            message="msg" + ESC),
                     shape=SMALL, seeds=[0])
    r = CliRunner().invoke(main, ["replay", str(cid), "--no-eval", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output and "\r" not in r.output
    assert "\\x1b[2J" in r.output  # shown, escaped


def test_show_schedule_exits_2_on_a_trace_that_does_not_fit(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"version": 1, "op": "softmax",
                               "moves": [{"m": "inline", "stage": "nope"}]}))
    for extra in ((), ("--json",)):
        r = CliRunner().invoke(main, ["show", "softmax", "--schedule", str(bad), *extra])
        assert r.exit_code == 2, r.output
        assert "unknown_stage" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("name", ['y;system("id");//', "a b", "*/ int x; /*", "1st", "",
                                  "é", "x" * 65, "a\nb"])
def test_spec_names_must_be_identifiers(tmp_path, name):
    spec = tmp_path / "spec.py"
    spec.write_text("from kevolve.ir.builder import axes, compute, dims, f32, input, op\n"
                    "N = dims('N')\nx = input('x', (N,), f32)\n(i,) = axes('i', N)\n"
                    f"twice = op({name!r}, inputs=[x], outputs=[compute('y', (i,), x[i] * 2)])\n")
    r = CliRunner().invoke(main, ["lower", f"{spec}:twice", "--backend", "cpu"])
    assert r.exit_code == 2, r.output
    assert "spec.py:5" in r.output and "is not an identifier" in r.output


NAMES = st.text(min_size=1, max_size=12).filter(lambda s: not s.isidentifier() or
                                                not s.isascii())


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["op", "input", "stage", "axis", "dim"]), name=NAMES)
def test_no_hostile_name_reaches_a_template(kind, name):
    if kind in ("dim", "axis"):  # (these split their argument at whitespace: several names)
        name = "".join(name.replace(",", " ").split())
        assume(name and not (name.isidentifier() and name.isascii()))
    """Every kind of name a spec gives is checked when the op is built: a name that is not
    an ASCII identifier is a SpecError before any backend renders anything."""
    from kevolve.ir.builder import axes, compute, dims, f32, input, op
    from kevolve.ir.errors import SpecError

    with pytest.raises(SpecError):
        N = dims(name if kind == "dim" else "N")
        x = input(name if kind == "input" else "x", (N,), f32)
        (i,) = axes(name if kind == "axis" else "i", N)
        op(name if kind == "op" else "twice", inputs=[x],
           outputs=[compute(name if kind == "stage" else "y", (i,), x[i] * 2.0)])


def _program(text: str) -> str:
    """A module's code with every string constant blanked: two modules that differ only in
    the text of their literals have the same program."""
    tree = ast.parse(text)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            n.value = ""
    return ast.dump(tree)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=40) | st.sampled_from(['"""', "'''", "\\", "\n)\nimport os\n",
                                                    ESC, '"; import os; "', "{{ x }}"]))
def test_hostile_archive_text_exports_the_same_program(text):
    from kevolve.export.torch_op import module_text

    def rec(hw):
        return {"op": "softmax", "shape": SMALL, "trace_json": trace_json(), "backend": "cpu",
                "candidate_id": 1, "hardware": hw,
                "result": types.SimpleNamespace(time_ms=0.5, baseline_ms=1.0)}
    plain = module_text(rec("cpu:plain"), "a.db", "m")
    hostile = module_text(rec(text), text, "m")
    assert _program(hostile) == _program(plain)


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(17, 3000), where=st.sampled_from(["arg", "decision", "move"]))
def test_a_deeply_nested_answer_is_a_structured_error(depth, where):
    deep: list = []
    x = deep
    for _ in range(depth):
        x.append([])
        x = x[0]
    d = {"version": 1, "op": "softmax", "moves": [{"m": "inline", "stage": "e"}],
         "decisions": {}}
    if where == "arg":
        d["moves"][0]["stage"] = deep
    elif where == "decision":
        d["decisions"]["$A"] = deep
    else:
        d["moves"].append(deep)
    with pytest.raises(MoveError) as e:
        Trace.from_dict(d)
    assert e.value.code.startswith("schema.")


def test_lower_with_a_deeply_nested_trace_file_exits_2(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('{"version": 1, "op": "softmax", "moves": ' + "[" * 20000 + "]" * 20000 + "}")
    r = CliRunner().invoke(main, ["lower", "softmax", "--backend", "cpu", "--schedule", str(f)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output


def test_the_ray_executor_listens_on_localhost_unless_told(monkeypatch):
    from kevolve.evaluate import executors

    seen = {}

    class FakeRay(types.SimpleNamespace):
        def is_initialized(self):
            return False

        def init(self, **kw):
            seen.update(kw)

        def remote(self, f):
            return types.SimpleNamespace(options=lambda **o: f)

    monkeypatch.setattr(executors, "_ray", lambda: FakeRay())
    executors.RayExecutor()
    assert seen["_node_ip_address"] == "127.0.0.1" and seen["dashboard_host"] == "127.0.0.1"
    seen.clear()
    executors.RayExecutor(host="10.0.0.5")
    assert seen["_node_ip_address"] == "10.0.0.5"


def test_every_search_writes_its_runs_row(tmp_path):
    from kevolve.search import SearchConfig, evolve

    db = tmp_path / "a.db"
    evolve(SearchConfig("softmax", "cpu", budget=1, shape="small", db=str(db), threads=1,
                        repeat=3, timeout_s=600))
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT backend, settings, finished, status FROM runs").fetchall()
    assert len(rows) == 1, rows  # before: the table stayed empty
    backend, settings_json, finished, status = rows[0]
    assert backend == "cpu" and status == "done" and finished is not None
    assert json.loads(settings_json)["budget"] == 1


