"""What a Temporal server needs before duragent runs on it: the custom search attributes
its workflows are found by (`DuragentSessionId`, `DuragentRunId`, `DuragentKind`).

The dev server registers them at every start (`temporal_dev.SEARCH_ATTRIBUTES`); a
cluster gets them once per namespace from `duragent setup-temporal`, through Temporal's
operator service. Adding is idempotent: what is there with the right type is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from duragent.client.errors import DuragentError, SearchAttributesMissing
from duragent.temporal_dev import SEARCH_ATTRIBUTES


@dataclass(frozen=True)
class SetupResult:
    added: list[str]
    present: list[str]


def _type_name(kind: int) -> str:
    return IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_").title()  # type: ignore[arg-type]


async def ensure_search_attributes(client: Client, namespace: str) -> SetupResult:
    """Add those of duragent's search attributes that `namespace` lacks.

    Raises:
        DuragentError: one is there with another type (duragent cannot use it, and
            Temporal cannot change it), or the server refuses to add them (Temporal Cloud
            takes them from its web UI or `tcld` instead).
    """
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    have = dict(listed.custom_attributes)
    clashes = [
        f"{name} is {_type_name(have[name])}, not {kind}"
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name in have and _type_name(have[name]) != kind
    ]
    if clashes:
        raise DuragentError(
            f"namespace {namespace}: search attribute {'; '.join(clashes)}: remove it "
            "(temporal operator search-attribute remove) or use another namespace"
        )
    missing = {name: kind for name, kind in SEARCH_ATTRIBUTES.items() if name not in have}
    if missing:
        request = AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={
                name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
                for name, kind in missing.items()
            },
        )
        try:
            await client.operator_service.add_search_attributes(request)
        except RPCError as err:
            if err.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
                raise
            names = ", ".join(f"{name} ({kind})" for name, kind in missing.items())
            raise DuragentError(
                f"namespace {namespace}: the server refused to add search attributes "
                f"({err.message}); add {names} with an account that may (on Temporal Cloud: "
                "its web UI or `tcld namespace search-attributes add`)"
            ) from None
    return SetupResult(added=list(missing), present=[n for n in SEARCH_ATTRIBUTES if n in have])


@contextlib.contextmanager
def search_attributes_required(namespace: str) -> Iterator[None]:
    """Inside, a workflow start that the server refuses for a search attribute the
    namespace lacks raises `SearchAttributesMissing`: one line saying what is missing and
    how to add it, instead of the server's error."""
    try:
        yield
    except RPCError as err:
        if "no mapping defined for search attribute" not in err.message:
            raise
        names = ", ".join(f"{name} ({kind})" for name, kind in SEARCH_ATTRIBUTES.items())
        raise SearchAttributesMissing(namespace, names) from None
