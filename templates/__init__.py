"""kevolve's Jinja templates, one per file: `<backend>/*.j2`, plus `common/` for all backends.

This folder ships inside the wheel as the package `kevolve.templates` (see setup.py); find
it at run time with `kevolve.assets.templates_dir()`.
"""
