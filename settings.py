"""Settings shared by the worker, the client and the CLI: environment first, then flags
(pydantic-settings; the defaults are the fields' own, below). An empty variable is unset.

| variable | default |
|---|---|
| `DURAGENT_HOME` | `./.duragent` (state: database, dev server, workspaces) |
| `DURAGENT_DATABASE_URL` | `sqlite:///$DURAGENT_HOME/duragent.db` |
| `DURAGENT_DATABASE_LISTEN_URL` | the store's; behind a pooler, PostgreSQL's own (cancel hints) |
| `TEMPORAL_ADDRESS` | this home's own dev server: `127.0.0.1:7233`, or the port its record names |
| `TEMPORAL_NAMESPACE` | `default` |
| `DURAGENT_TASK_QUEUE` | `duragent` |
| `DURAGENT_MODEL` | `claude-sonnet-5-5` |
| `ANTHROPIC_API_KEY` | none: the offline (scripted) model is used |
| `ANTHROPIC_BASE_URL` | Anthropic's |
| `OPENAI_API_KEY`, `OPENAI_BASE_URL`, ... | each provider's own (docs/MODELS.md) |
| `DURAGENT_OFFLINE_MODEL_URL` | set by the CLI: the offline model, for providers with no key |
| `DURAGENT_OFFLINE_SCRIPT` | the bundled demo script |
| `DURAGENT_HEARTBEAT_TIMEOUT` | `60` seconds: a lost worker's call moves on then, if no lease did |
| `DURAGENT_HEARTBEAT_THROTTLE_MS` | `50` (abort latency is about this plus 5 ms) |
| `DURAGENT_WORKER_LEASE` | `2` seconds: a worker whose lease lapses this long is lost (0: off) |
| `DURAGENT_MODEL_READ_TIMEOUT` | `120` seconds without a byte from the model: a hung stream |
| `DURAGENT_STREAM_FLUSH_MS` | `50`: a streamed reply reaches readers through the store this often |
| `DURAGENT_API_TOKENS` | `token=user,...` for the HTTP API (none: `serve` makes one up) |
| `DURAGENT_WORKSPACE_ROOTS` | none: `:`-separated folders API users may also put workspaces in |
| `DURAGENT_TEMPORAL_UI_PORT` | Temporal's port + 1000: the web UI a started dev server serves |
| `DURAGENT_TOOL_ENV` | tools get PATH, HOME, LANG, LC_*, TZ...; add `NAME`, `P*`, `NAME=value` |
| `DURAGENT_TOOL_SANDBOX` | `none`; `bwrap`: tool commands run in a bubblewrap sandbox |
| `DURAGENT_MCP_CONFIG` | none: the MCP servers file (YAML or JSON) whose tools workers offer |
| `DURAGENT_PLUGINS` | none: `module:attr,...`: plugins beside the installed ones |
| `DURAGENT_PRICES_FILE` | none: a price table (TOML) whose models replace or add to the bundled |
| `DURAGENT_WORKER_METRICS` | none (off): `host:port` where a worker serves Prometheus metrics |
| `DURAGENT_API_METRICS` | off: `1` serves Prometheus metrics at the API's `/metrics` |
| `DURAGENT_HOST` | the machine's host name: the host whose workspaces this worker's tools use |
| `DURAGENT_SHARED_WORKSPACES` | `false`; `true`: all workers see all workspaces (no host queues) |
| `DURAGENT_HOST_ONLY` | `false`; `true`: this worker runs only its host's tool calls, no runs |
| `DURAGENT_HOST_WAIT` | `600` seconds a run waits for its session's host to come back |
| `DURAGENT_SCHEDULE_CATCHUP_WINDOW` | `3600` seconds a firing missed in an outage may run late |
| `TEMPORAL_TLS` | off, unless a TLS file, server name or API key below is set |
| `TEMPORAL_TLS_CLIENT_CERT_PATH` | none: a client certificate (PEM), for mTLS |
| `TEMPORAL_TLS_CLIENT_KEY_PATH` | none: that certificate's private key (PEM) |
| `TEMPORAL_TLS_SERVER_CA_CERT_PATH` | none: the system's roots verify the server |
| `TEMPORAL_TLS_SERVER_NAME` | the address's host: the name the server's certificate must bear |
| `TEMPORAL_API_KEY` | none: a Temporal Cloud API key (sent as a bearer token, over TLS) |
| `DURAGENT_WORKER_MAX_ACTIVITIES` | `500` model and tool calls at once on each worker queue |
| `DURAGENT_WORKER_MAX_WORKFLOW_TASKS` | `10` run steps (and store steps) at once per worker |
| `DURAGENT_WORKER_CACHED_RUNS` | `1000` runs kept in a worker's memory between their steps |
| `DURAGENT_WORKER_POLLERS` | `5` polls at once per worker for each of run steps and calls |
| `DURAGENT_DATABASE_POOL_SIZE` | `10` connections per process (and as many more under a burst) |
| `DURAGENT_DATABASE_PREPARED_STATEMENTS` | `true`; `false` through PgBouncer in transaction mode |
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from duragent.domain.hosts import HOST_NAME_RULE, host_task_queue, is_host_name, sanitized_host_name
from duragent.domain.models import PROVIDERS, UnknownModel, endpoint, parse_model
from duragent.domain.prices import PriceFileError
from duragent.settings_checks import (
    TOOL_ENV_RULE,
    TOOL_SANDBOXES,
    SettingError,
    ToolSandbox,
    check_bind_address,
    check_pem_file,
    check_temporal_tls,
    check_tool_env_entry,
    parse_tokens,
    parse_tool_env,
    parse_tool_sandbox,
    read_price_file,
    tls_given,
)
from duragent.temporal_dev.record import read_record, record_path

# The model, and the rules of single variables (`settings_checks`) where users import them.
__all__ = [
    "TOOL_ENV_RULE",
    "TOOL_SANDBOXES",
    "SettingError",
    "Settings",
    "ToolSandbox",
    "check_bind_address",
    "check_pem_file",
    "check_temporal_tls",
    "check_tool_env_entry",
    "parse_tokens",
    "parse_tool_env",
    "parse_tool_sandbox",
    "read_price_file",
]


def _env(variable: str, default: object) -> Any:
    """A field that reads `variable` rather than `DURAGENT_<FIELD>` (overrides still go by
    the field's name)."""
    return Field(default, validation_alias=variable)


class Settings(BaseSettings):
    """Each field reads `DURAGENT_<FIELD>` unless it names its variable; an empty variable
    counts as unset. Overrides (`from_env(**overrides)`, the CLI's flags) win over both."""

    model_config = SettingsConfigDict(
        env_prefix="DURAGENT_",
        env_ignore_empty=True,
        extra="forbid",
        validate_by_name=True,
        # Errors name the field (`heartbeat_timeout_s: ...`), as the CLI has always said.
        loc_by_alias=False,
    )

    home: Path = Path(".duragent")
    database_url: str = ""
    """Empty: `sqlite:///$DURAGENT_HOME/duragent.db`."""
    database_listen_url: str | None = None
    """PostgreSQL: where each worker's one connection listens for cancel hints
    (`activities.cancel_hints`); None: `database_url`. A pooler in transaction mode
    (PgBouncer) drops `LISTEN`, so behind one this is the server's direct address."""
    temporal_address: str = _env("TEMPORAL_ADDRESS", "127.0.0.1:7233")
    """Unset: this home's own dev server (`home_dev_server`), at 7233 unless its record
    (beside its database file) names the port it took when 7233 was another's."""
    temporal_namespace: str = _env("TEMPORAL_NAMESPACE", "default")
    task_queue: str = "duragent"
    model: str = "claude-sonnet-5-5"
    anthropic_api_key: str | None = _env("ANTHROPIC_API_KEY", None)
    anthropic_base_url: str | None = _env("ANTHROPIC_BASE_URL", None)
    offline_model_url: str | None = None
    """Where the offline model serves: a provider with neither key nor address of its own
    is asked there (`domain.models.endpoint`). The CLI sets it when it starts one."""
    offline_script: Path | None = None
    heartbeat_timeout_s: float = _env("DURAGENT_HEARTBEAT_TIMEOUT", 60.0)
    """A running model or tool call whose worker sends no heartbeat this long counts as
    lost and is retried elsewhere. Worker leases (`worker_lease_s`) notice a lost worker
    far sooner; this is the backstop when they cannot (the store unreachable, leases
    off, a worker lost in the first moment of a call). A call heartbeats every third of
    it (each heartbeat is a Temporal action: 3 a minute at 60 s), and at once when it is
    cancelled (`activities.heartbeat`). A Temporal server down longer than this (a
    restart) times out the calls running meanwhile."""
    worker_lease_s: float = Field(2.0, ge=0, validation_alias="DURAGENT_WORKER_LEASE")
    """A worker process renews a lease in the store (`activities.leases`); one whose
    lease has not changed for this long, as another worker sees it, is lost, and that
    worker fails its running calls so that their next attempts start at once (recovery
    in about this plus half a second, whatever the heartbeat timeout). 0: no leases;
    a lost worker's calls wait for their heartbeat timeout."""
    heartbeat_throttle_ms: int = 10
    """While a call's cancellation is on its way, it heartbeats this soon, then at
    pauses doubling up to five times this, until the reply carries it: the abort latency
    bound (`activities.heartbeat`). Steady-state heartbeats do not depend on it."""
    stream_flush_ms: int = Field(50, ge=10, le=5000)
    """How often, at most, a model call writes what it has streamed so far to the store,
    where readers (the page, the API, `duragent chat`) follow it: one statement a flush on
    PostgreSQL, so a fleet streaming many replies at once trades smoothness for store load
    here (docs/SCALING.md). The first text after a pause is written at once."""
    api_tokens: Annotated[dict[str, str], NoDecode] = {}
    """Bearer token -> user name, for the HTTP API."""
    model_read_timeout_s: float = _env("DURAGENT_MODEL_READ_TIMEOUT", 120.0)
    """Seconds without a byte from the model before the stream counts as hung."""
    workspace_roots: Annotated[list[Path], NoDecode] = []
    """Folders under which HTTP API users may name a workspace, besides their own area
    (`client.workspaces`). Folders inside the state directory are never allowed."""
    temporal_ui_port: int | None = None
    """The Temporal web UI's port; None: Temporal's port + 1000, as the dev server does."""
    tool_env: Annotated[list[str], NoDecode] = []
    """Environment for tool processes beyond the allow-list (`NAME`, `PREFIX*`,
    `NAME=value`); see `activities.tools.environment`."""
    tool_sandbox: ToolSandbox = "none"
    """Where tool commands run: on the host (`none`) or in a bubblewrap sandbox."""
    mcp_config: Path | None = None
    """The MCP servers a worker connects to (`activities.mcp.config`); clients read it
    too, to know which `<server>__<tool>` names a session's active tools may hold."""
    plugins: Annotated[list[str], NoDecode] = []
    """`module:attr` of each `duragent.Plugin` to load beside the installed ones (entry
    point group `duragent.plugins`); workers and clients load the same (`client.plugins`)."""
    prices_file: Path | None = None
    """A price table of the bundled one's shape (`domain/prices.toml`) whose models
    replace or join the bundled ones; read and checked when the settings are."""
    # Schedules (client/schedules.py)
    schedule_catchup_window_s: float = Field(
        3600.0, ge=10, validation_alias="DURAGENT_SCHEDULE_CATCHUP_WINDOW"
    )
    """A schedule's firing missed while Temporal (or the schedule) could not act, an
    outage, still runs when it comes back within this many seconds of its time
    (Temporal's catch-up window; at least 10 s); later ones are dropped. Set on each
    schedule when it is made."""
    # Hosts (domain/hosts.py)
    host: str = ""
    """The host this worker runs tools on (its workspaces); empty: the machine's name."""
    shared_workspaces: bool = False
    """Every worker sees every workspace (shared storage): tool calls stay on the shared
    task queue and sessions record no host."""
    host_wait_s: float = _env("DURAGENT_HOST_WAIT", 600.0)
    """How long a run waits for its session's host to come back before it ends."""
    ask_user_timeout_s: float | None = _env("DURAGENT_ASK_USER_TIMEOUT", None)
    """How long an `ask_user` question waits for its answer (seconds; unset: as long as
    it takes). A question that times out answers the call with an error saying so."""
    host_only: bool = False
    """This worker polls only its host's queue: its sessions' tool calls and workspace
    moves, no runs or model calls (a machine that runs tools; other workers run the
    rest). Not with shared workspaces, which have no host queues."""

    @field_validator("host")
    @classmethod
    def _check_host(cls, host: str) -> str:
        if host and not is_host_name(host):
            raise SettingError(f"DURAGENT_HOST: {host!r} is not a host name ({HOST_NAME_RULE})")
        return host

    @field_validator("model")
    @classmethod
    def _check_model(cls, model: str) -> str:
        try:
            parse_model(model)
        except UnknownModel as exc:
            raise SettingError(f"DURAGENT_MODEL: {exc}") from None
        return model

    @field_validator("host_wait_s")
    @classmethod
    def _check_host_wait(cls, seconds: float) -> float:
        if not seconds > 0:
            raise SettingError(
                f"DURAGENT_HOST_WAIT: {seconds!r} is not a number of seconds above 0"
            )
        return seconds

    @field_validator("ask_user_timeout_s")
    @classmethod
    def _check_ask_user_timeout(cls, seconds: float | None) -> float | None:
        if seconds is not None and not seconds > 0:
            raise SettingError(
                f"DURAGENT_ASK_USER_TIMEOUT: {seconds!r} is not a number of seconds above 0"
            )
        return seconds

    @model_validator(mode="after")
    def _check_host_only(self) -> Self:
        if self.host_only and self.shared_workspaces:
            raise SettingError(
                "DURAGENT_HOST_ONLY is set with DURAGENT_SHARED_WORKSPACES: shared workspaces "
                "have no host queue to serve; unset one of them"
            )
        return self

    @model_validator(mode="after")
    def _default_host(self) -> Self:
        if not self.host:
            self.host = sanitized_host_name(socket.gethostname())
        return self

    @property
    def host_queue(self) -> str | None:
        """The task queue of this host's tool calls; None with shared workspaces."""
        return None if self.shared_workspaces else host_task_queue(self.task_queue, self.host)

    # Telemetry: metrics (docs/ARCHITECTURE.md, "Metrics and traces")
    worker_metrics: str | None = None
    """`host:port` on which a worker serves Prometheus metrics at `/metrics` (Temporal's
    SDK metrics and duragent's own); None: no port is bound and nothing is recorded."""
    api_metrics: bool = False
    """Whether the HTTP API serves Prometheus metrics at `/metrics` (off: 404)."""

    @field_validator("worker_metrics")
    @classmethod
    def _check_worker_metrics(cls, address: str | None) -> str | None:
        if address is not None:
            check_bind_address(address)
        return address

    # Temporal connection: a cluster or Temporal Cloud, by the variables Temporal's CLI
    # and SDKs read (`temporalio.envconfig`); `client.connection` turns them into TLS.
    temporal_tls: bool | None = _env("TEMPORAL_TLS", None)
    """None: TLS when any setting below asks for it; False: never (a plain proxy)."""
    temporal_tls_client_cert: Path | None = _env("TEMPORAL_TLS_CLIENT_CERT_PATH", None)
    temporal_tls_client_key: Path | None = _env("TEMPORAL_TLS_CLIENT_KEY_PATH", None)
    temporal_tls_server_ca: Path | None = _env("TEMPORAL_TLS_SERVER_CA_CERT_PATH", None)
    temporal_tls_server_name: str | None = _env("TEMPORAL_TLS_SERVER_NAME", None)
    temporal_api_key: SecretStr | None = _env("TEMPORAL_API_KEY", None)
    """Temporal Cloud's API key; a SecretStr so that no repr or log shows it."""
    # Worker tuning: what one worker takes on at once. Past it, work waits in Temporal's
    # queues, in order and with no timeout, so an overloaded worker slows down evenly.
    worker_max_activities: int = Field(500, ge=1)
    """Model and tool calls at once on each of a worker's queues (the shared one, and its
    host's, where its sessions' tool calls go). They mostly wait (on the model, on a
    process), so many fit; each running one is a coroutine and, for a tool, its process."""
    worker_max_workflow_tasks: int = Field(10, ge=2)
    """Run steps (workflow tasks) at once; also the bound on local store steps. They
    are CPU work, one at a time under the GIL anyway: more at once only starve the event
    loop that sends heartbeats, until the calls it runs look lost."""
    worker_cached_runs: int = Field(1000, ge=0)
    """Runs kept in memory between their steps; one evicted replays its history."""
    worker_pollers: int = Field(5, ge=2)
    """Concurrent polls of Temporal per worker, for run steps and for calls each."""
    database_pool_size: int = Field(10, ge=1)
    """Store connections a process keeps open; as many more open under a burst."""
    database_prepared_statements: bool = True
    """PostgreSQL: whether psycopg may prepare a statement a connection runs often on the
    server. Off through a pooler in transaction mode that cannot keep them (PgBouncer
    before 1.21), which gives each transaction another server session (`store.db`)."""

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        return home.expanduser().resolve()

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, url: str) -> str:
        if not url:
            return url  # the default, filled in once `home` is known
        try:
            make_url(url)
        except ArgumentError as err:
            raise ValueError(f"not a SQLAlchemy database URL ({err})") from None
        return url

    @field_validator("database_listen_url")
    @classmethod
    def _check_database_listen_url(cls, url: str | None) -> str | None:
        try:
            backend = make_url(url).get_backend_name() if url else "postgresql"
        except (ArgumentError, ValueError) as err:
            raise ValueError(f"not a PostgreSQL URL ({err})") from None
        if backend != "postgresql":
            raise ValueError(f"not a PostgreSQL URL (its backend is {backend!r})")
        return url

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _read_tokens(cls, value: object) -> object:
        return parse_tokens(value) if isinstance(value, str) else value

    @field_validator("workspace_roots", mode="before")
    @classmethod
    def _read_roots(cls, value: object) -> object:
        if isinstance(value, str):
            return [Path(p.strip()) for p in value.split(":") if p.strip()]
        return value

    @field_validator("tool_env", mode="before")
    @classmethod
    def _read_tool_env(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_tool_env(value)
        if isinstance(value, list):
            for entry in value:
                check_tool_env_entry(str(entry))
        return value

    @field_validator("plugins", mode="before")
    @classmethod
    def _read_plugins(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("tool_sandbox", mode="before")
    @classmethod
    def _read_tool_sandbox(cls, value: object) -> object:
        return parse_tool_sandbox(value) if isinstance(value, str) else value

    @field_validator("prices_file")
    @classmethod
    def _check_prices_file(cls, path: Path | None) -> Path | None:
        if path is not None:
            try:
                read_price_file(path)
            except PriceFileError as err:
                raise SettingError(f"DURAGENT_PRICES_FILE: {err}") from None
        return path

    @model_validator(mode="after")
    def _default_database(self) -> Self:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'duragent.db'}"
        return self

    _home_dev_server: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _home_temporal(self) -> Self:
        if "temporal_address" in self.model_fields_set:
            return self
        self._home_dev_server = True
        record = read_record(record_path(self.dev_server_db))
        if record is not None:
            self.temporal_address = record.address
            if self.temporal_ui_port is None:
                self.temporal_ui_port = record.ui_port
        return self

    @property
    def home_dev_server(self) -> bool:
        """Whether Temporal is this home's own dev server (no `TEMPORAL_ADDRESS` given):
        commands start it when it is not running, and never use a server another home
        started, even at the default port (`client.services.ensure_temporal`)."""
        return self._home_dev_server

    @model_validator(mode="after")
    def _check_temporal_tls(self) -> Self:
        check_temporal_tls(self)
        return self

    @property
    def offline(self) -> bool:
        """The default model's provider has neither key nor address of its own: the
        scripted offline model stands in for it."""
        return self.offline_for(self.model)

    def offline_for(self, model: str) -> bool:
        """Whether the scripted offline model stands in for `model` (`provider:model`, bare
        for Anthropic's): its provider has neither key nor address of its own. A model of
        no provider this knows: False."""
        try:
            provider = PROVIDERS[parse_model(model).provider]
        except UnknownModel:
            return False
        environ = self.provider_environ()
        url = environ.get(provider.base_url_env or "", "").rstrip("/")
        offline = (self.offline_model_url or "").rstrip("/")
        if url and offline and not environ.get(provider.key_env or ""):
            # Its address is the offline model's (a test's or a benchmark's stack).
            return url in (offline, offline + "/v1")
        return endpoint(provider, offline_base_url="offline", environ=environ).offline

    def provider_environ(self) -> dict[str, str]:
        """The model providers' variables (keys and addresses, `domain.models.PROVIDERS`)
        as this process has them, Anthropic's as these settings say."""
        names = {v for p in PROVIDERS.values() for v in (p.key_env, p.base_url_env) if v}
        found = {name: os.environ[name] for name in names if os.environ.get(name)}
        for name, value in (
            ("ANTHROPIC_API_KEY", self.anthropic_api_key),
            ("ANTHROPIC_BASE_URL", self.anthropic_base_url),
        ):
            if value:
                found[name] = value
            else:
                found.pop(name, None)
        return found

    @property
    def temporal_tls_on(self) -> bool:
        """Whether the connection to Temporal is TLS, as Temporal's own clients decide:
        `TEMPORAL_TLS` if set, else on when a TLS setting or an API key is."""
        if self.temporal_tls is not None:
            return self.temporal_tls
        return self.temporal_api_key is not None or self.temporal_tls_given

    @property
    def temporal_tls_given(self) -> bool:
        """Whether a TLS file or the server's name is set."""
        return bool(tls_given(self))

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

    @property
    def web_ui_port(self) -> int | None:
        """The port of Temporal's web UI (None: the address has no port to go by)."""
        if self.temporal_ui_port is not None:
            return self.temporal_ui_port
        port = self.temporal_address.rpartition(":")[2]
        return int(port) + 1000 if port.isdigit() and int(port) + 1000 < 65536 else None

    @property
    def resources_dir(self) -> Path:
        """Skills and prompt templates every session can use (`skills/`, `prompts/`)."""
        return self.home / "resources"

    @property
    def tool_processes(self) -> Path:
        """Where running tool processes are recorded, for the next attempt on this machine."""
        return self.home / "tool-processes"

    @property
    def mcp_logs(self) -> Path:
        """Where stdio MCP servers' stderr goes, a file per server (`<server>.log`)."""
        return self.home / "mcp-logs"

    @property
    def dev_server_db(self) -> Path:
        return self.home / "temporal.db"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """The environment's settings with `overrides` (those not None) on top.

        Raises:
            SettingError: a variable breaks its own rule (the message says which, and the
                rule), as is.
            ValidationError: a value of the wrong type or form, naming the field.
        """
        given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
        try:
            return cls(**given)
        except ValidationError as error:
            for detail in error.errors():
                rule = detail.get("ctx", {}).get("error")
                if isinstance(rule, SettingError):
                    raise rule from None
            raise
