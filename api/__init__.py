"""The HTTP API: sessions, input, the input queue, state and a resumable event stream."""
