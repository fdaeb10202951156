"""Small interfaces between the core and the outside world; adapters implement them.

Each module says how to add an implementation and which tests it must pass.
"""
