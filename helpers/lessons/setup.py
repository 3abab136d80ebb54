"""Environment check of notebook 00 §1 (环境检查): Python and the installed packages against requirements.txt.

Reads ``requirements.txt`` (UTF-8, as every file of the course) and compares each package's installed version
with its range using ``packaging`` (installed with pip and jupyterlab). Nothing here talks to the network, so
the check also tells a workshop whether a machine is ready to run offline.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"
MIN_PYTHON = (3, 10)


@dataclass(frozen=True, slots=True)
class PackageCheck:
    """A line of requirements.txt: the range asked for, the version installed (None: missing), the verdict."""

    name: str
    required: str
    installed: str | None

    @property
    def ok(self) -> bool:
        if self.installed is None:
            return False
        return SpecifierSet(self.required).contains(Version(self.installed), prereleases=True)


def read_requirements(path: str | Path = REQUIREMENTS) -> list[Requirement]:
    """The requirements in ``path``, skipping comments, blank lines and pip options (``-c ...``)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [Requirement(line.split("#", 1)[0].strip()) for line in lines
            if line.split("#", 1)[0].strip() and not line.lstrip().startswith("-")]


def check_packages(path: str | Path = REQUIREMENTS) -> list[PackageCheck]:
    """Installed version of every requirement, in file order."""
    checks = []
    for requirement in read_requirements(path):
        try:
            installed: str | None = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            installed = None
        checks.append(PackageCheck(requirement.name, str(requirement.specifier), installed))
    return checks


def python_ok(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> bool:
    """True when this Python is at least 3.10 (pyproject's ``requires-python``)."""
    return version >= MIN_PYTHON


def package_summary(checks: list[PackageCheck]) -> str:
    """One line when every package is fine, else a line per package to fix (notebook 00 §1)."""
    problems = [c for c in checks if not c.ok]
    if not problems:
        return f"all {len(checks)} packages in requirements.txt are installed, in range"
    lines = [f"{len(problems)} of {len(checks)} packages need fixing:"]
    lines += [f"  {c.name}: {'not installed' if c.installed is None else 'installed ' + c.installed}"
              f" (required {c.required or 'any version'})" for c in problems]
    return "\n".join(lines)

