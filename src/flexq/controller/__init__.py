"""Controllers of the live server: the queue controller runs the scheduler against the store."""
