// Package lifecycle keeps one writer per home and runs an MCP server around
// it through start-up, serving and shutdown.
//
// Lock is the single-instance lock: an exclusive flock held for the whole
// life of the process on <home>/.lock.flock (the kernel drops it however the
// process dies), with a PID file at <home>/.lock beside it for tools. A dead
// PID, a PID reused by another process, and an empty or garbage PID file are
// stale and reclaimed; a live process of another user is not.
//
// Harness wires the toolkit around a go-sdk *mcp.Server: lock, bootstrap,
// recovery, a bound listener, the state file with a bearer token, the
// discovery registry, stdio and Streamable HTTP, health checks, and a
// graceful shutdown that finishes in-flight calls and commits the config.
// One writer does not mean one client: a Run that finds the home locked
// attaches to the writer over a unix socket and serves its client through
// it, and when the writer goes an attached process takes over (see Run).
// It runs gitstore's housekeeping (Maintain) beside the server.
//
// Env.Update is how a server changes config: a function run with a
// transaction (Tx), whose writes are committed together, durably, or not
// at all; concurrent transactions, from every session and every attached
// client, share their fsyncs. lifecycle does not make a server's own tool
// handlers correct: changes must go through Env.Update to be durable and
// all-or-nothing.
package lifecycle
