package portmgr_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/portmgr"
)

const helperEnv = "PORTMGR_HELPER_KEY"

// TestHelperProcess is a child: it binds with the key in its environment,
// prints the port, accepts one connection, and exits when stdin closes.
func TestHelperProcess(t *testing.T) {
	key := os.Getenv(helperEnv)
	if key == "" {
		return
	}
	ln, err := portmgr.Listen(context.Background(), portmgr.Options{Key: key})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("ok\n"))
			c.Close()
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

func TestManyListenersSameKeyDistinctPorts(t *testing.T) {
	key := t.TempDir() // a project path, unique to this run
	type child struct {
		cmd   *exec.Cmd
		stdin io.Closer
		port  chan int
	}
	children := make([]*child, 8)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), helperEnv+"="+key)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		c := &child{cmd: cmd, stdin: stdin, port: make(chan int, 1)}
		children[i] = c
		t.Cleanup(func() { c.stdin.Close(); c.cmd.Wait() })
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			p, _ := strconv.Atoi(strings.TrimSpace(line))
			c.port <- p // 0 when the child failed
			io.Copy(io.Discard, stdout)
		}()
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	listeners := make([]net.Listener, 0, 64)
	for range 64 {
		wg.Go(func() {
			ln, err := portmgr.Listen(t.Context(), portmgr.Options{Key: key})
			if assert.NoError(t, err) {
				mu.Lock()
				listeners = append(listeners, ln)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, ln := range listeners {
		t.Cleanup(func() { ln.Close() })
	}
	require.Len(t, listeners, 64)

	seen := map[int]bool{}
	for _, ln := range listeners {
		p := port(ln)
		assert.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Write([]byte("ok\n"))
				c.Close()
			}
		}()
	}
	// Children print their port once bound; wait for each by reading it.
	for _, c := range children {
		p := <-c.port
		require.NotZero(t, p, "a child could not bind")
		assert.False(t, seen[p], "port %d handed out twice (child)", p)
		seen[p] = true
	}
	assert.Len(t, seen, 72)
	for p := range seen {
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if !assert.NoError(t, err, "port %d", p) {
			continue
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		assert.NoError(t, err)
		assert.Equal(t, "ok\n", line, "port %d", p)
	}
}

func TestPreferenceOrder(t *testing.T) {
	ctx := t.Context()
	key := t.TempDir()
	lo, hi := 21000, 21003

	stable := portmgr.StablePort(key, lo, hi)
	first, err := portmgr.Listen(ctx, portmgr.Options{Key: key, Min: lo, Max: hi})
	require.NoError(t, err)
	defer first.Close()
	assert.Equal(t, stable, port(first), "the stable port comes first when free")

	second, err := portmgr.Listen(ctx, portmgr.Options{Key: key, Min: lo, Max: hi})
	require.NoError(t, err)
	defer second.Close()
	assert.Equal(t, lo+(stable-lo+1)%4, port(second), "stable taken: the next port in the range")

	// The preferred port wins over the stable one while it is free.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	want := port(free)
	free.Close()
	pref, err := portmgr.Listen(ctx, portmgr.Options{Key: key, Min: lo, Max: hi, Preferred: want})
	require.NoError(t, err)
	defer pref.Close()
	assert.Equal(t, want, port(pref))

	// Preferred taken and the whole tiny range taken: the kernel chooses.
	var held []net.Listener
	for range 2 {
		ln, err := portmgr.Listen(ctx, portmgr.Options{Key: key, Min: lo, Max: hi})
		require.NoError(t, err)
		held = append(held, ln)
	}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	any, err := portmgr.Listen(ctx, portmgr.Options{Key: key, Min: lo, Max: hi, Preferred: want})
	require.NoError(t, err)
	defer any.Close()
	assert.NotEqual(t, want, port(any))
	assert.False(t, port(any) >= lo && port(any) <= hi, "range is full, got %d", port(any))
}

func TestNonLoopbackNeedsOptIn(t *testing.T) {
	_, err := portmgr.Listen(t.Context(), portmgr.Options{Host: "0.0.0.0"})
	require.ErrorIs(t, err, portmgr.ErrNotLoopback)

	ln, err := portmgr.Listen(t.Context(), portmgr.Options{Host: "localhost"})
	require.NoError(t, err)
	defer ln.Close()
	assert.Equal(t, "127.0.0.1", ln.Addr().(*net.TCPAddr).IP.String(), "localhost binds the literal 127.0.0.1")
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := portmgr.Listen(ctx, portmgr.Options{Key: "x"})
	require.ErrorIs(t, err, context.Canceled)
}

// TestNoPort: when nothing binds, the error says which ports were tried,
// and only those.
func TestNoPort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      portmgr.Options
		preferred int
		min, max  int
		tried     string
	}{
		{"key", portmgr.Options{Key: "k", Min: 22000, Max: 22001}, 0, 22000, 22001,
			"tried 2 ports of 22000–22001 from the key's stable port and a port of the kernel's choosing"},
		{"preferred and key", portmgr.Options{Preferred: 8080, Key: "k"}, 8080, portmgr.DefaultMin, portmgr.DefaultMax,
			"tried the preferred port 8080, 64 ports of 20000–29999 from the key's stable port and a port of the kernel's choosing"},
		{"preferred", portmgr.Options{Preferred: 8080}, 8080, 0, 0,
			"tried the preferred port 8080 and a port of the kernel's choosing"},
		{"nothing", portmgr.Options{}, 0, 0, 0, "tried a port of the kernel's choosing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 192.0.2.1 (TEST-NET-1) is not an address of this machine:
			// nothing binds.
			opts := tc.opts
			opts.Host, opts.AllowNonLoopback = "192.0.2.1", true
			_, err := portmgr.Listen(t.Context(), opts)
			var npe *portmgr.NoPortError
			require.ErrorAs(t, err, &npe)
			require.ErrorIs(t, err, portmgr.ErrNoPort)
			assert.Equal(t, "192.0.2.1", npe.Host)
			assert.Equal(t, tc.preferred, npe.Preferred)
			assert.Equal(t, tc.min, npe.Min)
			assert.Equal(t, tc.max, npe.Max)
			assert.Contains(t, err.Error(), "on 192.0.2.1 ("+tc.tried+"): ")
		})
	}
	assert.Equal(t, "portmgr: no port could be bound on ::1 (tried a port of the kernel's choosing)",
		(&portmgr.NoPortError{Host: "::1"}).Error(), "no bind error: none printed")
}

// TestBadOptions: a port out of range or an empty range is the caller's
// mistake: an error naming the option, not a port other than the one asked
// for.
func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts portmgr.Options
		says string
	}{
		{"preferred too high", portmgr.Options{Preferred: 65536}, "Options.Preferred is 65536"},
		{"preferred negative", portmgr.Options{Preferred: -1}, "Options.Preferred is -1"},
		{"min negative", portmgr.Options{Key: "k", Min: -5, Max: 21000}, "Options.Min is -5"},
		{"max too high", portmgr.Options{Key: "k", Min: 21000, Max: 70000}, "Options.Max is 70000"},
		{"min above max", portmgr.Options{Key: "k", Min: 21001, Max: 21000}, "range 21001–21000 is empty"},
		{"min above the default max", portmgr.Options{Key: "k", Min: 30000}, "range 30000–29999 is empty"},
		{"max below the default min", portmgr.Options{Key: "k", Max: 10000}, "range 20000–10000 is empty"},
		{"without a key too", portmgr.Options{Min: 21001, Max: 21000}, "range 21001–21000 is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := portmgr.Listen(t.Context(), tc.opts)
			if ln != nil {
				ln.Close()
			}
			require.Error(t, err)
			assert.NotErrorIs(t, err, portmgr.ErrNoPort)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// TestRangeDefaults: a 0 Min or Max takes its default alone. The range
// tried is read from the NoPortError of a host where nothing binds.
func TestRangeDefaults(t *testing.T) {
	for _, tc := range []struct {
		min, max int
		lo, hi   int
	}{
		{0, 0, portmgr.DefaultMin, portmgr.DefaultMax},
		{29990, 0, 29990, portmgr.DefaultMax},
		{0, 20009, portmgr.DefaultMin, 20009},
		{21000, 21000, 21000, 21000},
	} {
		_, err := portmgr.Listen(t.Context(), portmgr.Options{Host: "192.0.2.1", AllowNonLoopback: true, Key: "k", Min: tc.min, Max: tc.max})
		var npe *portmgr.NoPortError
		require.ErrorAs(t, err, &npe)
		assert.Equal(t, []int{tc.lo, tc.hi}, []int{npe.Min, npe.Max}, "Min %d, Max %d", tc.min, tc.max)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true,
		"LOCALHOST": true, "LocalHost": true, "[::1]": true, "[127.0.0.1]": true,
		"0.0.0.0": false, "10.0.0.1": false, "example.com": false, "": false,
		"[::]": false, "[]": false, "[": false, "localhost.example.com": false,
	} {
		assert.Equal(t, want, portmgr.IsLoopback(host), host)
	}
}

// TestLoopbackSpellings: Listen binds any spelling of a loopback host
// without AllowNonLoopback, as statefile.URL and lifecycle accept them.
func TestLoopbackSpellings(t *testing.T) {
	ipv6 := true
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		ipv6 = false // no IPv6 loopback on this machine
	} else {
		ln.Close()
	}
	for _, tc := range []struct {
		host, ip string
	}{
		{"LOCALHOST", "127.0.0.1"},
		{"LocalHost", "127.0.0.1"},
		{"::1", "::1"},
		{"[::1]", "::1"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			ln, err := portmgr.Listen(t.Context(), portmgr.Options{Host: tc.host})
			if tc.ip == "::1" && !ipv6 {
				require.NotErrorIs(t, err, portmgr.ErrNotLoopback)
				t.Skip("no IPv6 loopback here to bind")
			}
			require.NoError(t, err)
			defer ln.Close()
			assert.Equal(t, tc.ip, ln.Addr().(*net.TCPAddr).IP.String())
		})
	}
}
