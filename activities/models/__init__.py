"""Model clients behind one seam (`seam`): a worker's clients per provider (`clients`),
and one module per wire API (`anthropic_model`, `openai_chat`, `openai_responses`); what
their failures share (HTTP statuses, retry advice, broken streams) in `transport_failures`."""
