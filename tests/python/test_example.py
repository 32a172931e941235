"""examples/python/compare_energy.py runs as its docstring says and draws its PNG, labelled
simulated on msrd's simulated CPU."""
import os

import pytest

from conftest import SOURCE, run_python


def test_compare_energy_draws_a_labelled_plot(msrd, tmp_path):
    pytest.importorskip("matplotlib")
    output = tmp_path / "energy.png"
    script = os.path.join(SOURCE, "examples", "python", "compare_energy.py")
    code = f"import sys, runpy; sys.argv = [{script!r}, {str(output)!r}, '3']; " \
           f"runpy.run_path({script!r}, run_name='__main__')"
    done = run_python(code, msrd.socket, MPLCONFIGDIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = done.stdout.splitlines()
    assert any(line.startswith("squares_loop: median") and "[simulated]" in line
               for line in lines)
    assert any(line.startswith("squares_builtin: median") for line in lines)
