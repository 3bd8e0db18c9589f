"""Moved to kevolve.backends.usage; this re-export stays until the restructuring's last step."""
from .usage import Usage, check_fits, resident_programs  # noqa: F401
