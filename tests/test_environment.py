"""The environment check of notebook 00 reads requirements.txt and judges versions by their ranges."""
from __future__ import annotations

from pathlib import Path

from helpers import PackageCheck, check_packages, package_summary, python_ok, read_requirements


def test_requirements_are_parsed_without_comments_or_options(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    text = "# 注释\n-c constraints.txt\nnumpy>=1.26,<3  # numbers\n\nopenai>=1.40,<4\n"
    req.write_text(text, encoding="utf-8")
    assert [r.name for r in read_requirements(req)] == ["numpy", "openai"]


def test_versions_are_judged_by_the_range() -> None:
    assert PackageCheck("numpy", ">=1.26,<3", "2.1.0").ok
    assert not PackageCheck("numpy", ">=1.26,<3", "3.0.0").ok
    assert not PackageCheck("numpy", ">=1.26,<3", None).ok


def test_a_missing_package_is_reported(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("numpy>=1\nsurely-not-installed-lab-pkg>=1\n", encoding="utf-8")
    checks = check_packages(req)
    assert [c.ok for c in checks] == [True, False] and checks[1].installed is None


def test_python_version_floor() -> None:
    assert python_ok((3, 10, 0)) and not python_ok((3, 9, 18))


def test_the_summary_is_one_line_when_all_is_well_and_names_each_problem() -> None:
    fine = PackageCheck("numpy", ">=1.26,<3", "2.1.0")
    assert package_summary([fine, fine]) == "all 2 packages in requirements.txt are installed, in range"
    report = package_summary([fine, PackageCheck("openai", ">=1.40", None),
                              PackageCheck("pandas", "<2", "2.2.0")]).splitlines()
    assert report == ["2 of 3 packages need fixing:", "  openai: not installed (required >=1.40)",
                      "  pandas: installed 2.2.0 (required <2)"]
