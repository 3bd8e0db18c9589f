"""Every error kevolve raises on purpose, in three families that decide what happens next:

    KevolveError
    ├── UserError        the input is wrong: the CLI exits 2 with one paragraph
    │   ├── SpecError (ir.errors), MoveError (schedule.errors), InterpError (ir.errors)
    │   ├── ShapeError, ArchiveError, MissingExtra, SetupError
    │   └── UnknownName  an op, preset, dtype variant, backend or proposer that is not there
    ├── CandidateError   this kernel failed (the evaluator records it; the CLI exits 1 with the
    │   │                compiler's message)
    │   └── CompileError, LaunchError, WrongResult (+ backends' own subclasses)
    └── InternalError    a bug in kevolve: the CLI shows the traceback, always

Classes that describe their input precisely (SpecError, MoveError) live beside that input and
subclass from here. `stage` is set by the compile pipeline to the stage that raised
("legality" | "render" | "compile"); the evaluator's verdict is that stage. Every error
pickles with its attributes (workers send them back to the search process).
"""

from __future__ import annotations

__all__ = ["KevolveError", "UserError", "UnknownName", "ShapeError", "ArchiveError",
           "MissingExtra", "SetupError", "CandidateError", "CompileError", "LaunchError",
           "WrongResult", "InternalError"]


def _rebuild(cls, args, state):
    e = cls.__new__(cls, *args)
    e.args = args
    e.__dict__.update(state)
    return e


class KevolveError(Exception):
    """The root of kevolve's errors."""

    stage: str | None = None  # the pipeline stage that raised, where one did

    def __reduce__(self):
        # By args and attributes, never through __init__: subclasses take other arguments
        # (dataclass fields, keywords) than the ones Exception stores in args.
        return _rebuild, (type(self), self.args, dict(self.__dict__))


# -- the user's input ---------------------------------------------------------------------


class UserError(KevolveError):
    """The input is wrong (a spec, a trace, a name, a file, a missing package): the message
    says what and where; the CLI exits 2 with it."""


class UnknownName(UserError, KeyError):
    """A name that is not there: an op, shape preset, dtype variant, backend or proposer. Still
    a KeyError (and so a LookupError) for callers that catch one."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class ShapeError(UserError, ValueError):
    """A --shape argument that names no preset and is not NAME=VAL."""


class ArchiveError(UserError):
    """The archive (or a file to merge or import) is missing, foreign, corrupt, newer than
    this kevolve, locked for too long, or malformed. The message names the file."""


class MissingExtra(UserError, ImportError):
    """An optional package is not installed; the message names the pip extra."""


class SetupError(UserError, RuntimeError):
    """The environment lacks what a feature needs (an API key, a device)."""


# -- one candidate kernel -----------------------------------------------------------------


class CandidateError(KevolveError):
    """This kernel failed: it did not compile, crashed at launch, or computed wrong values.
    `diagnostics` carries what the evaluator records with the failure."""

    def __init__(self, message: str = "", stage: str | None = None,
                 diagnostics: dict | None = None):
        super().__init__(message)
        if stage is not None:
            self.stage = stage
        self.diagnostics = diagnostics or {}

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class CompileError(CandidateError, RuntimeError):
    """The generated source did not compile; the message is the compiler's."""

    stage = "compile"


class LaunchError(CandidateError):
    """The kernel raised when it was called."""


class WrongResult(CandidateError):
    """The kernel's outputs differ from the reference (or it wrote its inputs)."""

    stage = "correctness"


# -- a bug --------------------------------------------------------------------------------


class InternalError(KevolveError):
    """Something kevolve did not expect: a bug. Raised from the exception it wraps."""

    def __init__(self, message: str = "", stage: str | None = None):
        super().__init__(message)
        if stage is not None:
            self.stage = stage
