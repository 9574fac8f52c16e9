"""hoptrace demo chain: client, gateway, app and model services (FastAPI)."""
