//go:build unix

// Package attach lets every process launched on a home serve its MCP
// client while the home keeps one writer: the writer serves attached
// sessions on a unix socket (Listener), and a process that finds the home
// locked forwards its client's messages to the writer (Forwarder).
//
// The socket is bound under a temporary name and renamed into place once
// it listens, so no process ever dials a socket that is not ready; it is
// mode 0600 in a 0700 directory, and both ends check that the other runs
// as the same user (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS). Every
// connection starts with one JSON line each way (Hello), then carries
// newline-delimited JSON-RPC, the stdio framing, with go-sdk's IOTransport
// at both ends: one go-sdk ServerSession on the writer per attached client.
//
// A Forwarder survives its writer: it keeps what is needed to set its
// client's session up again on the next writer (initialize, initialized,
// the logging level, resource subscriptions) and replays it there without
// the client seeing it. A request the writer never read is sent to the next
// one; a tools/call (or any method not known to be free of effects) the
// writer may have run gets a JSON-RPC error with code CodeOutcomeUnknown
// instead, never a silent second run. A Listener that shuts down stops
// reading, answers what it read, and tells each forwarder which requests it
// read but could not answer, so that after a clean handover the rest are
// sent again.
//
// It does not decide who writes (the home lock does) nor start a writer:
// lifecycle does both.
package attach
