"""`python -m duragent`: the `duragent` command, for where the script is not on PATH (a
virtual environment not activated, `python -m` habits, a `pipx run`-less machine)."""

from duragent.client.cli import main

main()
