"""The price table usage is priced with (workers, clients, metrics): the bundled one
(`domain/prices.toml`), with the models of `DURAGENT_PRICES_FILE` replacing or joining its
own."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from duragent.domain.prices import PriceTable, parse_price_table
from duragent.settings import read_price_file

BUNDLED = "domain/prices.toml"


@functools.cache
def bundled_prices() -> PriceTable:
    text = resources.files("duragent.domain").joinpath("prices.toml").read_text(encoding="utf-8")
    return parse_price_table(text, BUNDLED)


def price_table(override: Path | None) -> PriceTable:
    """The bundled table, overlaid with the file at `override` when one is set."""
    bundled = bundled_prices()
    return (
        bundled if override is None else bundled.overlaid(read_price_file(override), str(override))
    )
