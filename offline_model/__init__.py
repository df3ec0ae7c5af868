"""An offline, scripted stand-in for the model APIs: it plays a scripted conversation.

It speaks the Anthropic Messages API, OpenAI's Chat Completions and OpenAI's Responses API,
streaming included. Start an `OfflineModelServer` with a `Script` (or a script file, see
`load_script`) and point the real SDK at it:
`anthropic.AsyncAnthropic(base_url=server.base_url, api_key="offline")` or
`openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="offline")`. Each request
gets a `Step` of its conversation (keyed by `metadata.user_id` on Anthropic's wire, by
`user` on OpenAI's): the next one, or with `pick: turn` the one of the turn the
conversation is at (see `offline_model.script`; docs/offline-script.md has every field).
"""

from duragent.offline_model.chaos import Chaos
from duragent.offline_model.script import DEMO_SCRIPT, Script, Step, load_script
from duragent.offline_model.server import OfflineModelServer, RecordedRequest, serve_forever

WIRE_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-5-5",
    "openai": "openai:gpt-4.1",
    "openai-responses": "openai-responses:gpt-4.1",
}
"""A model of each wire the offline model plays, as sessions name it (tests and benchmarks
run the same scripts on each)."""

__all__ = [
    "DEMO_SCRIPT",
    "WIRE_MODELS",
    "Chaos",
    "OfflineModelServer",
    "RecordedRequest",
    "Script",
    "Step",
    "load_script",
    "serve_forever",
]
