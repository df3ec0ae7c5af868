"""What each model costs: the price table and how a model finds its price.

Every model the `genai-prices` package (by pydantic) knows is priced from its data, which
the package ships (no network): Anthropic's, OpenAI's, Google's (Gemini, and Claude on
Vertex), AWS Bedrock's, OpenRouter's. Over it lies a TOML file (`domain/prices.toml` ships
with duragent, for models genai-prices lacks; `DURAGENT_PRICES_FILE` names one of the same
shape whose models replace or add to it), whose prices win:

    as_of = 2026-12-01            # the date whose prices apply (genai-prices' too)
    source = "https://..."        # where from (optional)
    [models.claude-sonnet-5-5]    # US dollars per million tokens
    input = 2.00
    output = 10.00
    cache_read = 0.10
    cache_write = 2.50
    [models."openai:gpt-4.1"]     # a model of one provider (a bare name: of any)

A model is named as a session names it (`openai:gpt-4.1`, `bedrock:anthropic.claude-...`,
`gemini:gemini-2.5-pro`, a bare name being Anthropic's), or by the provider and model id a
stored assistant message carries (`price_of("gpt-4.1-2025-04-14", "openai")`). The TOML
table finds it by its exact name, or, for a dated id (`claude-sonnet-4-5-20250929`,
`gpt-4.1-2025-04-14`), by its family's name with the date taken off when the table does
not name the dated id itself; genai-prices by its own aliases for the provider's models.
A model of a server on the user's own machines (`ollama:`, `vllm:`) costs nothing. Nothing
else is guessed: a model neither knows has no price (its cost is unknown) rather than a
made-up one.

Token prices only, one rate per kind of token: a model priced by prompt length (Gemini 2.5
Pro above 200k tokens, Claude's long-context band) is priced at its first band, and
per-request or per-search fees are not counted. Reasoning tokens are part of the output
tokens (as OpenAI reports them) and priced as such.

Pure: parsing takes the file's text; reading files is the caller's (settings, client).
genai-prices' data is read on the first price looked up (its import takes a quarter of a
second), and its dated prices are those in force on the table's `as_of` date, so a
table prices a model the same way every time.
"""

from __future__ import annotations

import functools
import re
import tomllib
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from duragent.domain.models import DEFAULT_PROVIDER, PROVIDERS

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import TieredPrices

ModelName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
PerMillion = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""US dollars per million tokens."""

_DATED = re.compile(r"(?P<family>.+?)-(?:\d{8}|\d{4}-\d{2}-\d{2})")
"""A dated model id: the family's name, a dash and the snapshot's date (Anthropic's
YYYYMMDD, OpenAI's YYYY-MM-DD)."""

Catalog = Literal["genai-prices"]
"""Where a table finds the prices of models it does not name itself."""

CATALOG_PROVIDERS: dict[str, str] = {
    "anthropic": "anthropic",
    "bedrock": "aws",
    "vertex": "google",
    "openai": "openai",
    "openai-responses": "openai",
    "openrouter": "openrouter",
    "gemini": "google",
}
"""Our providers (`domain.models.PROVIDERS`) as genai-prices names them; a local server
(`Provider.local`) is not among them: its usage costs nothing."""

_CLAUDE_ELSEWHERE = ("bedrock", "vertex")
"""Providers serving Anthropic's models: one their own table lacks is at Anthropic's price."""

_BEDROCK_ID = re.compile(r"(?:[a-z]+(?:-[a-z]+)?\.)?anthropic\.claude-")
"""A Bedrock model id (`anthropic.claude-...`, `us.anthropic.claude-...`), which names its
provider even without a `bedrock:` prefix."""


class ModelPrice(BaseModel):
    """One model's prices, in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: PerMillion
    """Input tokens read without the cache."""
    output: PerMillion
    """Output tokens, reasoning tokens included."""
    cache_read: PerMillion
    """Input tokens read from the prompt cache (a cache hit)."""
    cache_write: PerMillion
    """Input tokens written to the prompt cache (the 5-minute write)."""


FREE = ModelPrice(input=0, output=0, cache_read=0, cache_write=0)
"""A local server's price."""


class PriceTable(BaseModel):
    """The prices of the models a table names, of those genai-prices knows beneath it
    (`catalog`), and the date they apply on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: date
    """The date whose prices apply: when the table's own were taken, and the day whose
    prices are taken from genai-prices (it knows some prices' start dates)."""
    source: str = ""
    """Where they were taken from."""
    catalog: Catalog | None = None
    """`genai-prices`: the package's prices for the models the table does not name."""
    models: dict[ModelName, ModelPrice] = Field(default_factory=dict)
    overridden_by: str | None = None
    """The file whose prices replaced or joined the bundled ones (`overlaid`), and its date."""

    def price_of(self, model: str | None, provider: str | None = None) -> ModelPrice | None:
        """The price of `model`: a session's name of it (`provider:model`, a bare name
        being Anthropic's), or a model id as `provider`'s API returned it (a stored
        message's `provider` and `model`). The table's own price first, then a local
        server's (free), then genai-prices'; None: no price is known for it."""
        if not model:
            return None
        provider, model_id = _provider_and_model(model, provider)
        found = self._named(provider, model_id)
        if found is not None:
            return found
        known = PROVIDERS.get(provider) if provider is not None else None
        if known is not None and known.local:
            return FREE
        if self.catalog is None:
            return None
        return _catalog_price_of(provider, model_id, self.as_of)

    def _named(self, provider: str | None, model_id: str) -> ModelPrice | None:
        """The table's own price: `provider:model` first, then the bare name (which
        prices the model on any provider), each by its exact name, else a dated id's
        family."""
        names = [model_id]
        if provider is not None and provider != DEFAULT_PROVIDER:
            names.insert(0, f"{provider}:{model_id}")
        for name in names:
            found = self.models.get(name)
            if found is not None:
                return found
            dated = _DATED.fullmatch(name)
            family = self.models.get(dated.group("family")) if dated else None
            if family is not None:
                return family
        return None

    def overlaid(self, other: PriceTable, origin: str) -> PriceTable:
        """This table with `other`'s models replacing or joining its own."""
        return self.model_copy(
            update={
                "models": {**self.models, **other.models},
                "overridden_by": f"{origin} (prices of {other.as_of.isoformat()})",
            }
        )


def _provider_and_model(model: str, provider: str | None) -> tuple[str | None, str]:
    """The provider and the model's id: `provider` when given, else the name's
    `provider:` prefix when it names one of ours (a Bedrock id's `...-v1:0` does not)."""
    if provider is None:
        head, sep, rest = model.partition(":")
        if sep and rest and head in PROVIDERS:
            return head, rest
    return provider, model


def _catalog_price_of(provider: str | None, model_id: str, on: date) -> ModelPrice | None:
    """genai-prices' price of the model, as of `on`."""
    if provider is None:
        # A model id alone (usage recorded without its provider): the vendor genai-prices
        # finds by the id, among the vendors we serve; a Bedrock id names Bedrock.
        found = _catalog_price(None, model_id, on)
        if found is None and _BEDROCK_ID.match(model_id):
            found = _catalog_price("aws", model_id, on)
        return found
    catalog_id = CATALOG_PROVIDERS.get(provider)
    if catalog_id is None:
        return None
    found = _catalog_price(catalog_id, model_id, on)
    if found is None and provider in _CLAUDE_ELSEWHERE:
        found = _catalog_price(CATALOG_PROVIDERS[DEFAULT_PROVIDER], model_id, on)
    return found


@functools.cache
def _catalog() -> DataSnapshot:
    """genai-prices' bundled data, in a snapshot of our own: never one its updater fetched
    (`genai_prices.UpdatePrices` replaces the package's default)."""
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


@functools.cache
def _catalog_price(catalog_id: str | None, model_id: str, on: date) -> ModelPrice | None:
    """genai-prices' token prices of `model_id` at `catalog_id` (None: the vendor its id
    names, if it is one we serve), in force at noon (UTC) on `on`; None when it has none."""
    catalog = _catalog()
    try:
        vendor = catalog.find_provider(model_id.lower(), catalog_id, None)
        if catalog_id is None and vendor.id not in CATALOG_PROVIDERS.values():
            return None
        _, model = catalog.find_provider_model(model_id, vendor, None, None)
    except LookupError:
        return None
    prices = model.get_prices(datetime.combine(on, time(12), tzinfo=UTC))
    input_price = _rate(prices.input_mtok)
    output_price = _rate(prices.output_mtok)
    if input_price is None or output_price is None:
        return None  # priced per request, character or image: not by tokens
    # A model without a cache price bills cached tokens as input (OpenAI has no cache
    # write: the tokens it caches are billed as input).
    cache_read = _rate(prices.cache_read_mtok)
    cache_write = _rate(prices.cache_write_mtok)
    if cache_write is None:
        cache_write = _rate(prices.cache_write_5m_mtok)
    return ModelPrice(
        input=input_price,
        output=output_price,
        cache_read=input_price if cache_read is None else cache_read,
        cache_write=input_price if cache_write is None else cache_write,
    )


def _rate(price: Decimal | TieredPrices | None) -> float | None:
    """A price per million tokens; a price by prompt length at its first band."""
    if price is None:
        return None
    return float(price if isinstance(price, Decimal) else price.base)


class PriceFileError(ValueError):
    """A price file that is not TOML or breaks the table's shape; the message names the
    file, the field and the rule."""


def parse_price_table(text: str, origin: str) -> PriceTable:
    """The table in `text` (TOML), read from `origin` (named in errors).

    Raises:
        PriceFileError: not TOML, or a field missing, unknown or out of its rule.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise PriceFileError(f"{origin}: not TOML ({err})") from None
    if "overridden_by" in data:  # set by `overlaid`, never by a file
        raise PriceFileError(f"{origin}: overridden_by: not a field of a price file")
    try:
        return PriceTable.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'the table'}: {e['msg']}"
            for e in err.errors()
        )
        raise PriceFileError(f"{origin}: {problems}") from None
