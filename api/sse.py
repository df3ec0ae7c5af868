"""How the API's event streams (Server-Sent Events) read the store and stay open."""

# Events reach the API through the store (workers are other processes); an indexed read
# every 20 ms keeps a streamed delta under ~35 ms from the model to the browser.
SSE_POLL_S = 0.02
SSE_KEEPALIVE_S = 15.0
"""A quiet stream sends a comment this often, so proxies keep it open."""
KEEPALIVE = ": keep-alive\n\n"
