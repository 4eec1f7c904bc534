"""The object service between the front doors and the store: validate, convert, default, patch, status."""
