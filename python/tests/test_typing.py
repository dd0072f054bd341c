"""The package is typed and documented: py.typed, type stubs of the extension that match what
nanobind's stubgen makes of the built module, and a docstring on every public name."""

from __future__ import annotations

import enum
import inspect
import pathlib
import re
import subprocess
import sys
import types

import pytest

import openmla
import openmla._C as _C
from openmla import api, flash_mla, fp8, reference

PACKAGE = pathlib.Path(openmla.__file__).resolve().parent
PATTERNS = pathlib.Path(__file__).resolve().parents[1] / "stubgen_patterns.txt"
PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
REGENERATE = "cmake --build <build dir> --target openmla_python_stubs"


def test_py_typed_marker_and_stubs_are_in_the_package():
    assert (PACKAGE / "py.typed").is_file()
    for name in ("__init__.pyi", "fp8.pyi", "reference.pyi"):
        assert (PACKAGE / "_C" / name).is_file(), name


def _pinned_nanobind() -> str:
    match = re.search(r'"nanobind==([^"]+)"', PYPROJECT.read_text()) if PYPROJECT.is_file() else None
    return match.group(1) if match else ""


def test_committed_stubs_match_the_built_extension(tmp_path):
    nanobind = pytest.importorskip("nanobind", reason="nanobind not installed (it generates the stubs)")
    pinned = _pinned_nanobind()
    if nanobind.__version__ != pinned:
        pytest.skip(f"the stubs are generated with nanobind {pinned or '(pin not found)'}, "
                    f"this is {nanobind.__version__}")
    subprocess.run(
        [sys.executable, "-m", "nanobind.stubgen", "-q", "-r", "-m", "openmla._C", "-i", str(PACKAGE.parent),
         "-p", str(PATTERNS), "-O", str(tmp_path)],
        check=True,
    )
    generated = sorted(p.relative_to(tmp_path / "_C") for p in (tmp_path / "_C").rglob("*.pyi"))
    committed = sorted(p.relative_to(PACKAGE / "_C") for p in (PACKAGE / "_C").rglob("*.pyi"))
    assert generated == committed, f"stub files differ; regenerate with {REGENERATE}"
    for rel in generated:
        assert (tmp_path / "_C" / rel).read_text() == (PACKAGE / "_C" / rel).read_text(), (
            f"_C/{rel} is out of date; regenerate with {REGENERATE}")


# ---- docstrings ----------------------------------------------------------------------------------


def _is_native_function(obj) -> bool:
    return type(obj).__name__ in ("nb_func", "nb_method")


def _has_doc(obj) -> bool:
    doc = inspect.getdoc(obj) if not _is_native_function(obj) else obj.__doc__
    if not doc:
        return False
    if _is_native_function(obj):  # nanobind puts the signature first; the text follows a blank line
        return "\n\n" in doc and doc.split("\n\n", 1)[1].strip() != ""
    return doc.strip() != ""


def _members_of_class(cls):
    for name, value in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if name == "__init__" and not (_is_native_function(value) or inspect.isfunction(value)):
            continue
        if isinstance(value, property) or inspect.isfunction(value) or _is_native_function(value):
            yield name, value


def _undocumented(module, names):
    missing = []
    for name in names:
        obj = getattr(module, name)
        where = f"{module.__name__}.{name}"
        if isinstance(obj, (int, float, str)) and not isinstance(obj, enum.Enum):
            continue  # constants: described by their module and the stubs
        if isinstance(obj, types.ModuleType):
            if not _has_doc(obj):
                missing.append(where)
            continue
        if not _has_doc(obj):
            missing.append(where)
        if inspect.isclass(obj) and not issubclass(obj, (enum.Enum, BaseException)):
            missing += [f"{where}.{m}" for m, value in _members_of_class(obj) if not _has_doc(value)]
    return missing


def _public(module):
    return getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]


@pytest.mark.parametrize("module", [openmla, api, flash_mla, fp8, reference, _C, _C.fp8, _C.reference],
                         ids=lambda m: m.__name__)
def test_every_public_name_has_a_docstring(module):
    assert _has_doc(module), module.__name__
    assert _undocumented(module, _public(module)) == []


def test_nested_public_classes_are_documented():
    assert _has_doc(flash_mla.FlashMLASchedMeta.Config)
    assert _has_doc(reference.ReferenceResult)
