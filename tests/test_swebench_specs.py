"""The spec table's entries for the scientific and documentation repositories of SWE-bench Lite and Verified."""

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.swebench_specs import _TABLE, spec_for


@pytest.mark.parametrize("repo, version, python, pins", [
    ("mwaskom/seaborn", "0.12", "3.9", {"matplotlib==3.7.2", "numpy==1.25.2", "pandas==2.0.0"}),
    ("mwaskom/seaborn", "0.11", "3.9", {"pandas==1.3.5"}),
    ("pydata/xarray", "0.12", "3.10", {"numpy==1.21.6", "pandas==1.5.3", "dask==2022.8.1", "setuptools==68.0.0"}),
    ("pydata/xarray", "2022.06", "3.10", {"numpy==1.21.6", "setuptools-scm==7.1.0"}),
    ("sphinx-doc/sphinx", "3.5", "3.9", {"Jinja2==2.11.3", "MarkupSafe==2.0.1", "alabaster==0.7.11", "html5lib==1.1"}),
    ("sphinx-doc/sphinx", "7.1", "3.9", {"Jinja2==3.1.2", "docutils==0.20.1"}),
    ("sqlfluff/sqlfluff", "0.6", "3.9", {"oyaml==1.0", "tblib==2.0.0", "hypothesis==6.88.1"}),
    ("pvlib/pvlib-python", "0.7", "3.9", {"pytest-mock==3.14.0", "setuptools==68.2.2"}),
])
def test_a_lite_or_verified_version_gets_the_harness_python_and_pins(repo, version, python, pins):
    spec = spec_for(repo, version)
    assert spec.key == f"{repo}@{version}" and spec.python == python
    assert pins <= set(spec.requirements)


def test_pvlib_0_7_loads_pytest_mock_by_name():
    assert spec_for("pvlib/pvlib-python", "0.7").test_cmd[:2] == ("-p", "pytest_mock")


@pytest.mark.parametrize("repo", ["mwaskom/seaborn", "pydata/xarray", "sphinx-doc/sphinx", "sqlfluff/sqlfluff"])
def test_new_lines_are_valid_environments_that_trust_ctypes_exactly_where_a_package_imports_it(repo):
    # Every line must pass the check a row's python_env gets and name each package once. A line whose
    # packages import ctypes unconditionally (scipy; pandas from 1.5) carries the trust, which the seal
    # otherwise refuses; a line without them does not.
    for line in _TABLE[repo]:
        env = spec_for(repo, line.versions[0]).python_env("3.11")
        PythonEnv.from_dict(env)
        names = [canonicalize_name(Requirement(r).name) for r in env["requirements"]]
        assert len(names) == len(set(names)), line.versions
        pandas = [Requirement(r) for r in env["requirements"] if canonicalize_name(Requirement(r).name) == "pandas"]
        needs = "scipy" in names or not all(next(iter(r.specifier)).version.startswith(
            ("0.", "1.0", "1.1", "1.2", "1.3", "1.4")) for r in pandas)
        assert ("ctypes" in line.trust) == needs, line.versions
