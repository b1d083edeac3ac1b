"""The one alias for a decoded JSON object, used by every package of the project."""

from typing import Any

JSONDict = dict[str, Any]
