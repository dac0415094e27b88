package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/portmgr"
)

// FuzzOptions: no Options value makes New or Run panic. New refuses what
// it cannot use with an *OptionsError; Run, on Options New took, starts
// and stops (its stdin is at its end, or its context ends) with an error
// or none, on a home that is missing, empty, a file, inside a file or a
// directory of someone else's files. `go test` runs the seeds; run
// `go test -fuzz FuzzOptions ./lifecycle` to search.
func FuzzOptions(f *testing.F) {
	// A working server, then one field off at a time.
	f.Add("notes", "v0", uint8(0), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "v0", uint8(1), 0, "cache|a/b", "", false, false, true, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "v0", uint8(2), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "v0", uint8(3), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "v0", uint8(4), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "v0", uint8(0), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(1), 0, int64(0))
	f.Add("notes", "v0", uint8(0), 1, "", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(2), 0, int64(0))
	f.Add("notes", "v0", uint8(0), 2, "state.json|config|.lock|backups/x", "", false, false, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Add("notes", "", uint8(0), 1, "", "127.0.0.1:0", true, true, false, 2, int64(-1), int64(-1), int64(-1), uint8(0), -1, int64(-1))
	f.Add("notes", "v0", uint8(1), 1, "", "localhost:0", false, false, false, 1, int64(1), int64(1), int64(1), uint8(0), 1, int64(1))
	f.Add("\x00\n", "\x00", uint8(0), 1, "", "", false, false, false, 0, int64(1<<40), int64(1e9), int64(1e6), uint8(0), 1000000, int64(1))
	// Refused by New.
	f.Add("", "", uint8(1), 0, "cache", "127.0.0.1:0", true, true, true, 1, int64(-1), int64(-1), int64(-1), uint8(1), -1, int64(-5))
	f.Add("n", "v", uint8(2), -3, "../x|/abs", "127.0.0.1", false, false, false, 9, int64(10), int64(1), int64(1), uint8(2), 0, int64(0))
	f.Add("n", "v", uint8(0), 1, "a|a|b/c", ":0", false, true, false, 0, int64(0), int64(0), int64(0), uint8(0), 0, int64(0))
	f.Fuzz(func(t *testing.T, name, version string, homeKind uint8, schema int, dirs, httpAddr string,
		noStdio, noToken, exclusive bool, mode int, maxFile, health, shutdown int64, serverKind uint8, limit int, limitDur int64) {
		dir := t.TempDir()
		opts := lifecycle.Options{
			Name:            name,
			Version:         version,
			Home:            fuzzHome(t, dir, homeKind),
			Spec:            bootstrap.Spec{Schema: schema, Defaults: fstest.MapFS{"notes.yaml": {Data: []byte("notes: []\n")}}},
			NewServer:       fuzzServer(serverKind),
			NoStdio:         noStdio,
			Exclusive:       exclusive,
			HTTP:            httpAddr,
			NoToken:         noToken,
			HTTPMode:        lifecycle.HTTPMode(mode),
			Registry:        filepath.Join(dir, "servers.json"),
			MaxFileSize:     maxFile,
			HealthInterval:  time.Duration(health),
			ShutdownTimeout: time.Duration(shutdown),
			HTTPLimits: lifecycle.HTTPLimits{
				SessionIdleTimeout: time.Duration(limitDur), MaxSessions: limit, ReadHeaderTimeout: time.Duration(limitDur),
				IdleTimeout: time.Duration(limitDur), BodyReadTimeout: time.Duration(limitDur), MaxConnections: limit,
				MaxBodyBytes: int64(limit), MaxBatch: limit, MaxBatchReplyBytes: int64(limit),
			},
			Stdin:     strings.NewReader(""), // stdio stops at once
			Stdout:    io.Discard,
			NoSignals: true,
		}
		if dirs != "" {
			opts.Spec.Dirs = strings.Split(dirs, "|")
		}
		h, err := lifecycle.New(opts)
		if err != nil {
			var oe *lifecycle.OptionsError
			require.ErrorAs(t, err, &oe, "New's error names the field")
			require.Nil(t, h)
			return
		}
		if host, _, err := net.SplitHostPort(httpAddr); err == nil && !portmgr.IsLoopback(host) {
			return // a test serves this machine alone
		}
		// The HTTP-only server's stop. Short, because the fuzzer runs an
		// input it minimizes a hundred times (.ci/run's
		// -fuzzminimizetime 100x): at a second each, one new input took
		// the run two minutes. A start it cuts short is a case too.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_ = h.Run(ctx) // an error is fine; a panic or a hang is not
	})
}

// fuzzHome returns a home below dir of the kind k: missing, empty, a
// file, inside a file, or a directory holding someone else's file.
func fuzzHome(t *testing.T, dir string, k uint8) string {
	home := filepath.Join(dir, "home")
	switch k % 5 {
	case 1:
		require.NoError(t, os.Mkdir(home, 0o700))
	case 2:
		require.NoError(t, os.WriteFile(home, []byte("a file"), 0o600))
	case 3:
		require.NoError(t, os.WriteFile(home, []byte("a file"), 0o600))
		return filepath.Join(home, "home")
	case 4:
		require.NoError(t, os.Mkdir(home, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(home, "thesis.txt"), []byte("mine"), 0o600))
	}
	return home
}

// fuzzServer returns a NewServer of the kind k: one that works, one that
// returns a nil server and no error, or one that fails.
func fuzzServer(k uint8) func(*lifecycle.Env) (*mcp.Server, error) {
	switch k % 3 {
	case 1:
		return func(*lifecycle.Env) (*mcp.Server, error) { return nil, nil }
	case 2:
		return func(*lifecycle.Env) (*mcp.Server, error) { return nil, errors.New("cannot build") }
	}
	return newServer
}
