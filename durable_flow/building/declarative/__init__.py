"""The declarative nodes/connections format (JSON and YAML): loading, parsing, dumping."""
