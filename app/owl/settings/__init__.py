"""Configuration: the person's config.toml, a project's .owl.toml, and paths."""
