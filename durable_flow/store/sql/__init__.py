"""The SQL base shared by every SQL store: tables, statements, transaction functions, migrations."""
