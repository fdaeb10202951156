"""Small interfaces between the core and the outside world; adapters implement them."""
