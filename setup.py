"""Package layout only; all metadata lives in pyproject.toml.

The templates live at the top of the repository (`templates/`, as the design lays out) and
ship inside the wheel as the package `kevolve.templates`. pyproject.toml alone cannot say
this together with automatic package discovery (`packages.find` never renames a folder, and
a `packages` list would have to name every subpackage by hand), so the mapping is here.
tests/test_packaging.py builds a wheel and checks that the templates and every module land.
"""

from setuptools import find_namespace_packages, setup

NOT_PACKAGES = ["__pycache__", "*.__pycache__"]
TEMPLATE_FILES = ("j2", "h", "hpp", "cuh", "json")  # the test fails on any other kind
KEVOLVE = find_namespace_packages(include=["kevolve", "kevolve.*"], exclude=NOT_PACKAGES)
# Template folders (templates/<backend>/) are listed too, so setuptools does not warn that
# they look importable; their files come from the kevolve.templates globs below.
TEMPLATES = ["kevolve.templates"] + [
    f"kevolve.templates.{p}" for p in find_namespace_packages(where="templates",
                                                              exclude=NOT_PACKAGES)]

setup(
    packages=KEVOLVE + TEMPLATES,
    package_dir={"kevolve.templates": "templates"},
    package_data={"kevolve.templates": [f"**/*.{ext}" for ext in TEMPLATE_FILES],
                  "kevolve.backends.notes": ["*.md"]},  # the LLM proposer's hardware notes
)
