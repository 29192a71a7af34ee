"""Run prbj commands with stdout on a real pseudo-terminal of a chosen width, all in one process.

`TtyRun(jobs, cwd, env)` starts this file as a child process whose stdout and stderr are the slave side of
a pty and hands it the jobs (`[width, [args...]]`) as JSON on stdin. The child sets the terminal's size before
each command (so prbj sees a terminal of that width, as a user's shell would show it), runs the command through
the real click entry point and prints a separator line. The parent reads the terminal's output, drops colours
and carriage returns; `outputs()` gives one text per job.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Sequence
from pathlib import Path

SEPARATOR = "\x1e--- prbj job done ---"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


class TtyRun:
    """The child process and a thread reading its terminal, so the caller can do other work meanwhile."""

    def __init__(self, jobs: Sequence[tuple[int, Sequence[str]]], cwd: Path, env: dict[str, str]) -> None:
        self.jobs = list(jobs)
        master, slave = pty.openpty()
        child_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        self.child = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=child_env,
        )
        os.close(slave)
        assert self.child.stdin is not None
        self.child.stdin.write(json.dumps([[width, list(args)] for width, args in self.jobs]).encode())
        self.child.stdin.close()
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, args=(master,), daemon=True)
        self._reader.start()

    def _read(self, master: int) -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            self._chunks.append(chunk)
        os.close(master)

    def outputs(self) -> list[str]:
        """The terminal output of each job, in order (waits for the child)."""
        assert self.child.wait(timeout=600) == 0
        self._reader.join(60)
        text = _ANSI.sub("", b"".join(self._chunks).decode("utf-8", "replace")).replace("\r", "")
        parts = text.split(SEPARATOR + "\n")
        assert len(parts) == len(self.jobs) + 1, text[-2000:]
        return parts[:-1]


def _main() -> None:
    from prbj.cli import main

    jobs = json.loads(sys.stdin.read())
    for width, args in jobs:
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
        with contextlib.suppress(SystemExit):  # a command's exit code is the test's business, not the loop's
            main(args, prog_name="prbj", standalone_mode=False)
        sys.stdout.flush()
        print(SEPARATOR, flush=True)


if __name__ == "__main__":
    _main()
