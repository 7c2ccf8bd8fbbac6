"""Running a test's server as ``nobody``: root ignores file permissions, so a test of what a
server does in a directory it cannot write runs the server as an unprivileged user."""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Nobody:
    prefix: list[str]
    """The argv prefix that runs a command as ``nobody`` (via ``setpriv``)."""
    user: pwd.struct_passwd


@functools.cache
def as_nobody() -> Nobody | str:
    """How to run this Python as ``nobody``, or why it cannot be done here (not root, no
    ``setpriv``, no such user, or an interpreter ``nobody`` cannot load, such as one installed
    under root's home)."""
    if os.geteuid() != 0:
        return "not running as root"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "no setpriv"
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        return "no user 'nobody'"
    prefix = [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"'nobody' cannot run {sys.executable}: {probe.stderr.strip()[-300:]}"
    return Nobody(prefix, user)
