//go:build unix

// Package failpoint provides named points at which a test can crash,
// fail or delay the process, for crash-recovery testing.
//
// Points are armed only by the environment variable MCPKEEP_FAILPOINTS, read
// once at start-up, for example:
//
//	MCPKEEP_FAILPOINTS='atomicfile.before-rename=kill;gitstore.before-ref=error'
//
// An action is one of kill (SIGKILL the process itself), error (Hit returns an
// *InjectedError that unwraps to syscall.EIO), or sleep(DURATION). An action
// may carry a count, kill@3, to fire on the third hit only. When nothing is
// armed, Hit costs one atomic load. Points are a testing aid: they do not
// guarantee anything about production behaviour and are never armed by the
// toolkit itself.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar is the environment variable that arms failpoints.
const EnvVar = "MCPKEEP_FAILPOINTS"

// ErrInjected is the sentinel every injected error matches with errors.Is.
var ErrInjected = errors.New("failpoint: injected error")

// InjectedError is returned by Hit for a point armed with the error action.
// It unwraps to syscall.EIO, the error a failing disk returns, and matches
// ErrInjected.
type InjectedError struct {
	Name string // the failpoint that fired
}

// Error names the failpoint.
func (e *InjectedError) Error() string {
	return "failpoint " + e.Name + ": injected I/O error"
}

// Unwrap returns syscall.EIO.
func (e *InjectedError) Unwrap() error { return syscall.EIO }

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Action is what an armed point does when hit.
type Action struct {
	Kind  string        // "kill", "error" or "sleep"
	Sleep time.Duration // for "sleep"
	On    int           // fire on this hit only (1-based); 0 fires on every hit
}

type point struct {
	act  Action
	hits atomic.Int64
}

var (
	armed  atomic.Bool
	mu     sync.RWMutex
	points map[string]*point
)

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if err := Set(spec); err != nil {
			fmt.Fprintf(os.Stderr, "mcpkeep: %s: %v\n", EnvVar, err)
		}
	}
}

// Set replaces the armed points with those in spec, written as in
// MCPKEEP_FAILPOINTS. An empty spec disarms every point. Set is meant for
// tests in the same process; child processes read the environment.
func Set(spec string) error {
	parsed, err := Parse(spec)
	if err != nil {
		return err
	}
	m := make(map[string]*point, len(parsed))
	for name, act := range parsed {
		m[name] = &point{act: act}
	}
	mu.Lock()
	points = m
	mu.Unlock()
	armed.Store(len(m) > 0)
	return nil
}

// Parse parses a MCPKEEP_FAILPOINTS value. It rejects names not in Names
// and unknown actions, so a typo does not silently arm nothing.
func Parse(spec string) (map[string]Action, error) {
	out := make(map[string]Action)
	for item := range strings.SplitSeq(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=action (kill, error, sleep(50ms))", item)
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(Names, name) {
			if near := closest(name); near != "" {
				return nil, fmt.Errorf("unknown failpoint %q: did you mean %s? (crashtest.Failpoints lists them all)", name, near)
			}
			return nil, fmt.Errorf("unknown failpoint %q (crashtest.Failpoints lists them all)", name)
		}
		a, err := parseAction(strings.TrimSpace(act))
		if err != nil && strings.Contains(act, "=") {
			sep := `separate them with ";"`
			if strings.Contains(act, ",") {
				sep += `, not ","`
			}
			return nil, fmt.Errorf("%s: action %q holds another failpoint: %s", name, strings.TrimSpace(act), sep)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

// closest returns the name in Names that name is most likely a slip for:
// the one it is the part after the package of, else the nearest by edit
// distance when few edits apart; "" when none is.
func closest(name string) string {
	for _, n := range Names {
		if _, point, _ := strings.Cut(n, "."); point == name {
			return n
		}
	}
	best, bestDist := "", max(2, len(name)/5)+1
	for _, n := range Names {
		if d := editDistance(name, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance returns the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func parseAction(s string) (Action, error) {
	var a Action
	if body, count, ok := strings.Cut(s, "@"); ok {
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return a, fmt.Errorf("count %q: want a whole number from 1", count)
		}
		a.On, s = n, body
	}
	switch {
	case s == "kill", s == "error":
		a.Kind = s
	case strings.HasPrefix(s, "sleep(") && strings.HasSuffix(s, ")"):
		d, err := time.ParseDuration(s[len("sleep(") : len(s)-1])
		if err != nil || d < 0 {
			return a, fmt.Errorf("sleep duration in %q: want e.g. sleep(50ms)", s)
		}
		a.Kind, a.Sleep = "sleep", d
	default:
		return a, fmt.Errorf("unknown action %q: want kill, error or sleep(DURATION)", s)
	}
	return a, nil
}

// Hit runs the action armed for name, if any. It returns an *InjectedError
// for the error action and nil otherwise; the kill action does not return.
func Hit(name string) error {
	if !armed.Load() {
		return nil
	}
	return hitSlow(name)
}

func hitSlow(name string) error {
	mu.RLock()
	p := points[name]
	mu.RUnlock()
	if p == nil {
		return nil
	}
	n := p.hits.Add(1)
	if p.act.On != 0 && n != int64(p.act.On) {
		return nil
	}
	switch p.act.Kind {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is delivered before this returns in practice
	case "error":
		return &InjectedError{Name: name}
	case "sleep":
		time.Sleep(p.act.Sleep)
	}
	return nil
}

// Armed reports whether any failpoint is armed.
func Armed() bool { return armed.Load() }
