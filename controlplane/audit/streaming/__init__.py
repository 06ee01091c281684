"""The audit trail, streamed as it is appended to a team's SIEM: syslog (RFC 5424 over TCP with
TLS), JSON Lines to a file or an HTTP collector; at least once, in order, from a cursor in the
database. README.md in this folder is the reference (schema, delivery, receiver set-up)."""
