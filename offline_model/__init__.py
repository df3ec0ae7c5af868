"""An offline stand-in for the Anthropic Messages API that plays a scripted conversation.

Start an `OfflineModelServer` with a `Script` (or a script file, see `load_script`) and point
the real SDK at it: `anthropic.AsyncAnthropic(base_url=server.base_url, api_key="offline")`.
Each request consumes the next `Step` of its conversation (keyed by `metadata.user_id`).
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
