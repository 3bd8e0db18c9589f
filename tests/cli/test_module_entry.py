"""`python -m kevolve` is the same command line as the `kevolve` script."""

import subprocess
import sys


def test_python_dash_m_kevolve_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "kevolve", "ops", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "softmax" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "kevolve", "run", "no_such_op"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
