//go:build unix

package attach

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// replay sets the client's session up on the writer, as the client set it
// up on the last one, without the client seeing it: initialize (whose
// answer it waits for), initialized, the logging level, the subscriptions.
// A client of protocol 2026-07-28 or later sent no initialize: each of its
// requests says in its _meta what initialize said, so nothing is replayed.
func (a *attachment) replay() error {
	f := a.f
	f.mu.Lock()
	init := f.init
	f.mu.Unlock()
	if init == nil {
		return nil
	}
	if err := failpoint.Hit("attach.before-replay"); err != nil {
		return err
	}
	f.mu.Lock()
	a.initID = a.replayID("initialize")
	a.write(&jsonrpc.Request{ID: a.initID, Method: "initialize", Params: init.Params})
	f.mu.Unlock()
	select {
	case <-a.initDone:
	case <-a.eof:
		f.mu.Lock()
		defer f.mu.Unlock()
		return a.lost()
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.initErr != nil {
		return fmt.Errorf("attach: the writer (pid %d) refused the client's initialize, replayed: %w", f.writerPID, a.initErr)
	}
	if f.initialized {
		a.write(&jsonrpc.Request{Method: "notifications/initialized"})
	}
	if f.logLevel != nil {
		a.write(&jsonrpc.Request{ID: a.replayID("logging"), Method: "logging/setLevel", Params: f.logLevel})
	}
	for i, p := range f.subs {
		a.write(&jsonrpc.Request{ID: a.replayID("subscribe-" + f.subURIs[i]), Method: "resources/subscribe", Params: p})
	}
	f.log.Debug("attach: session replayed", "writer", f.writerPID)
	return nil
}

// replayID returns an id for a replayed request, whose answer is not
// passed on. No call of the client's is sent before the replayed
// initialize is answered, so the id cannot clash with one of the client's
// in flight on this writer.
func (a *attachment) replayID(what string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(fmt.Sprintf("mcpkeep-replay-%d-%s", a.f.gen, what))
	a.f.swallow[id] = true
	return id
}
