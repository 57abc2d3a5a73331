"""SQLite: Jobs, Runs, settings; the schema and its migrations; repair; disk room."""
