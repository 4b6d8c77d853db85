"""Ctrl-C and SIGTERM during certify: the run stops and a partial report is written."""

from __future__ import annotations


class interruptible:
    """SIGTERM (a cancelled CI job) ends a run the way Ctrl-C does: the supervisor stops the running
    session and a partial report is written from the results so far.

    Ctrl-C works whatever the process that started certify handed on: Python keeps SIGINT ignored
    when its parent ignored it (a background job of a non-interactive shell, some test runners'
    workers), and a blocked signal is never delivered; either way a SIGINT would leave the run going
    (tests/test_cli_inputs.py saw it). certify installs Python's own handler and unblocks both."""

    def __init__(self):
        import signal

        def stop(signum, frame):
            raise KeyboardInterrupt("stopped by SIGTERM")

        self._previous = signal.signal(signal.SIGTERM, stop)
        self._previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._previous_mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

    def restore(self) -> None:
        import signal

        signal.signal(signal.SIGTERM, self._previous)
        signal.signal(signal.SIGINT, self._previous_int)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._previous_mask)
