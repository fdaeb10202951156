"""The streaming examples as test subjects: their scripts, inputs and exactly-once checks."""
