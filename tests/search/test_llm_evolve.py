"""A search with `--proposer llm --transport command` from the command line: the agent's
candidates are evaluated, each prompt is archived and linked to what it produced,
`kevolve show-prompt` prints what the model saw and `kevolve history --by proposer` groups
progress by proposer."""

from __future__ import annotations

import json
import shlex
import sys

from click.testing import CliRunner

from kevolve.cli import main
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
BASE = json.loads(default_trace(SOFTMAX.op, SOFTMAX.dims("small")).to_json())["moves"]
AGENT = r'''
import json, sys
req = json.load(sys.stdin)
base = json.loads(sys.argv[1])
traces = [{"moves": base + [{"m": "reduction", "stage": "s", "strategy": "online"}],
           "reason": "one pass"},
          {"moves": base + [{"m": "split", "stage": "y", "axis": "j", "size": "$BN",
                             "into": ["jo", "ji"]}], "decisions": {"$BN": 8},
           "reason": "tile the row"}]
print(json.dumps({"traces": traces[:req["n"]]}))
'''


def test_evolve_with_a_command_agent_archives_prompts(tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    db = str(tmp_path / "a.db")
    cmd = shlex.join([sys.executable, str(agent), json.dumps(BASE)])
    run = CliRunner().invoke(main, [
        "evolve", "softmax", "-b", "cpu", "--shape", "small", "--budget", "4", "--threads",
        "1", "--db", db, "--proposer", "llm", "--transport", "command", "--command", cmd,
        "--temperature", "0.2", "--seed", "3", "--workers", "2", "--json"])
    assert run.exit_code == 0, run.output
    summ = json.loads(run.stdout)
    assert summ["evaluated"] == 4 and "refused" in summ
    hist = CliRunner().invoke(main, ["history", "softmax", "--db", db, "--json"])
    rows = json.loads(hist.stdout)
    agent_rows = [r for r in rows if r["proposer"] == "llm:command"]
    assert agent_rows, rows
    cand = agent_rows[0]["candidate_id"]
    shown = CliRunner().invoke(main, ["show-prompt", str(cand), "--db", db, "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    (p,) = doc["prompts"][:1]
    assert p["transport"] == "command" and p["temperature"] == 0.2
    assert cand in p["candidates"] and p["input_tokens"] > 0
    assert "# Operator softmax" in p["prompt"][1]["content"]
    text = CliRunner().invoke(main, ["show-prompt", str(cand), "--db", db])
    assert "over command" in text.output and "# Operator softmax" in text.output
    assert "one pass" in text.output or "tile the row" in text.output  # the answer
    by = CliRunner().invoke(main, ["history", "softmax", "--db", db, "--by", "proposer",
                                   "--json"])
    groups = {g["proposer"]: g for g in json.loads(by.stdout)}
    assert groups["llm:command"]["calls"] >= 1 and groups["seed"]["candidates"] == 1
    assert sum(g["candidates"] for g in groups.values()) == len(rows)
    seed_cand = [r for r in rows if r["proposer"] == "seed"][0]["candidate_id"]
    none = CliRunner().invoke(main, ["show-prompt", str(seed_cand), "--db", db])
    assert none.exit_code == 0 and "no model saw a prompt" in none.output
    missing = CliRunner().invoke(main, ["show-prompt", "999", "--db", db])
    assert missing.exit_code == 2 and "no candidate 999" in missing.output


def test_llm_without_its_settings_exits_2(tmp_path, monkeypatch):
    monkeypatch.delenv("KEVOLVE_OPENAI_MODEL", raising=False)
    run = CliRunner().invoke(main, ["evolve", "softmax", "-b", "cpu", "--shape", "small",
                                    "--db", str(tmp_path / "a.db"), "--proposer", "llm",
                                    "--transport", "openai"])
    assert run.exit_code == 2 and "KEVOLVE_OPENAI_MODEL" in run.output


def test_show_prompt_preview_gives_the_prompt_and_its_size(tmp_path):
    run = CliRunner().invoke(main, ["show-prompt", "--preview", "softmax", "-b", "cpu",
                                    "--db", str(tmp_path / "none.db"), "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert "- split(stage:name" in doc["system"] and "# Operator softmax" in doc["user"]
    assert "static void k_y" in doc["user"]  # the default's kernel, from its first line
    s = doc["sizes"]
    assert s["total_chars"] == s["system_chars"] + s["user_chars"] + s["tool_chars"]
    assert s["tool_share"] < 0.15 and s["approx_tokens"] == (s["total_chars"] + 3) // 4
    bad = CliRunner().invoke(main, ["show-prompt", "--preview", "softmax", "--shape", "huge",
                                    "--db", str(tmp_path / "none.db")])
    assert bad.exit_code == 2 and "presets" in bad.output
    assert CliRunner().invoke(main, ["show-prompt"]).exit_code == 2
