package stdioconn

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// BenchmarkRead measures reading tools/call requests through the
// Transport against go-sdk's bare IOTransport: the filter's cost per
// message, the I/O and the server aside.
//
//	go test -run '^$' -bench Read -benchmem ./lifecycle/internal/stdioconn
func BenchmarkRead(b *testing.B) {
	line := mcptest.ToolCall(b, 1, "get_config", map[string]string{"path": "personas/default.yaml"})
	for _, tt := range []struct {
		name string
		t    func(io.Reader) mcp.Transport
	}{
		{"transport=IOTransport", func(r io.Reader) mcp.Transport {
			return &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{io.Discard}}
		}},
		{"transport=stdioconn", func(r io.Reader) mcp.Transport {
			return &Transport{Reader: r, Writer: io.Discard, Logger: slog.New(slog.DiscardHandler)}
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := tt.t(bytes.NewReader([]byte(strings.Repeat(line, b.N)))).Connect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Read(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
