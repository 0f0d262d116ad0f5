"""Files the command line writes for its user: an export, an import's id mapping, import-legacy's
report. They hold memories, history and ids, so each is readable by its owner alone, and a name
someone else planted in the folder must not redirect the write.

``write_private`` writes into a temporary file that it creates itself (``tempfile.mkstemp``:
O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask, a random name in the target's folder),
syncs it and renames it over the target, so the target holds the whole new file or is left as it
was; the temporary file is removed on any failure. A target that is a symbolic link is refused: the
rename would replace the link, not the file it names, and writing through it is what a planted link
is for.

``append_private`` adds one line to a log the command keeps for its user (``recallatron hook``'s):
created 0600, never through a symbolic link, the line written with one ``write`` in append mode so
that lines of processes appending at once do not interleave.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

LINK = "it is a symbolic link; name the file itself"
# A pipe, device or socket at the target: the rename would replace it by a plain file, so whatever
# reads the pipe would get nothing; refused instead.
SPECIAL = "it is not a regular file (a pipe, device or socket); name a file"


def unwritable(path: Path) -> str | None:
    """Why ``write_private`` could not write ``path`` (a symbolic link, a folder, a pipe or other
    special file, no such folder, a folder it may not write in), or None. Checked before a command
    changes a workspace, so that the file it writes last (a report, a mapping) cannot fail after the
    work is done for any of these; nothing is created by the check."""
    if path.is_symlink():
        return LINK
    if path.is_dir():
        return "it is a folder"
    if path.exists() and not path.is_file():
        return SPECIAL
    folder = path.parent
    if not folder.is_dir():
        return f"no such folder {folder}"
    # The new file is created in the folder and renamed over the old one: the folder is what must
    # be writable, whatever the old file's own mode.
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    return None


def write_private(path: Path, chunks: Iterable[str]) -> None:
    """Writes ``chunks`` (UTF-8 text) to ``path`` whole or not at all, mode 0600. OSError when it
    cannot (``strerror`` says why: a symbolic link at ``path``, no such folder, no permission, a
    full disk...); an exception raised by ``chunks`` passes through. Either way nothing is left
    behind and an old ``path`` is untouched."""
    if path.is_symlink():
        raise OSError(errno.ELOOP, LINK, str(path))
    if path.exists() and not path.is_dir() and not path.is_file():
        raise OSError(errno.EINVAL, SPECIAL, str(path))
    # A short prefix keeps the temporary name within the file system's name limit.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def append_private(path: Path, line: str) -> None:
    """Appends ``line`` and a newline to ``path``, creating it (and its folder, 0700) readable by its
    owner alone. OSError when it cannot (a symbolic link at ``path``: ELOOP)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Makes the rename itself durable (best effort: some file systems refuse to sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
