"""One contract suite for every HA store implementation: memory, ConfigMaps on the API server, S3."""
