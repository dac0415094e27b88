package atomicfile_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

const (
	racerEnv       = "ATOMICFILE_RACER"        // the writer's name, in a child
	racerRoundsEnv = "ATOMICFILE_RACER_ROUNDS" // how many writes it makes
)

// racerPayload is what writer name writes to the shared file in round i:
// its own bytes, of a length that differs from writer to writer and round
// to round, so a mix of two writes matches no payload.
func racerPayload(name string, i int) []byte {
	n := 200 + len(name)*37 + i*53
	return bytes.Repeat(fmt.Appendf(nil, "%s/%d ", name, i), n/len(name))
}

// racerPerm is the perm writer name passes: half of them 0 (keep the
// mode, which reads the existing file's), half an explicit 0600.
func racerPerm(i int) os.FileMode {
	if i%2 == 0 {
		return 0
	}
	return 0o600
}

// TestHelperRacer is a child of TestConcurrentWritersOfOnePath: it prints
// "ready", waits for a line on stdin, replaces the target with its payload
// round after round, and prints "ok" or the first error.
func TestHelperRacer(t *testing.T) {
	name := os.Getenv(racerEnv)
	if name == "" {
		return
	}
	path := os.Getenv(targetEnv)
	rounds, err := strconv.Atoi(os.Getenv(racerRoundsEnv))
	require.NoError(t, err)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error: no start line:", err)
		os.Exit(1)
	}
	for i := range rounds {
		if err := atomicfile.WriteFile(path, racerPayload(name, i), racerPerm(i)); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ok")
	os.Exit(0)
}

// TestConcurrentWritersOfOnePath: 32 goroutines and 4 processes replace
// one file at once, each with its own payloads. The package does not
// serialize writers, and need not: every call returns nil, a reader
// meanwhile and the file at the end hold exactly one of the payloads,
// whole, and no temporary file is left behind.
func TestConcurrentWritersOfOnePath(t *testing.T) {
	const goroutines, processes = 32, 4
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.json")

	type child struct {
		name  string
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]*child, processes)
	for i := range children {
		c := &child{name: fmt.Sprintf("process%d", i)}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperRacer$")
		c.cmd.Env = append(os.Environ(), targetEnv+"="+path, racerEnv+"="+c.name,
			racerRoundsEnv+"="+strconv.Itoa(rounds))
		c.cmd.Stderr = os.Stderr
		var err error
		c.stdin, err = c.cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := c.cmd.StdoutPipe()
		require.NoError(t, err)
		c.out = bufio.NewReader(stdout)
		require.NoError(t, c.cmd.Start())
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
		children[i] = c
	}
	names := make([]string, 0, goroutines+processes)
	for g := range goroutines {
		names = append(names, fmt.Sprintf("goroutine%d", g))
	}
	for _, c := range children {
		names = append(names, c.name)
	}
	payloads := make(map[string]string) // payload -> writer/round
	for _, name := range names {
		for i := range rounds {
			payloads[string(racerPayload(name, i))] = fmt.Sprintf("%s/%d", name, i)
		}
	}
	require.Len(t, payloads, len(names)*rounds, "the payloads are distinct")

	// Everyone starts at once: the children once they are ready, the
	// goroutines when start closes.
	for _, c := range children {
		line, err := c.out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready", strings.TrimSpace(line))
	}
	start := make(chan struct{})
	written := make(chan struct{})
	var reads, bad int
	var reader sync.WaitGroup
	reader.Go(func() {
		<-start
		for {
			select {
			case <-written:
				return
			default:
			}
			got, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue // before the first rename
			}
			reads++
			if _, ok := payloads[string(got)]; err != nil || !ok {
				bad++
			}
		}
	})
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			name := names[g]
			for i := range rounds {
				if err := atomicfile.WriteFile(path, racerPayload(name, i), racerPerm(i)); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	for _, c := range children {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err)
	}
	close(start)
	wg.Wait()
	for g, err := range errs {
		assert.NoError(t, err, names[g])
	}
	for _, c := range children {
		line, err := c.out.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "ok", strings.TrimSpace(line), c.name)
		assert.NoError(t, c.cmd.Wait(), c.name)
	}
	close(written)
	reader.Wait()
	assert.Zero(t, bad, "reads that were not one payload, whole, out of %d", reads)

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	_, ok := payloads[string(got)]
	assert.True(t, ok, "the file is exactly one payload, whole; it holds %d bytes beginning %q",
		len(got), got[:min(len(got), 40)])
	assert.Equal(t, atomicfile.DefaultPerm, mode(t, path))

	removed, err := atomicfile.CleanTemps(dir)
	require.NoError(t, err)
	assert.Empty(t, removed, "no temporary file left behind")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "shared.json", entries[0].Name())
}
