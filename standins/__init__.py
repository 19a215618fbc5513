"""Local stand-ins for the managed services the tests need. Tooling only: never in an image."""
