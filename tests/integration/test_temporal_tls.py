"""A Temporal cluster behind mutual TLS, as production runs one: the standard
`TEMPORAL_TLS_*` variables carry a command's client certificate, the CA and the server's
name to the real dev server behind a TLS front; without its certificate a command is
refused with a clear error, and no dev server is started in its place."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from processes import REPO
from tls_support import SERVER_NAME, TlsTerminator, make_certificates

from duragent.temporal_dev import DevServer


async def duragent(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "duragent.client.cli",
        *args,
        cwd=cwd,
        env={**env, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    return await process.wait(), out.decode(), err.decode()


def plain_environment() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "DURAGENT_", "TEMPORAL_"))
    }


async def test_a_run_over_mutual_tls_and_a_clear_refusal_without_the_certificate(
    dev_server: DevServer, tmp_path: Path
) -> None:
    certs = make_certificates(tmp_path)
    async with TlsTerminator(certs, dev_server.address) as front:
        env = plain_environment() | {
            "TEMPORAL_ADDRESS": front.address,
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client_cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client_key),
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca),
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        }
        code, out, err = await duragent(tmp_path, env, "run", "Write a hello script and run it")
        assert code == 0, err
        assert "run completed after 4 turn(s)" in out and "hello from duragent" in out
        assert "Started a Temporal dev server" not in err
        assert front.connections > 0  # every call went through the TLS front

        without_cert = {k: v for k, v in env.items() if not k.startswith("TEMPORAL_TLS_CLIENT_")}
        code, out, err = await duragent(tmp_path, without_cert, "run", "hello")
        assert code == 2
        assert err.splitlines()[-1].startswith(
            f"error: Temporal at {front.address} is not reachable over TLS"
        )
        assert "Started a Temporal dev server" not in err
