"""The pure core: models, phases, decisions, restart strategies. No kopf, kubernetes or boto3 here."""
