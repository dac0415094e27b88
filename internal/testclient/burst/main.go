// Command burst is a go-sdk MCP client for interop tests: it launches a
// server with go-sdk's CommandTransport, as an MCP host does, initializes,
// makes N update_preference calls all in flight at once (keys NAME00,
// NAME01, ...), prints one JSON line with what it got, and closes.
//
//	burst -name c0 -n 50 [-at UNIX_MS] -- SERVER [ARGS...]
//
// With -at it launches the server at that moment (milliseconds since the
// epoch), so that several clients launch theirs together. It exits 0 when
// it could initialize, whatever became of the calls: the caller checks
// the line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type call struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Commit string `json:"commit,omitempty"`
	Error  string `json:"error,omitempty"`
}

type report struct {
	Client      string `json:"client"`
	Initialized bool   `json:"initialized"`
	Calls       []call `json:"calls"`
}

func main() {
	name := flag.String("name", "go", "client name, and the prefix of its keys")
	n := flag.Int("n", 50, "update_preference calls, all in flight at once")
	at := flag.Int64("at", 0, "launch the server at this moment, in Unix milliseconds")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: burst -name NAME -n N [-at UNIX_MS] -- SERVER [ARGS...]")
		os.Exit(2)
	}
	if *at > 0 {
		time.Sleep(time.Until(time.UnixMilli(*at)))
	}
	ctx := context.Background()
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "burst-" + *name, Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "burst:", err)
		os.Exit(1)
	}
	r := report{Client: *name, Initialized: true, Calls: make([]call, *n)}
	var wg sync.WaitGroup
	for i := range *n {
		c := &r.Calls[i]
		c.Key, c.Value = fmt.Sprintf("%s%02d", *name, i), fmt.Sprintf("v%02d", i)
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "update_preference", Arguments: map[string]any{"key": c.Key, "value": c.Value}})
			switch {
			case err != nil:
				c.Error = err.Error()
			case res.IsError:
				c.Error = fmt.Sprintf("tool error: %v", res.Content)
			default:
				out, _ := res.StructuredContent.(map[string]any)
				c.Commit, _ = out["commit"].(string)
			}
		})
	}
	wg.Wait()
	if err := cs.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "burst: close:", err)
	}
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
}
