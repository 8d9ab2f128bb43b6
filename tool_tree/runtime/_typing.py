"""`NotRequired`, which a stub's TypedDict marks a key that may be missing with, on the sandbox's Python 3.10 too.

`typing.NotRequired` is Python 3.11's, and a sandbox image may run 3.10 (any python3 from 3.10 on works), where a stub
that imported it from `typing` failed at its import: "ImportError: cannot import name 'NotRequired' from 'typing'".
Stubs import it from the runtime: typing's own where there is one; on 3.10 a stand-in of which ``NotRequired[X]`` is
``X`` (a stub's annotations are not evaluated when it runs; where ``typing.get_type_hints`` evaluates one, the key's
type is what it gets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NotRequired as NotRequired
else:
    try:
        from typing import NotRequired
    except ImportError:  # Python 3.10

        class NotRequired:
            def __class_getitem__(cls, item):
                return item
