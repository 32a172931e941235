"""The real msrd on the simulated CPU for the Python package's tests: started from
$HAECER_BUILD (default build/) in a private directory with a real policy file."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("HAECER_BUILD") or os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(SOURCE, "python"))
os.environ["HAECER_BUILD"] = BUILD


class Msrd:
    """One msrd: its socket, its directory, its log; stopped with SIGTERM (exit 0 required)."""

    def __init__(self, policy_text: str):
        self.directory = tempfile.mkdtemp(prefix="haecer-py-")
        os.chmod(self.directory, 0o700)
        self.socket = os.path.join(self.directory, "msrd.sock")
        policy = os.path.join(self.directory, "policy.yaml")
        with open(policy, "w", encoding="utf-8") as out:
            out.write(policy_text)
        os.chmod(policy, 0o600)
        self.log_path = os.path.join(self.directory, "msrd.log")
        self.log = open(self.log_path, "w", encoding="utf-8")
        self.process = subprocess.Popen(
            [os.path.join(BUILD, "msrd"), "--backend", "sim", "--sim-seed", "12", "--foreground",
             "--socket", self.socket, "--policy", policy, "--state-dir", self.directory],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("msrd did not start: " + self.read_log())
            time.sleep(0.01)

    def read_log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            return log.read()

    def stop(self) -> int:
        self.process.terminate()
        status = self.process.wait(timeout=20)
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        return status


def policy(path: str) -> str:
    with open(os.path.join(SOURCE, path), encoding="utf-8") as text:
        return text.read()


@pytest.fixture(scope="session")
def msrd():
    """msrd with the shipped default policy (root may do everything), the socket the package
    connects to by default in this process."""
    server = Msrd(policy("configs/policies/default.yaml"))
    os.environ["HAECER_SOCKET"] = server.socket
    yield server
    assert server.stop() == 0, server.read_log()


def python_env(socket: str, **extra: str) -> dict:
    """The environment of a fresh Python process that imports the package from the source
    tree and connects to msrd at socket."""
    return dict(os.environ, HAECER_SOCKET=socket, PYTHONPATH=os.path.join(SOURCE, "python"),
                HAECER_BUILD=BUILD, **extra)


def run_python(code: str, socket: str, timeout: float = 60, **extra: str):
    """Run code in a fresh Python process; its CompletedProcess (text output)."""
    return subprocess.run([sys.executable, "-c", code], env=python_env(socket, **extra),
                          capture_output=True, text=True, timeout=timeout)
