"""An object's metadata, and its controller: the ownerReference with ``controller: true`` (upstream's
``metav1.GetControllerOf`` and ``IsControlledBy``). Objects are plain JSON dicts, as the API serves them."""

from __future__ import annotations

from shared.jsondict import JSONDict


def meta(obj: JSONDict) -> JSONDict:
    """``metadata`` ({} if unset)."""
    metadata: JSONDict = obj.get("metadata") or {}
    return metadata


def controller_of(obj: JSONDict) -> JSONDict | None:
    """The ownerReference with ``controller: true``, if any (a copy)."""
    ref = _controller_ref(obj)
    return None if ref is None else dict(ref)


def _controller_ref(obj: JSONDict) -> JSONDict | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def is_controlled_by(obj: JSONDict, owner_uid: str) -> bool:
    """Upstream's ``metav1.IsControlledBy``: the controller reference has the owner's UID."""
    ref = _controller_ref(obj)  # read only: no copy (this runs for every pod of a job, several times a sync)
    return ref is not None and bool(owner_uid) and ref.get("uid") == owner_uid
