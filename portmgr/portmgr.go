// Package portmgr hands out TCP ports as bound listeners, never as numbers.
//
// A number reported "free" can be taken by another process before it is
// used; a bound net.Listener cannot. Listen tries the preferred port (say,
// the one in the last state file), then a stable port derived from a key (a
// project or home path) so a server tends to come back on the same port,
// then the ports after it in the range, and finally lets the kernel choose.
// Listeners bind loopback unless a non-loopback host is asked for
// explicitly. The package does not reserve ports across processes: it only
// binds them.
package portmgr

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
)

// Default range for stable ports: the top of the IANA dynamic range is
// shared with ephemeral ports, so the default stays below Linux's
// ephemeral range (32768–60999) to avoid colliding with outgoing sockets.
const (
	DefaultMin = 20000
	DefaultMax = 29999
	// scanLimit bounds how many ports after the stable one are tried.
	scanLimit = 64
)

var (
	// ErrNoPort is matched by *NoPortError.
	ErrNoPort = errors.New("portmgr: no port could be bound")
	// ErrNotLoopback: a non-loopback host was given without AllowNonLoopback.
	ErrNotLoopback = errors.New("portmgr: host is not loopback")
)

// NoPortError reports that no port could be bound, not even one the kernel
// chose.
type NoPortError struct {
	Host      string // the host Listen tried, as it bound it (127.0.0.1 for localhost)
	Preferred int    // the preferred port, tried first; 0 when there was none
	Min, Max  int    // the range the stable port for Key was tried in; 0, 0 when there was no Key
	Err       error  // the last bind error
}

// Error names the host and the ports tried, and the last bind error.
func (e *NoPortError) Error() string {
	var tried []string
	if e.Preferred > 0 {
		tried = append(tried, "the preferred port "+strconv.Itoa(e.Preferred))
	}
	if e.Max > 0 {
		tried = append(tried, fmt.Sprintf("%d ports of %d–%d from the key's stable port", min(scanLimit, e.Max-e.Min+1), e.Min, e.Max))
	}
	tried = append(tried, "a port of the kernel's choosing")
	list := tried[len(tried)-1]
	if len(tried) > 1 {
		list = strings.Join(tried[:len(tried)-1], ", ") + " and " + list
	}
	msg := fmt.Sprintf("portmgr: no port could be bound on %s (tried %s)", e.Host, list)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrNoPort and the last bind error.
func (e *NoPortError) Unwrap() []error { return []error{ErrNoPort, e.Err} }

// Options say which port to try first. The zero value binds a port the
// kernel chooses on 127.0.0.1.
type Options struct {
	Host             string // "" = 127.0.0.1; "localhost" (any case) means 127.0.0.1; [::1] means ::1
	Preferred        int    // tried first when > 0; at most 65535
	Key              string // derives a stable port in [Min, Max]; "" skips it
	Min, Max         int    // the stable range, Min ≤ Max ≤ 65535; a 0 Min is DefaultMin, a 0 Max DefaultMax
	AllowNonLoopback bool   // required to bind a host that is not loopback
}

// IsLoopback reports whether host names a loopback address: localhost in
// any case, 127.0.0.0/8 or ::1, with or without the brackets of a URL
// ([::1]).
func IsLoopback(host string) bool {
	host = unbracket(host)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unbracket removes the brackets of an IPv6 literal written as in a URL.
func unbracket(host string) string {
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		return host[1 : len(host)-1]
	}
	return host
}

// portRange checks the ports of o and returns its stable range, with the
// defaults for a 0 Min or Max. Options that would be ignored are a mistake
// the caller should hear of, not a port other than the one asked for.
func (o *Options) portRange() (lo, hi int, err error) {
	for _, p := range []struct {
		name string
		port int
		zero string
	}{
		{"Preferred", o.Preferred, "none"},
		{"Min", o.Min, "DefaultMin"},
		{"Max", o.Max, "DefaultMax"},
	} {
		if p.port < 0 || p.port > 65535 {
			return 0, 0, fmt.Errorf("portmgr: Options.%s is %d: want a port from 1 to 65535, or 0 for %s", p.name, p.port, p.zero)
		}
	}
	lo, hi = o.Min, o.Max
	if lo == 0 {
		lo = DefaultMin
	}
	if hi == 0 {
		hi = DefaultMax
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("portmgr: stable port range %d–%d is empty: Options.Min must not be above Options.Max (0 means %d for Min, %d for Max)",
			lo, hi, DefaultMin, DefaultMax)
	}
	return lo, hi, nil
}

// StablePort returns the port Key maps to in [min, max]. It is for display
// and tests: it is not a promise that the port is free.
func StablePort(key string, lo, hi int) int {
	if lo <= 0 || hi < lo || hi > 65535 {
		lo, hi = DefaultMin, DefaultMax
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return lo + int(h.Sum32()%uint32(hi-lo+1))
}

// Listen returns a TCP listener bound per opts: the preferred port, then
// the stable port for Key and up to 64 ports after it (wrapping in the
// range), then any port. It returns *NoPortError (ErrNoPort) when nothing
// can be bound, an error matching ErrNotLoopback for a non-loopback host
// without AllowNonLoopback, and an error naming the option for a port out
// of range or a range whose Min is above its Max. ctx cancels the scan.
func Listen(ctx context.Context, opts Options) (net.Listener, error) {
	lo, hi, err := opts.portRange()
	if err != nil {
		return nil, err
	}
	host := unbracket(opts.Host)
	if host == "" || strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	if !IsLoopback(host) && !opts.AllowNonLoopback {
		return nil, fmt.Errorf("portmgr: %q: %w; set AllowNonLoopback to serve beyond this machine", opts.Host, ErrNotLoopback)
	}
	var lc net.ListenConfig
	var last error
	try := func(port int) (net.Listener, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			last = err
		}
		return ln, nil
	}
	npe := &NoPortError{Host: host}
	candidates := make([]int, 0, scanLimit+2)
	if opts.Preferred > 0 {
		candidates = append(candidates, opts.Preferred)
		npe.Preferred = opts.Preferred
	}
	if opts.Key != "" {
		npe.Min, npe.Max = lo, hi
		start := StablePort(opts.Key, lo, hi)
		span := hi - lo + 1
		for i := range min(scanLimit, span) {
			candidates = append(candidates, lo+(start-lo+i)%span)
		}
	}
	candidates = append(candidates, 0)
	for _, port := range candidates {
		ln, err := try(port)
		if err != nil {
			return nil, err
		}
		if ln != nil {
			return ln, nil
		}
	}
	npe.Err = last
	return nil, npe
}
