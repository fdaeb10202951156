"""Adapters on S3 (boto3)."""
