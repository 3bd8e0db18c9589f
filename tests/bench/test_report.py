"""The HTML report: a Jinja2 template with autoescape, charts with alt text and log axes
where the data spans decades, a roofline per backend, and the page as a real browser
draws it (headless Chromium; skipped where none can be installed, failed under CI=true)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser

import pytest

from kevolve.bench import report

EVIL = "<script>alert(1)</script>"


def results() -> dict:
    """A small fabricated results set: three ops (one with a hostile name), one op failed,
    times spanning two decades, a second backend beside the suite's, a search history."""
    def row(op, floor_ms, eager, comp, kev, flops, nbytes, cuda=None, verdict="ok"):
        r = {"op": op, "floor_ms": floor_ms, "floor_flops": flops, "floor_bytes": nbytes,
             "eager_ms": eager, "compile_ms": comp, "kevolve_verdict": verdict,
             "eager_rounds_ms": [eager, eager * 1.01], "searched": 12, "within_5pct_at": 7}
        if verdict == "ok":
            r.update(kevolve_ms=kev, pct_floor=100 * floor_ms / kev, speedup_eager=eager / kev,
                     speedup_compile=comp / kev, kevolve_spread=0.004, compile_spread=0.01,
                     kevolve_rounds_ms=[kev, kev * 1.004], eager_pct_floor=100 * floor_ms / eager,
                     compile_pct_floor=100 * floor_ms / comp)
        else:
            r["kevolve_message"] = "max error 3.1 at [0, 7]"
        if cuda is not None:
            r.update(cuda_ms=cuda, cuda_verdict="ok")
        return r
    return {
        "suite": "ranking", "backend": "triton", "hardware": "gpu:Test GPU", "rounds": 2,
        "date": "2026-01-01 00:00:00 UTC", "toolchain": {"torch": "2.x"},
        "ceilings": {"copy_bytes_per_s": 4e12, "matmul_flops": 7e14},
        "geomean_speedup_compile": 1.5, "geomean_speedup_eager": 2.0,
        "history": {"softmax": [0.3, 0.2, 0.2, 0.13], EVIL: [1.0, 0.5]},
        "rows": [row("softmax", 0.126, 0.28, 0.153, 0.135, 3.4e8, 5.4e8, cuda=0.19),
                 row("gemm_bias_gelu", 0.387, 0.433, 0.434, 0.409, 2.75e11, 1.7e8, cuda=4.7),
                 row(EVIL, 0.06, 1.7, 0.39, 0.099, 2.4e8, 2.7e8),
                 row("jagged_sum", 0.39, 0.41, 0.41, None, 4.2e8, 1.7e9, verdict="wrong")],
    }


class Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))
        if tag == "script":
            self.scripts += 1


@pytest.fixture(scope="module")
def page() -> str:
    pytest.importorskip("matplotlib")
    return report.render_html(results())


def test_names_and_messages_are_escaped(page):
    assert EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    p = Images()
    p.feed(page)
    assert p.scripts == 0  # the page runs no script, least of all a result's


def test_every_chart_has_alt_text_and_the_rooflines_are_per_backend(page):
    p = Images()
    p.feed(page)
    assert len(p.images) >= 6
    for img in p.images:
        assert img["src"].startswith("data:image/png;base64,")
        assert len(img.get("alt", "")) > 40, img.get("alt")
    assert "<h2>Roofline: triton</h2>" in page and "<h2>Roofline: cuda</h2>" in page
    roof = next(i["alt"] for i in p.images if i["alt"].startswith("Roofline of the triton"))
    assert "logarithmic" in roof and "softmax" in roof and "jagged_sum" in roof  # not placed
    assert "max error 3.1" in page  # the failure says why


def test_axes_go_logarithmic_when_the_data_spans_decades():
    assert report.spans_decades([0.1, 0.5, 1.7])
    assert not report.spans_decades([0.1, 0.5, 0.9, None])
    page = report.render_html(results())
    assert "on a logarithmic axis" in page  # times from 0.06 to 1.7 ms


def test_roofline_points_are_intensity_and_achieved_rate():
    pts = dict((op, (x, y)) for op, x, y in report.roofline_points(results(), "kevolve"))
    x, y = pts["softmax"]
    assert x == pytest.approx(3.4e8 / 5.4e8) and y == pytest.approx(3.4e8 / 0.135e-3)
    assert "jagged_sum" not in pts  # no time: it failed


def test_without_matplotlib_the_report_says_so(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    page = report.render_html(results())
    assert "matplotlib is not installed" in page and "<img" not in page


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell"):
        if path := shutil.which(name):
            return path
    return None


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_report_in_a_headless_browser(tmp_path, page):
    exe = browser()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no Chromium: `make chromium` installs it")
        pytest.skip("no Chromium here (`make chromium` installs it where it can)")
    html = tmp_path / "report.html"
    html.write_text(page)
    shot = tmp_path / "report.png"
    out = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                          "--hide-scrollbars", "--window-size=1200,1600",
                          f"--screenshot={shot}", html.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert shot.is_file(), out.stderr[-2000:]
    assert png_size(shot.read_bytes()) == (1200, 1600)
    Image = pytest.importorskip("PIL.Image")
    im = Image.open(shot).convert("RGB")
    colours = im.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, table rules, charts: not blank
    dark = sum(n for n, (r, g, b) in colours if r + g + b < 200)
    assert dark > 2000  # text and plot lines were drawn
    top = im.crop((0, 0, 1200, 400)).getcolors(maxcolors=1 << 20)
    assert len(top) > 10  # the heading and summary, at the top of the page
