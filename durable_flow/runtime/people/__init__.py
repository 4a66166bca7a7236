"""People of the web app and the approvals: users, password hashes, signed answer links."""
