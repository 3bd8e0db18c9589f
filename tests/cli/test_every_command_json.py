"""Every `kevolve` command (kevolve.commands.COMMANDS, and each `archive` subcommand) with
--json: exit 0 and stdout one JSON document, nothing else there. Adding a command without
a case here fails test_every_command_has_a_json_case. Also: --help of each, piped output
that is never cut, and `best --trace` round-tripping into --schedule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.cli import main
from kevolve.commands import COMMANDS

REPO = Path(__file__).resolve().parents[2]
ARCHIVE_SUBCOMMANDS = ("info", "merge", "export", "import", "verify")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """An archive with a short search of softmax on the cpu backend."""
    d = tmp_path_factory.mktemp("json")
    r = CliRunner().invoke(main, ["evolve", "softmax", "-b", "cpu", "--shape", "small",
                                  "--budget", "2", "--threads", "1", "--db", str(d / "a.db"),
                                  "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["db"] == str(d / "a.db")
    return d


def cases(d: Path) -> dict[str, list[str]]:
    db = ["--db", str(d / "a.db")]
    return {
        "ops": ["ops"],
        "show": ["show", "softmax"],
        "demo": ["demo", "--preset", "small", "--repeat", "1"],
        "lower": ["lower", "softmax", "-b", "cpu", "--shape", "small"],
        "run": ["run", "softmax", "-b", "cpu", "--shape", "small", "--repeat", "1",
                "--threads", "1"],
        "backends": ["backends"],
        "evolve": ["evolve", "softmax", "-b", "cpu", "--shape", "small", "--budget", "1",
                   "--threads", "1", "--resume", *db],
        "best": ["best", "softmax", "-b", "cpu", *db],
        "history": ["history", "softmax", *db],
        "archive info": ["archive", "info", *db],
        "archive export": ["archive", "export", str(d / "a.jsonl"), *db],
        "archive import": ["archive", "import", str(d / "a.jsonl"), "--db", str(d / "b.db")],
        "archive merge": ["archive", "merge", str(d / "a.db"), "--db", str(d / "c.db")],
        "archive verify": ["archive", "verify", *db],
        "export": ["export", "softmax", "-b", "cpu", "-o", str(d / "softmax_cpu.py"), *db],
        "replay": ["replay", "1", "--no-time", *db],
        "show-prompt": ["show-prompt", "1", *db],
        "bench": ["bench", "--suite", "cpu", "--ops", "softmax", "--from-archive",
                  "--rounds", "1", "--no-compile", "--threads", "1", "--out",
                  str(d / "out"), *db],
        "conform": ["conform", "--ops", "aten.relu,aten.sum_last", "-b", "cpu"],
    }


def test_every_command_has_a_json_case(tmp_path):
    from kevolve.commands.archive import command as archive

    names = set(cases(tmp_path))
    assert {n for n in names if " " not in n} | {"archive"} == set(COMMANDS)
    assert {n.split()[1] for n in names if n.startswith("archive ")} == \
        set(archive.commands) == set(ARCHIVE_SUBCOMMANDS)


ORDER = ["ops", "show", "demo", "lower", "run", "backends", "evolve", "best", "history",
         "archive info", "archive export", "archive import", "archive merge", "export",
         "replay", "bench", "conform"]


@pytest.mark.parametrize("name", ORDER)
def test_json_is_the_only_thing_on_stdout(work, name):
    r = CliRunner().invoke(main, [*cases(work)[name], "--json"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)  # one document: json.loads refuses trailing text
    assert doc
    assert "\x1b[" not in r.stderr  # no progress bar drawn into a pipe


@pytest.mark.parametrize("name", ORDER)
def test_help(name):
    r = CliRunner().invoke(main, [*name.split(), "--help"])
    assert r.exit_code == 0 and "--json" in r.output


def test_best_trace_round_trips_into_schedule(work, tmp_path):
    db = ["--db", str(work / "a.db")]
    r = CliRunner().invoke(main, ["best", "softmax", "-b", "cpu", "--trace", *db])
    assert r.exit_code == 0, r.output
    t = tmp_path / "t.json"
    t.write_text(r.stdout)
    best = json.loads(CliRunner().invoke(main, ["best", "softmax", "-b", "cpu", "--json",
                                                *db]).stdout)
    assert json.loads(r.stdout) == best["trace"]
    lowered = CliRunner().invoke(main, ["lower", "softmax", "-b", "cpu", "--shape", "small",
                                        "--schedule", str(t), "--json"])
    assert lowered.exit_code == 0, lowered.output
    run = CliRunner().invoke(main, ["run", "softmax", "-b", "cpu", "--shape", "small",
                                    "--schedule", str(t), "--json", "--repeat", "1",
                                    "--threads", "1"])
    assert run.exit_code == 0 and json.loads(run.stdout)["verdict"] == "ok", run.output
    shown = CliRunner().invoke(main, ["show", "softmax", "--schedule", str(t), "--json"])
    assert json.loads(shown.stdout)["schedule"] == best["trace"]


def test_piped_output_is_never_cut_at_80_columns(work):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TERM": "xterm"}
    out = subprocess.run([sys.executable, "-m", "kevolve.cli", "history", "softmax", "--db",
                          str(work / "a.db")], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "kevolve.cli", "ops"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(map(len, lines)) > 80
    assert not any(line.rstrip().endswith("…") for line in lines)
    # each op's inputs on its row, whole: nothing wrapped onto a continuation line
    row = next(line for line in lines if "│ embedding_bag " in line)
    assert "table: f32[V, D]" in row, row


def test_relative_archive_paths_are_shown_resolved(work, monkeypatch):
    monkeypatch.chdir(work)
    r = CliRunner().invoke(main, ["archive", "info", "--db", "a.db", "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["archive", "info", "--db", "a.db"])
    assert f"archive {work / 'a.db'} " in r.output
    r = CliRunner().invoke(main, ["archive", "info"], env={"KEVOLVE_DB": str(work / "a.db")})
    assert f"archive {work / 'a.db'} " in r.output


def test_progress_bars_only_on_a_terminal_and_never_under_json(monkeypatch):
    from rich.console import Console

    from kevolve.commands._common import progress

    assert progress(as_json=True).disable and progress(as_json=False).disable  # a pipe here
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    assert not progress(as_json=False).disable and progress(as_json=True).disable
