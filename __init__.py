"""duragent: a durable, steerable agent harness for Python on Temporal."""
