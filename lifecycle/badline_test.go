package lifecycle_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// TestRunAttachedBadLines: an attached Run (a second Run on a home in
// use, which forwards its stdio to the writer) answers a bad line from
// its client itself, logs it once with fault=client, and goes on; EOF
// after a bad line still ends it cleanly. Before, it returned nil at the
// first bad line, with nothing logged.
func TestRunAttachedBadLines(t *testing.T) {
	writer := run(t, options(t))
	for _, tt := range []struct {
		name  string
		burst bool
	}{{"exchange", false}, {"burst then EOF", true}} {
		t.Run(tt.name, func(t *testing.T) {
			opts := writer.opts
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			var recs logs
			opts.Stdin, opts.Stdout, opts.Logger = inR, outW, slog.New(&recs)
			h, err := lifecycle.New(opts)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				err := h.Run(t.Context())
				// A Run that returns early fails the test's writes and
				// reads, not leaves them blocked.
				inR.CloseWithError(errors.New("Run returned"))
				outW.Close()
				done <- err
			}()
			t.Cleanup(func() { inW.Close(); outR.Close() })
			// A Run that stops answering fails the reads, not hangs them.
			hung := time.AfterFunc(hangAfter, func() { outR.CloseWithError(errors.New("no answer within hangAfter")) })
			defer hung.Stop()
			out := bufio.NewReader(outR)

			if tt.burst {
				_, err = io.WriteString(inW, mcptest.BadLinesBurst())
				require.NoError(t, err)
				require.NoError(t, inW.Close())
				mcptest.CheckBadLinesBurst(t, out, nil)
			} else {
				_, err = io.WriteString(inW, mcptest.Handshake)
				require.NoError(t, err)
				line, err := out.ReadString('\n')
				require.NoError(t, err)
				require.Contains(t, line, `"id":0,"result"`)
				mcptest.ExchangeBadLines(t, inW, out)
				require.NoError(t, inW.Close())
			}
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(hangAfter):
				t.Fatalf("Run did not return within %v of stdin's EOF", hangAfter)
			}

			assert.NotEmpty(t, recs.Find(slog.LevelInfo, "attached to the home's writer"))
			answered := recs.Find(slog.LevelInfo, "stdio: answered a bad line from the client")
			want := len(mcptest.BadLines)
			if tt.burst {
				want++
			}
			assert.Len(t, answered, want)
			for _, r := range answered {
				assert.Equal(t, "client", mcptest.Attr(r, "fault"))
				assert.NotEmpty(t, mcptest.Attr(r, "excerpt"))
			}
		})
	}
	// The writer's own client is served all along.
	mcptest.Call[lifecycle.Route](t, writer.client, "route", nil)
}
