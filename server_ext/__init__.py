"""paddle-nbext server extension (see docs/architecture.md)."""
