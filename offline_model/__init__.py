"""An offline, scripted stand-in for the model APIs: it plays a scripted conversation.

It speaks the Anthropic Messages API, OpenAI's Chat Completions and OpenAI's Responses API,
streaming included. Start an `OfflineModelServer` with a `Script` (or a script file, see
`load_script`) and point the real SDK at it:
`anthropic.AsyncAnthropic(base_url=server.base_url, api_key="offline")` or
`openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="offline")`. Each request
consumes the next `Step` of its conversation (keyed by `metadata.user_id` on Anthropic's
wire, by `user` on OpenAI's; see `offline_model.script`).
"""

from duragent.offline_model.chaos import Chaos
from duragent.offline_model.script import DEMO_SCRIPT, Script, Step, load_script
from duragent.offline_model.server import OfflineModelServer, RecordedRequest, serve_forever

__all__ = [
    "DEMO_SCRIPT",
    "Chaos",
    "OfflineModelServer",
    "RecordedRequest",
    "Script",
    "Step",
    "load_script",
    "serve_forever",
]
