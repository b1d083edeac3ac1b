"""DNS name checks of k8s.io/apimachinery (``validation.IsDNS1035Label`` and friends), with their messages."""

import re

DNS1035_LABEL_MAX = 63
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _max_len(value: str, limit: int) -> list[str]:
    return [f"must be no more than {limit} characters"] if len(value) > limit else []


def is_dns1035_label(value: str) -> list[str]:
    """Problems with ``value`` as a DNS-1035 label (Service names, MPIJob worker hostnames)."""
    return _max_len(value, DNS1035_LABEL_MAX) + (
        [] if _DNS1035_LABEL.fullmatch(value) else [_DNS1035_MESSAGE]
    )


def is_plain_dns1035_label(value: str) -> bool:
    """Whether ``value`` is a valid DNS-1035 label (``is_dns1035_label`` finds no problem), as one test."""
    return len(value) <= DNS1035_LABEL_MAX and _DNS1035_LABEL.fullmatch(value) is not None


def is_dns1123_label(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 label (pod hostnames, label values used as names)."""
    return _max_len(value, DNS1123_LABEL_MAX) + (
        [] if _DNS1123_LABEL.fullmatch(value) else [_DNS1123_LABEL_MESSAGE]
    )


def is_dns1123_subdomain(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 subdomain (most object names)."""
    return _max_len(value, DNS1123_SUBDOMAIN_MAX) + (
        [] if _DNS1123_SUBDOMAIN.fullmatch(value) else [_DNS1123_SUBDOMAIN_MESSAGE]
    )
