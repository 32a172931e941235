"""make install puts the package where Debian's Python finds it, told where libhaecer went; the
installed copy (not the source tree's) measures through the real msrd."""
import ctypes
import os
import subprocess
import sys

from conftest import BUILD, SOURCE

PREFIX = "/usr/local"


def test_installed_package_measures(msrd, tmp_path):
    stage = tmp_path / "stage"
    env = dict(os.environ, DESTDIR=str(stage))
    subprocess.run([os.path.join(SOURCE, "scripts", "install.sh"), BUILD, f"{stage}{PREFIX}"],
                   env=env, check=True, capture_output=True)
    package = stage / "usr/local/lib/python3/dist-packages/haecer"
    assert (package / "__init__.py").exists()
    installed = (package / "_installed.py").read_text()
    assert 'LIBRARY = "/usr/local/lib/libhaecer.so.1"' in installed
    # The staged library stands in for /usr/local/lib's (HAECER_LIBRARY wins over _installed).
    code = ("import haecer, sys; assert haecer.__file__.startswith(sys.argv[1]), haecer.__file__;"
            "print(haecer.energy('energy-pkg', cpu=0).read().joules > 0)")
    done = subprocess.run(
        [sys.executable, "-c", code, str(package)], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(package.parent), HAECER_SOCKET=msrd.socket,
                 HAECER_LIBRARY=str(stage / "usr/local/lib/libhaecer.so.1")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_simulator_control_is_not_installed(tmp_path):
    """The simulated CPU's control and truth are the test harness's (harness/sim_control.h),
    not libhaecer's: no installed header declares them and libhaecer.so exports none."""
    stage = tmp_path / "stage"
    env = dict(os.environ, DESTDIR=str(stage))
    subprocess.run([os.path.join(SOURCE, "scripts", "install.sh"), BUILD, f"{stage}{PREFIX}"],
                   env=env, check=True, capture_output=True)
    headers = list((stage / "usr/local/include/haecer").glob("*.h"))
    assert headers
    for header in headers:
        assert "haecer_sim_" not in header.read_text(), header
    library = ctypes.CDLL(str(stage / "usr/local/lib/libhaecer.so.1"))
    assert hasattr(library, "haecer_machine_info")
    for name in ("advance", "set_load", "energy_truth", "energy_at", "power_trace"):
        assert not hasattr(library, "haecer_sim_" + name), name
