"""`save_images`: ``tooltree exec --images DIR`` writes the images a script showed into new files of DIR."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.results import ExecutionResult

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_IMAGE_NAME = re.compile(r"image-(\d{1,18})\.[^.]+")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
"""A new file or nothing: an existing name, a link (even one to nowhere) included, is refused, never followed."""
_TRIES = 1_000
"""Names tried for one image when others keep taking them meanwhile."""


def save_images(result: ExecutionResult, folder: Path) -> tuple[list[Path], str | None]:
    """Write each image into a new file of ``folder``: the files written, in order, and why the rest were not.

    The files are ``image-N.EXT``, numbered on from the highest ``image-N.*`` already in the folder (the
    first run writes image-1, image-2, ...; the next one carries on), so the images of one run are numbered
    in order and after the older ones. Each file is created exclusively: a name taken meanwhile, or a link,
    is never written through; the next number is used.
    """
    if not result.images:
        return [], None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with os.scandir(folder) as entries:
            taken = [int(m[1]) for e in entries if (m := _IMAGE_NAME.fullmatch(e.name))]
    except OSError as e:
        return [], f"cannot write into {folder}: {e.strerror or e}"
    number, saved = max(taken, default=0), list[Path]()
    for n, image in enumerate(result.images, 1):
        for _ in range(_TRIES):
            number += 1
            path = folder / f"image-{number}.{_EXTENSIONS.get(image.mime_type, 'bin')}"
            try:
                fd = os.open(path, _CREATE, 0o666)
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno == errno.ELOOP:  # a link in the way (O_NOFOLLOW): taken as well
                    continue
                return saved, f"image {n} could not be saved as {path}: {e.strerror or e}"
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(image.data)
            except OSError as e:
                path.unlink(missing_ok=True)  # the file this run just created: nothing half-written is left
                return saved, f"image {n} could not be saved as {path}: {e.strerror or e}"
            saved.append(path)
            break
        else:
            return saved, f"image {n} could not be saved: {_TRIES} names in {folder} were taken meanwhile"
    return saved, None
