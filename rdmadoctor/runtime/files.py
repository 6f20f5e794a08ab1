"""Every file rdmadoctor writes (check --save, --html, bench --save and --csv, report -o) goes through
write_private.

The facts and results hold a host's addresses, firewall rules and kernel log, so the file is created for its
owner only (mode 0600) and never through a name someone else prepared: the content goes to a new temporary
file in the same directory with an unpredictable name, created exclusively (O_EXCL) without following a
symbolic link (O_NOFOLLOW), and is then renamed over the destination, so a reader never sees a half-written
file. A destination that is a symbolic link, a device or a pipe is refused (written through, it could land
anywhere; replaced, it could be /dev/stdout). On any
error (ENOSPC, EIO, a directory that does not exist) the temporary file is removed and the destination is
left as it was.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Union

MODE = 0o600
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def write_private(path: Union[str, Path], data: Union[str, bytes]) -> None:
    """Write `data` (text as UTF-8) to `path` atomically, mode 0600. Raises OSError."""
    target = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(target))
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a symbolic link (someone may have planted it), a device or a pipe: not replaced, not written through
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise OSError(errno.EEXIST, f"{what}: not written through it (give a new or regular file)", str(target))
    for _ in range(16):
        tmp = directory / f".{target.name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _FLAGS, MODE)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(17, "could not create a temporary file", str(directory))
    try:
        try:
            os.fchmod(fd, MODE)            # the umask may have taken bits away, never added: keep it 0600
            view = memoryview(raw)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
