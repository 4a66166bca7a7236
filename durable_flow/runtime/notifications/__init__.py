"""Telling people about requests: notifiers (webhook, email) and the outbox that delivers them."""
