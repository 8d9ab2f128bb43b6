"""``python -m tooltree_supervisor``: run the supervisor on this process's stdin/stdout."""

from __future__ import annotations

from .supervisor import main

if __name__ == "__main__":
    raise SystemExit(main())
