"""The object API: kinds, schemas, versions, defaults, validation and the errors a bad object gets."""
