"""How a person installs an optional part of duragent (a provider's SDK, AG-UI): it is not
published on PyPI, so its extras are installed from its folder, or the package alone."""

from __future__ import annotations


def install_hint(extra: str, package: str) -> str:
    """The words that say how to install the extra `extra`, which brings `package`."""
    return f"pip install -e '.[{extra}]' in duragent's folder, or pip install {package}"
