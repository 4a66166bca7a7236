"""The declarative nodes/connections format (JSON or YAML): loading, parsing, dumping."""
