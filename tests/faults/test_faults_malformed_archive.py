"""Archives that are valid SQLite but hold rows kevolve did not write, and deeply nested
JSON in traces: every command that reads them exits 2 with one paragraph naming the
archive (or 0 where the row does not matter to it), never a traceback. The named cases
are the ones that ended in a traceback before; the hypothesis test feeds the same commands
random hostile values in every JSON and number column."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kevolve.archive import Archive
from kevolve.cli import main
from kevolve.evaluate.job import Result
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
HW = "cpu:test:1t"
DEEP = "[" * 5000 + "]" * 5000


def make(path: Path) -> None:
    with Archive(path) as a:
        oid = a.op_id(SOFTMAX.op_for(SMALL))
        cid, _ = a.add_candidate(oid, default_trace(SOFTMAX.op_for(SMALL),
                                                    SOFTMAX.dims(SMALL)).to_json(),
                                 proposer="heuristic", note="seed")
        a.add_result(cid, HW, "cpu", {"cc": "gcc"}, Result("ok", time_ms=0.5, times_ms=(0.5,),
                                                           max_error=1e-7,
                                                           diagnostics={"stage": None}),
                     run_hash="abc", shape=SMALL, seeds=[0, 1, 2])
        a.set_ceiling(HW, "copy_bytes_per_s", 1e10)
        rid = a.start_run(oid, "cpu", HW, {"budget": 1})
        a.finish_run(rid)


def poke(path: Path, table: str, column: str, value) -> None:
    c = sqlite3.connect(path)
    try:
        c.execute(f"UPDATE {table} SET {column} = ?", (value,))
        c.commit()
    finally:
        c.close()


COMMANDS = [
    ("archive", "info", "--json"),
    ("archive", "info"),
    ("best", "softmax", "--backend", "cpu", "--json"),
    ("history", "softmax"),
    ("replay", "1", "--no-eval"),
]


def run_all(db: Path, tmp: Path) -> list[tuple[tuple, int, str]]:
    """Every reading command on the archive: (args, exit code, output) each; a traceback
    (an exception that escaped the command) fails the test at once."""
    out = []
    cmds = COMMANDS + [("archive", "export", str(tmp / "x.jsonl")),
                       ("archive", "merge", str(db), "--db", str(tmp / "other.db"))]
    for args in cmds:
        full = list(args) + ([] if "merge" in args else ["--db", str(db)])
        r = CliRunner().invoke(main, full)
        assert r.exception is None or isinstance(r.exception, SystemExit), \
            (args, repr(r.exception), r.output[-2000:])
        assert "Traceback" not in r.output, (args, r.output[-2000:])
        assert r.exit_code in (0, 1, 2), (args, r.exit_code, r.output)
        if r.exit_code == 2:
            err = r.output.strip().splitlines()
            assert err and err[-1].startswith("kevolve: error:"), (args, r.output)
        out.append((args, r.exit_code, r.output))
        (tmp / "other.db").unlink(missing_ok=True)
    return out


CASES = {
    "times_ms-not-json": ("results", "times_ms", "[1,"),
    "times_ms-an-object": ("results", "times_ms", '{"a": 1}'),
    "times_ms-strings": ("results", "times_ms", '["fast"]'),
    "diagnostics-a-list": ("results", "diagnostics", "[1, 2]"),
    "time_ms-text": ("results", "time_ms", "fast"),
    "shape-deeply-nested": ("results", "shape", DEEP),
    "seeds-strings": ("results", "seeds", '["a"]'),
    "verdict-a-number": ("results", "verdict", 5),
    "trace-deeply-nested": ("candidates", "trace_json", '{"moves": ' + DEEP + "}"),
    "ceiling-not-json": ("hardware", "value", "nope"),
    "run-settings-deep": ("runs", "settings", DEEP),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_row_is_an_error_not_a_traceback(tmp_path, case):
    db = tmp_path / "a.db"
    make(db)
    poke(db, *CASES[case])
    got = run_all(db, tmp_path)
    assert any(code == 2 for _, code, _ in got), got  # someone reads that row and says so


# what SQLite can store: a larger int is refused by sqlite3 before it reaches kevolve
SQL_INT = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JUNK = st.one_of(
    st.text(max_size=30), SQL_INT, st.floats(allow_nan=True),
    st.sampled_from(["[1,", "{", "null", "[]", "{}", '"x"', "1e999", DEEP, '{"a": ' + DEEP + "}",
                     '[{"m": "inline"}]', '{"version": 1, "moves": "x"}', "\x1b[31m\x07"]),
    st.recursive(st.none() | st.booleans() | SQL_INT | st.text(max_size=5),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c,
                                                                      max_size=3),
                 max_leaves=8).map(json.dumps),
)
TARGETS = [("results", c) for c in ("times_ms", "diagnostics", "shape", "seeds", "toolchain",
                                     "time_ms", "verdict", "message", "max_error", "hardware")] \
    + [("candidates", c) for c in ("trace_json", "note", "proposer")] \
    + [("hardware", "value"), ("runs", "settings"), ("ops", "name")]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(target=st.sampled_from(TARGETS), value=JUNK)
def test_hostile_rows_never_end_in_a_traceback(tmp_path_factory, target, value):
    tmp = tmp_path_factory.mktemp("fuzz")
    db = tmp / "a.db"
    make(db)
    poke(db, *target, value)
    run_all(db, tmp)
