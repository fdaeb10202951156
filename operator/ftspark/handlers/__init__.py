"""kopf handlers: thin — they only put the affected job's key on the work queue."""
