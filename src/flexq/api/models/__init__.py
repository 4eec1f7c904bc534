"""The object schemas flexq validates against (pydantic models; unknown fields are kept)."""
