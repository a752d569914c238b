"""The model client: request, transport, reply parsing, streaming, reply guard."""
