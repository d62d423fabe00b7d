"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/distributed_test.py,
DistributedTest._DistTestBase) against braid or Gloo, on CPU, the way third-party backends run it:
the feature tables filled before the import, braid_torch imported at module level (spawned ranks
import this module again and so register the backend), ranks meeting over TCP.

  BACKEND=braid|gloo WORLD_SIZE=2|3 python dist_suite.py [unittest args, e.g. -k test_all_reduce]

Without arguments it runs the whole suite. --summary FILE appends one JSON line per test
(name, outcome, seconds) for bench/torch/dist_suite_table.py. Exit status: unittest's (0 when no
test failed or errored); 77 (skip) when torch or braid_torch is missing.
"""
import json
import os
import socket
import sys
import tempfile
import time
import unittest

os.environ.setdefault("BACKEND", "braid")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="braid-dist-suite-"))
os.environ.setdefault("INIT_METHOD", "tcp")  # each test gets its own port (setUp below)
BACKEND = os.environ["BACKEND"]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.distributed as dist  # noqa: F401,E402
except ImportError as e:
    braid_skip.skip_missing(f"torch is not importable by {sys.executable}: {e}")
if BACKEND == "braid":
    try:
        import braid_torch  # noqa: F401,E402  registers "braid" in every rank
    except ImportError as e:
        braid_skip.skip_missing(f"braid_torch is not importable (build it; PYTHONPATH): {e}")
try:
    from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
except ImportError as e:  # Debian's python3-torch lacks what its own test suite imports
    braid_skip.skip_missing(f"PyTorch's test suite does not import under {sys.executable}: {e} "
                            "(tools/torch2-env --torch1-suite makes a Python that has it)")

if BACKEND == "braid":
    # What braid has on CPU: a plugin backend with subgroups and DDP. Not "gpu"/"cuda": those
    # tests put each rank on its own GPU, which this machine does not have.
    for feature in ("plugin", "subgroup", "ddp"):
        DistTestCases.backend_feature[feature].add("braid")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        # A fresh TCP port per test, chosen before the ranks are spawned (they inherit it).
        os.environ["BRAID_DIST_SUITE_PORT"] = str(free_port())
        super().setUp()
        self._spawn_processes()

    @property
    def init_method(self):
        if os.environ.get("INIT_METHOD") == "tcp":
            return f"tcp://127.0.0.1:{os.environ['BRAID_DIST_SUITE_PORT']}"
        return super().init_method


class JsonLines(unittest.TextTestResult):
    """Also writes each test's outcome to --summary."""

    summary = None

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        if JsonLines.summary:
            with open(JsonLines.summary, "a") as f:
                f.write(json.dumps({"test": test.id().rsplit(".", 1)[-1], "outcome": outcome,
                                    "seconds": round(time.monotonic() - self._started, 2),
                                    "backend": BACKEND, "world": int(os.environ["WORLD_SIZE"]),
                                    "torch": torch.__version__, "detail": detail[-300:]}) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected-failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected-success")


def main():
    args = sys.argv[1:]
    if "--summary" in args:
        i = args.index("--summary")
        JsonLines.summary = args[i + 1]
        del args[i:i + 2]
    runner = unittest.TextTestRunner(resultclass=JsonLines, verbosity=2)
    program = unittest.main(module=__name__, argv=[sys.argv[0]] + args, testRunner=runner,
                            exit=False)
    result = program.result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
