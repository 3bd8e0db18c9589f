"""The exported module's text: archive text (hardware names, traces, paths) reaches it only
as Python literals, so a hostile string stays a string and the module keeps working."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kevolve.export.torch_op import docstring, module_text, source_literal
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
TUNED = {"M": 8, "N": 64}
# Ends every kind of string literal, then tries to run code and reopen a docstring.
HOSTILE = 'gpu """ \'\'\' \\\nraise RuntimeError("escaped")\nr"""\r\x00\x0b tail "'


@given(st.text())
def test_docstring_literal_holds_any_text(text):
    assert ast.literal_eval(docstring(text)) == text


@given(st.text())
def test_source_literal_holds_any_text(text):
    assert ast.literal_eval(source_literal(text)) == text


def test_plain_text_stays_a_raw_readable_docstring():
    assert docstring("y = x[i, j] \\ 2\n") == 'r"""y = x[i, j] \\ 2\n"""'
    assert docstring('a """ b').startswith('"""')


def test_hostile_archive_text_stays_text_in_the_module(tmp_path):
    torch = pytest.importorskip("torch")
    trace = json.loads(default_trace(SOFTMAX.op, TUNED).to_json())
    rec = {"op": "softmax", "shape": TUNED, "trace_json": json.dumps(trace), "backend": "cpu",
           "candidate_id": 1, "hardware": HOSTILE,
           "result": SimpleNamespace(time_ms=0.5, baseline_ms=1.0)}
    text = module_text(rec, HOSTILE, "hostile_kernel", "kevolve_hostile::softmax")
    path = tmp_path / "hostile_kernel.py"
    path.write_text(text)

    spec = importlib.util.spec_from_file_location("hostile_kernel", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules["hostile_kernel"] = m
    spec.loader.exec_module(m)  # a string that broke out would raise here

    assert m.HARDWARE == HOSTILE and m.ARCHIVE == HOSTILE
    assert m.MEASURED == f"0.5 ms median, 2.00x torch eager on {HOSTILE}"
    assert "candidate 1 of op" in m.__doc__
    assert HOSTILE not in m.__doc__  # archive text is only ever a literal, never prose
    x = torch.randn(8, 64)
    torch.testing.assert_close(m.softmax(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


def test_a_hostile_decision_name_is_refused_before_export():
    from kevolve.schedule import MoveError

    trace = json.loads(default_trace(SOFTMAX.op, TUNED).to_json())
    trace["decisions"] = {"$" + HOSTILE: 3}  # an LLM's answer could carry this
    rec = {"op": "softmax", "shape": TUNED, "trace_json": json.dumps(trace), "backend": "cpu",
           "candidate_id": 1, "hardware": "cpu",
           "result": SimpleNamespace(time_ms=0.5, baseline_ms=1.0)}
    with pytest.raises(MoveError) as e:
        module_text(rec, "a.db", "m", None)
    assert e.value.code == "schema.decisions"


def test_the_template_environment_refuses_unescaped_text():
    """A template that wrote archive text without a literal filter fails to render."""
    from kevolve.export.torch_op import UnsafeText, env

    with pytest.raises(UnsafeText):
        env().from_string("X = {{ v }}").render(v=HOSTILE)
    assert env().from_string("X = {{ v | py }}").render(v=HOSTILE) == f"X = {HOSTILE!r}"
