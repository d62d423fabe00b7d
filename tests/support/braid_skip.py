"""Skipping a script test with its reason, recorded for the suite's skip audit (the Python twin of
tests/support/skip.h; the kinds mean the same). CTest treats exit code 77 as skipped."""
import os
import sys

SKIP_EXIT = 77


def record(kind, test, reason):
    """Appends "kind<TAB>test<TAB>reason" to $BRAID_SKIP_LOG in one write."""
    assert kind in ("device", "missing"), kind
    path = os.environ.get("BRAID_SKIP_LOG")
    if not path:
        return
    line = f"{kind}\t{test}\t{' '.join(str(reason).split())}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def skip(kind, reason, test=None):
    """Records the skip, prints its one-line reason and exits with CTest's skip code."""
    test = test or os.path.basename(sys.argv[0])
    record(kind, test, reason)
    print(f"SKIP ({kind}): {reason}", flush=True)
    sys.exit(SKIP_EXIT)


def skip_no_device(reason, test=None):
    skip("device", reason, test)


def skip_missing(reason, test=None):
    skip("missing", reason, test)
