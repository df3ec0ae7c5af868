"""What each model costs: the price table and how a model name finds its price.

The table is a TOML file (`domain/prices.toml` ships with duragent; `DURAGENT_PRICES_FILE`
names one of the same shape whose models replace or add to it):

    as_of = 2026-12-01            # when these prices were taken
    source = "https://..."        # where from (optional)
    [models.claude-sonnet-5-5]    # US dollars per million tokens
    input = 2.00
    output = 10.00
    cache_read = 0.10
    cache_write = 2.50

A model name finds its price by its exact name, or, for a dated id such as
`claude-sonnet-4-5-20250929`, by its family's name with the date taken off
(`claude-sonnet-4-5`) when the table does not name the dated id itself. Nothing else is
guessed: `claude-opus-4-9` is not `claude-opus-4`, and a model the table lacks has no
price (its cost is unknown) rather than a made-up one.

Pure: parsing takes the file's text; reading files is the caller's (settings, client).
"""

from __future__ import annotations

import re
import tomllib
from datetime import date
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

ModelName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
PerMillion = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""US dollars per million tokens."""

_DATED = re.compile(r"(?P<family>.+)-\d{8}")
"""A dated model id: the family's name, a dash and the snapshot's date (YYYYMMDD)."""


class ModelPrice(BaseModel):
    """One model's prices, in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: PerMillion
    """Input tokens read without the cache."""
    output: PerMillion
    cache_read: PerMillion
    """Input tokens read from the prompt cache (a cache hit)."""
    cache_write: PerMillion
    """Input tokens written to the prompt cache (the 5-minute write)."""


class PriceTable(BaseModel):
    """The prices of the models a table names, and the date they were taken."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: date
    """When these prices were taken."""
    source: str = ""
    """Where they were taken from."""
    models: dict[ModelName, ModelPrice] = Field(default_factory=dict)
    overridden_by: str | None = None
    """The file whose prices replaced or joined the bundled ones (`overlaid`), and its date."""

    def price_of(self, model: str | None) -> ModelPrice | None:
        """The model's price by its exact name, else a dated id's family price; None: the
        table has no price for it."""
        if not model:
            return None
        found = self.models.get(model)
        if found is not None:
            return found
        dated = _DATED.fullmatch(model)
        return self.models.get(dated.group("family")) if dated else None

    def overlaid(self, other: PriceTable, origin: str) -> PriceTable:
        """This table with `other`'s models replacing or joining its own."""
        return self.model_copy(
            update={
                "models": {**self.models, **other.models},
                "overridden_by": f"{origin} (prices of {other.as_of.isoformat()})",
            }
        )


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
