"""The error tree: every class pickles with its attributes (workers send errors back), the
families hold the classes that moved into them, and the CLI maps each family to its exit."""

from __future__ import annotations

import pickle

import click
import pytest
from click.testing import CliRunner

from kevolve import errors
from kevolve.backends.registry import UnknownBackend
from kevolve.backends.triton.aot import AotError
from kevolve.backends.triton.bulk import BulkError
from kevolve.cli import KevolveGroup
from kevolve.ir.errors import InterpError, SpecError
from kevolve.schedule.errors import MoveError
from kevolve.search.proposers.llm.claude import ClaudeSetupError

ONE_OF_EACH = [
    errors.KevolveError("root"),
    errors.UserError("bad input"),
    errors.UnknownName("unknown op 'nope'; library ops: softmax"),
    errors.ShapeError("two presets given (small, gpu); give one"),
    errors.ArchiveError("a.db: not a kevolve archive"),
    errors.MissingExtra("needs Ray: pip install 'kevolve[distributed]'"),
    errors.SetupError("needs ANTHROPIC_API_KEY"),
    errors.CandidateError("it broke", "render", {"regs": 40}),
    errors.CompileError("x.c:3: error: expected ';'"),
    errors.LaunchError("RuntimeError: illegal address", "timing"),
    errors.WrongResult("y: 3 of 8 elements off", diagnostics={"max_error": 0.5}),
    errors.InternalError("plan has no kernels", stage="compile"),
    SpecError("no Op named 'x'", hint="use spec.py:y", loc="spec.py:3"),
    InterpError("missing input 'x'"),
    MoveError(move_index=2, code="schema.axis", message="no axis 'q'", hint="use i or j"),
    UnknownBackend("unknown backend 'tpu'; available: cpu"),
    ClaudeSetupError("the claude proposer needs ANTHROPIC_API_KEY"),
    AotError("ptxas failed (1): out of registers"),
    BulkError("a 3-byte row", hint="drop copy: bulk"),
]


@pytest.mark.parametrize("e", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_attributes(e):
    e.stage = "legality"  # what the pipeline adds to the error it lets through
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e)
    assert str(back) == str(e)
    assert back.args == e.args
    assert vars(back) == vars(e)
    assert back.stage == "legality"


@pytest.mark.parametrize("cls,family", [
    (SpecError, errors.UserError), (MoveError, errors.UserError),
    (InterpError, errors.UserError), (UnknownBackend, errors.UnknownName),
    (ClaudeSetupError, errors.SetupError), (AotError, errors.CompileError),
    (BulkError, errors.CandidateError), (errors.CompileError, errors.CandidateError),
])
def test_classes_sit_in_their_family(cls, family):
    assert issubclass(cls, family)


def test_unknown_name_is_still_a_key_error_without_quotes():
    from kevolve.ops import get

    with pytest.raises(KeyError) as info:
        get("nope")
    assert isinstance(info.value, errors.UnknownName)
    assert str(info.value).startswith("no op named 'nope'")


def _cli_raising(exc: BaseException):
    @click.group(cls=KevolveGroup)
    @click.option("--debug", is_flag=True)
    def group(debug):
        pass

    @group.command("go")
    def go():
        raise exc

    return group


@pytest.mark.parametrize("exc,code,text", [
    (errors.UnknownName("unknown op 'nope'"), 2, "kevolve: error: unknown op 'nope'"),
    (MoveError(0, "schema.axis", "no axis 'q'"), 2, "move 0: [schema.axis] no axis 'q'"),
    (errors.CompileError("x.c:3: error: expected ';'"), 1, "x.c:3: error: expected ';'"),
])
def test_cli_maps_families_to_exit_codes(exc, code, text):
    r = CliRunner().invoke(_cli_raising(exc), ["go"])
    assert r.exit_code == code, r.output
    assert text in r.output


@pytest.mark.parametrize("exc", [KeyError("stage"), errors.InternalError("a bug"),
                                 RuntimeError("a bug")])
def test_cli_lets_bugs_through_with_their_traceback(exc):
    r = CliRunner().invoke(_cli_raising(exc), ["go"])
    assert r.exception is exc  # not turned into "your mistake"
