"""Tools from MCP servers: the config file, one kept-open connection per server, the tools.

A worker reads the servers from the file `DURAGENT_MCP_CONFIG` names (`config.py`). Each
server's connection (`connection.py`) is opened on first use and kept open on the
worker's event loop, shared by every call to that server, reopened after it fails and
closed when the worker stops. `tools.py` offers each server's tools to the model as
`<server>__<tool>` (`names.py`) through the `ToolRegistry`, so calls run as the ordinary
`run_tool` activity. `config.py` imports no part of the SDK: clients read the file too.
"""
