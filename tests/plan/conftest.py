"""The plan tests run backends through the shared checks of tests/backends (compare, NaN
outputs) and their own random-op helpers (specgen, opcheck) beside this file."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parent / "backends"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
