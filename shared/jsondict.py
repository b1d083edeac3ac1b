"""The one alias for a decoded JSON object, used by every package of the project, and the one way to reach into one."""

from typing import Any

JSONDict = dict[str, Any]


def object_at(obj: object, *path: str) -> JSONDict | None:
    """The object at ``path`` inside ``obj`` (``object_at(job, "spec", "runPolicy")``), or None when a step is
    missing or is not an object: a client's object may hold anything anywhere."""
    node = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None
