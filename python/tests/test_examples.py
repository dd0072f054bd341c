"""The examples on a machine without a GPU: they parse their arguments, say that there is nothing to
do and exit 0; the EAGLE tree example also runs its whole loop on the CPU oracle (--cpu-reference),
generated tokens checked against plain decoding, the pool and every committed KV row checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _run(script, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.parametrize("script", ["speculative_decoding.py", "eagle_tree_decoding.py"])
def test_example_parses_its_arguments(script):
    result = _run(script, "--help")
    assert result.returncode == 0, result.stderr
    assert "--steps" in result.stdout


def test_eagle_example_rejects_a_tree_that_does_not_fit():
    result = _run("eagle_tree_decoding.py", "--tree-size", "80")
    assert result.returncode == 2 and "--tree-size" in result.stderr


def test_eagle_example_loop_on_the_cpu_oracle():
    pytest.importorskip("torch")
    result = _run("eagle_tree_decoding.py", "--cpu-reference", "--steps", "8", "--batch", "3", "--heads", "8",
                  "--min-gen", "4", "--max-gen", "40", "--check-every", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "identical token for token" in result.stdout
    assert "leaked after release: 0" in result.stdout
