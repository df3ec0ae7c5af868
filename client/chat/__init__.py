"""`duragent chat`: a full-screen terminal chat with a session (Textual)."""
