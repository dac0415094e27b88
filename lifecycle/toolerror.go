package lifecycle

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// ToolError returns err as a tool should hand it to its MCP client, or nil
// for nil. What a client sees may go into a model's context or a
// stranger's hands, so the text it gets:
//
//   - gives a *atomicfile.CorruptError as the file, the line, its Summary,
//     and, for a file inside ConfigDir, the start of the line (its
//     Excerpt, at most atomicfile.MaxExcerpt bytes); never the decoder's
//     own message, which quotes the file at any length;
//   - names the files of ConfigDir relative to it, and ConfigDir itself
//     (as a *PathError of a Tx gives it) as "ConfigDir", not its path;
//   - keeps the remedies Explain adds.
//
// Any other text is kept as it is: a tool's own errors must not quote
// files. The returned error wraps err, so errors.Is and errors.As see the
// cause in-process, and when it says less than err, err is logged in full
// to Logger (stderr), with what the client was told.
func (e *Env) ToolError(err error) error {
	if err == nil {
		return nil
	}
	err = e.Explain(err)
	full := err.Error()
	msg := full
	for _, ce := range corruptErrors(err) {
		short := e.clientCorrupt(ce)
		for _, long := range []string{ce.Error(), ce.Problem()} {
			msg = strings.ReplaceAll(msg, long, short)
		}
		if ce.Err != nil && ce.Err.Error() != "" {
			msg = strings.ReplaceAll(msg, ce.Err.Error(), ce.Summary())
		}
	}
	if e.ConfigDir != "" {
		msg = strings.ReplaceAll(msg, e.ConfigDir+"/", "")
		// A *PathError's reason names ConfigDir, then its path.
		msg = strings.ReplaceAll(msg, "ConfigDir ("+e.ConfigDir+")", "ConfigDir")
		msg = strings.ReplaceAll(msg, e.ConfigDir, "ConfigDir")
	}
	if msg != full && e.Logger != nil {
		e.Logger.Warn("tool error (the client gets it in short)", "err", full, "client", msg)
	}
	return &toolError{msg: msg, err: err}
}

// clientCorrupt is the client's text for ce: file:line: summary, the start
// of the line when the file is inside ConfigDir, and the remedy.
func (e *Env) clientCorrupt(ce *atomicfile.CorruptError) string {
	where := ce.Path
	if ce.Line > 0 {
		where += ":" + strconv.Itoa(ce.Line)
	}
	s := where + ": " + ce.Summary()
	if ce.Excerpt != "" && ce.Line > 0 && within(e.ConfigDir, ce.Path) {
		s += fmt.Sprintf(" (line %d begins %s)", ce.Line, strconv.Quote(ce.Excerpt))
	}
	remedy := ce.Remedy
	if remedy == "" {
		remedy = "fix the file by hand or restore it from a backup"
	}
	return s + " (" + remedy + ")"
}

// corruptErrors returns every *atomicfile.CorruptError in err's tree.
func corruptErrors(err error) []*atomicfile.CorruptError {
	var out []*atomicfile.CorruptError
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
			return
		case *atomicfile.CorruptError:
			out = append(out, x) // its own Err is the decoder's: summarized, not searched
			return
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

// toolError is the text a client gets for err, with err behind it.
type toolError struct {
	msg string
	err error
}

func (e *toolError) Error() string { return e.msg }
func (e *toolError) Unwrap() error { return e.err }
