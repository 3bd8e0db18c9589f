"""The helpers shared by the backend tests (backend_checks.py, gpu_support.py) live here,
beside the per-backend folders (cpu/, cuda/, triton/, ...) whose tests import them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
