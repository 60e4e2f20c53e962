"""A test run a person can watch: when no test has reported for MXS_TEST_HEARTBEAT_S seconds
(default 50), a line on the terminal names the test that is running and for how long, e.g.

    [00:12:40] still running tests/compat/test_spconv_suite.py::test_spconv_suite (110 s)

pytest's own progress (a character per test) stops for as long as one test runs; some tests
here run a whole pytest session in a subprocess. Under pytest-xdist (``run.sh test``: a worker
per core) the line comes from the controller and names the test that has run longest of those
the workers are running. The line is written to a copy of the
terminal's file descriptor taken at start-up, which test output capture does not touch.
MXS_TEST_HEARTBEAT_S=0 turns it off."""
import os
import sys
import threading
import time

import pytest


class Heartbeat:
    def __init__(self, fd, silence_s):
        self.fd, self.silence_s = fd, silence_s
        self.lock = threading.Lock()
        self.running, self.last = {}, time.monotonic()    # running: nodeid -> start (one per xdist worker)
        threading.Thread(target=self._watch, name="mxs-test-heartbeat", daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(min(5.0, self.silence_s / 2))
            with self.lock:
                now = time.monotonic()
                if not self.running or now - self.last < self.silence_s:
                    continue
                nodeid, started = min(self.running.items(), key=lambda item: item[1])
                line = f"\n[{time.strftime('%H:%M:%S')}] still running {nodeid} ({now - started:.0f} s)\n"
                self.last = now
            try:
                os.write(self.fd, line.encode())
            except OSError:
                return

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid, location):
        with self.lock:
            self.running[nodeid] = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        with self.lock:
            self.last = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid, location):
        with self.lock:
            self.running.pop(nodeid, None)
            self.last = time.monotonic()


def start(config):
    """Called from conftest.py's pytest_configure."""
    silence_s = float(os.environ.get("MXS_TEST_HEARTBEAT_S", "50"))
    if silence_s <= 0 or hasattr(config, "workerinput"):   # off, or an xdist worker (no terminal)
        return
    try:
        fd = os.dup(sys.stdout.fileno())   # the terminal: capture is suspended while plugins configure
    except (AttributeError, OSError, ValueError):
        return
    config.pluginmanager.register(Heartbeat(fd, silence_s), "mxs-test-heartbeat")


def pytest_configure(config):   # when loaded as a plugin (-p progress_heartbeat)
    start(config)
