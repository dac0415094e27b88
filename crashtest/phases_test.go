package crashtest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// harness is crashtest/internal/harnessprog, a server on lifecycle's
// harness, on one home: what the phases' docs tell a Plan to do is done
// here to it, and must reach every failpoint of the phase.
type harness struct {
	bin, home string
	env       []string // more environment, such as a pack threshold
}

func newHarness(t *testing.T, env ...string) *harness {
	bin, err := crashtest.Build(t.Context(), "./internal/harnessprog", binDir)
	require.NoError(t, err)
	return &harness{bin: bin, home: filepath.Join(t.TempDir(), "home"), env: env}
}

func (h *harness) cmd(failpoints string) crashtest.Cmd {
	env := append([]string{"HARNESSPROG_HOME=" + h.home, "MCPKEEP_REGISTRY="}, h.env...)
	return crashtest.Cmd{Path: h.bin, Env: env, Failpoints: failpoints}
}

func (h *harness) start(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	return crashtest.Start(ctx, h.cmd(it.Failpoints))
}

// restart starts the server without failpoints and with its input at an
// end: it recovers the home and stops.
func (h *harness) restart(ctx context.Context, _ *crashtest.Iteration) error {
	c := h.cmd("")
	c.Stdin = strings.NewReader("")
	p, err := crashtest.Start(ctx, c)
	if err != nil {
		return err
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("%w; stderr:\n%s", err, p.Stderr())
	}
	return nil
}

// connect initializes a go-sdk client session with p, of a protocol that
// sends initialize; an error means p died.
func connect(ctx context.Context, p *crashtest.Process) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "crashtest", Version: "v0"}, nil)
	return c.Connect(ctx, &mcp.IOTransport{Reader: p.Stdout(), Writer: p.Stdin()},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// put makes one change through cs; an error means the process died.
func put(ctx context.Context, cs *mcp.ClientSession, key string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"key": key, "value": key}})
	if err == nil && res.IsError {
		err = fmt.Errorf("put %s: the tool failed: %v", key, res.Content)
	}
	return err
}

// waitExit waits until p has exited, or ctx is done.
func waitExit(ctx context.Context, p *crashtest.Process) {
	select {
	case <-p.Done():
	case <-ctx.Done():
	}
}

// TestPhaseAttachRecipe does what PhaseAttach's doc says, and every
// failpoint of the phase fires.
func TestPhaseAttachRecipe(t *testing.T) {
	h := newHarness(t)
	plan := crashtest.Plan{
		Phases:     []crashtest.Phase{crashtest.PhaseAttach},
		Failpoints: crashtest.FailpointsIn(crashtest.PhaseAttach),
		Seed:       1,
		Start:      h.start,
		Drive: func(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
			first, err := connect(ctx, p)
			if err != nil {
				return nil // it died
			}
			defer first.Close()
			p2, err := crashtest.Start(ctx, h.cmd(it.Failpoints))
			if err != nil {
				return err
			}
			second, err := connect(ctx, p2)
			if err != nil {
				return nil
			}
			defer second.Close()
			if put(ctx, second, fmt.Sprintf("a%d", it.N)) != nil {
				return nil
			}
			p.Stdin().Close() // the first stops: the second takes over
			waitExit(ctx, p)
			if put(ctx, second, fmt.Sprintf("b%d", it.N)) != nil {
				return nil
			}
			p2.Stdin().Close()
			waitExit(ctx, p2)
			return nil
		},
		Restart: h.restart,
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.NoError(t, sum.Err())
	assert.Empty(t, sum.Unfired)
	assert.Equal(t, len(plan.Failpoints), sum.Failpoints)
}

// TestPhasePackRecipe does what PhasePack's doc says, and both failpoints
// of the phase fire: on a new home, three changes of one file each (12
// objects) past a threshold of 8, then a wait for the process to die.
func TestPhasePackRecipe(t *testing.T) {
	h := newHarness(t, "HARNESSPROG_PACK=8")
	dir := t.TempDir()
	plan := crashtest.Plan{
		Phases:     []crashtest.Phase{crashtest.PhasePack},
		Failpoints: crashtest.FailpointsIn(crashtest.PhasePack),
		Seed:       1,
		Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
			h.home = filepath.Join(dir, fmt.Sprintf("home-%d", it.N))
			return h.start(ctx, it)
		},
		Drive: func(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
			cs, err := connect(ctx, p)
			if err != nil {
				return nil // it died
			}
			defer cs.Close()
			for i := range 3 {
				if put(ctx, cs, fmt.Sprintf("k%d-%d", it.N, i)) != nil {
					return nil
				}
			}
			waitExit(ctx, p) // bounded by Plan.Timeout
			return nil
		},
		Restart: h.restart,
	}
	require.Equal(t, []string{"gitstore.before-pack", "gitstore.after-pack"}, plan.Failpoints)
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.NoError(t, sum.Err())
	assert.Empty(t, sum.Unfired)
	assert.Equal(t, 2, sum.Failpoints)
}
