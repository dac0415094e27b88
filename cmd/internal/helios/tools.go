package helios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

type (
	noArgs      struct{}
	personaArgs struct {
		Name string `json:"name,omitempty" jsonschema:"persona name; empty means the active persona"`
	}
	setActiveArgs struct {
		Name string `json:"name" jsonschema:"persona to make active"`
	}
	updateArgs struct {
		Persona string `json:"persona,omitempty" jsonschema:"persona to change; empty means the active persona"`
		Key     string `json:"key" jsonschema:"preference name, e.g. tone"`
		Value   string `json:"value" jsonschema:"new value; an empty string removes the preference"`
	}
	commitArgs struct {
		Message string `json:"message,omitempty" jsonschema:"commit message for edits made by hand"`
	}
	historyArgs struct {
		Path  string `json:"path,omitempty" jsonschema:"config file, e.g. personas/default.yaml; empty means every file"`
		Limit int    `json:"limit,omitempty" jsonschema:"most commits to return (default 20)"`
	}
	rollbackArgs struct {
		Rev string `json:"rev" jsonschema:"revision to return to: a commit hash, HEAD~N or a tag"`
	}
)

type (
	// processOut says which process answered: the writer, or a process
	// attached to it that forwards this client's messages.
	processOut struct {
		Role      string `json:"role"` // "writer" or "attached"
		PID       int    `json:"pid"`  // the process this client talks to
		WriterPID int    `json:"writer_pid"`
	}
	configOut struct {
		Base   Base    `json:"base"`
		Active Persona `json:"active"`
	}
	personasOut struct {
		Personas []string `json:"personas"`
		Active   string   `json:"active"`
	}
	changeOut struct {
		Commit string `json:"commit,omitempty"` // "" when nothing changed
		Detail string `json:"detail"`
	}
	historyOut struct {
		Commits []commitOut `json:"commits"`
		// Conflicts lists the merges from the git remote that kept this
		// home's version of files changed on both sides (of the path
		// asked, or any), until `mcpkeep sync --resolve TAG`.
		Conflicts []conflictOut `json:"conflicts,omitempty"`
	}
	conflictOut struct {
		Tag    string    `json:"tag"`    // conflicts/<time>, on the versions the tree did not keep
		When   time.Time `json:"when"`   // when the merge made it
		Remote string    `json:"remote"` // the remote's commit
		// Kept is whose version of Files the tree holds: "home" (the tag
		// is on the remote's commit) or "remote" (sync mode: the tag is on
		// this home's commit before the merge).
		Kept    string   `json:"kept"`
		Files   []string `json:"files,omitempty"`
		Refused []string `json:"refused,omitempty"` // the remote's entries helios would not write
	}
	commitOut struct {
		Hash    string    `json:"hash"`
		Message string    `json:"message"`
		When    time.Time `json:"when"`
		// Conflicts and ConflictTag, for a merge from the git remote:
		// the files both sides changed and the tag on the versions the
		// tree did not keep (the remote's in async mode, this home's in
		// sync mode).
		Conflicts   []string `json:"conflicts,omitempty"`
		ConflictTag string   `json:"conflict_tag,omitempty"`
	}
	infoOut struct {
		// Protocol is the MCP protocol version of the calling client: the
		// one its request carries (2026-07-28 and later) or the one
		// negotiated at initialize.
		Protocol string          `json:"protocol"`
		Process  processOut      `json:"process"`
		State    statefile.State `json:"state"`
		Boot     string          `json:"boot"`
		Boots    int             `json:"boots"`
		Recovery []string        `json:"recovery,omitempty"`
	}
)

// NewServer builds helios's MCP server on env: the tools read and write the
// files under env.ConfigDir, every change through env.Update.
func NewServer(env *lifecycle.Env) (*mcp.Server, error) {
	s, add := build(env, schemas)
	for _, a := range add {
		a()
	}
	return s, nil
}

// Warm infers the tools' schemas into the cache NewServer's server uses,
// for lifecycle.Options.Warm: the go-sdk's inference is most of helios's
// start, and Warm runs it on another core while the harness locks, checks
// and recovers the home. It adds the tools in the opposite order to
// NewServer, so that a NewServer that starts before Warm is done infers
// from the other end and the two meet, rather than both inferring the same
// schemas.
func Warm() {
	_, add := build(&lifecycle.Env{}, schemas)
	for _, a := range slices.Backward(add) {
		a()
	}
}

// schemas holds the schemas the go-sdk inferred from the tools' argument
// and result types, for every server this process builds (Warm's, then
// NewServer's).
var schemas = mcp.NewSchemaCache()

// build makes helios's server on env, with the schema cache given (nil:
// none), and returns with it the functions that add its tools, in order.
func build(env *lifecycle.Env, cache *mcp.SchemaCache) (*mcp.Server, []func()) {
	t := &tools{env: env, cfg: newConfig(env.ConfigDir, env.Reader(), env.Explain)}
	s := mcp.NewServer(&mcp.Implementation{Name: "helios", Version: Version()}, &mcp.ServerOptions{
		Instructions: "helios keeps personas and preferences in a git-versioned home; every change is durable when a tool returns.",
		Logger:       lifecycle.SDKLogger(env.Logger),
		SchemaCache:  cache,
	})
	return s, []func(){
		func() {
			addTool(s, env, &mcp.Tool{Name: "get_config", Description: "Read the base configuration and the active persona."}, t.getConfig)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "list_personas", Description: "List persona names and the active one."}, t.listPersonas)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "get_persona", Description: "Read one persona."}, t.getPersona)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "set_active_persona", Description: "Make a persona the active one."}, t.setActive)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "update_preference", Description: "Set (or, with an empty value, remove) one preference of a persona."}, t.updatePreference)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "commit_changes", Description: "Commit config files edited by hand."}, t.commitChanges)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "history", Description: "List the commits that changed the config, newest first."}, t.history)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "rollback", Description: "Make the config equal to an earlier revision, as a new commit."}, t.rollback)
		},
		func() {
			addTool(s, env, &mcp.Tool{Name: "server_info", Description: "Describe this server: which process answers (the writer, or one attached to it), pid, transports, health, boot and recovery."}, t.serverInfo)
		},
	}
}

// addTool adds a tool whose errors reach the client through
// env.ToolError: a client is told what is wrong and where, never the bytes
// of a file beyond the start of a line of the config tree.
func addTool[In, Out any](s *mcp.Server, env *lifecycle.Env, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	mcp.AddTool(s, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		return res, out, env.ToolError(err)
	})
}

type tools struct {
	env *lifecycle.Env
	cfg config
}

func (t *tools) getConfig(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, configOut, error) {
	b, err := t.cfg.base()
	if err != nil {
		return nil, configOut{}, err
	}
	p, err := t.cfg.persona(b.ActivePersona)
	return nil, configOut{Base: b, Active: p}, err
}

func (t *tools) listPersonas(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, personasOut, error) {
	b, err := t.cfg.base()
	if err != nil {
		return nil, personasOut{}, err
	}
	names, err := t.cfg.personas()
	return nil, personasOut{Personas: names, Active: b.ActivePersona}, err
}

func (t *tools) getPersona(ctx context.Context, _ *mcp.CallToolRequest, in personaArgs) (*mcp.CallToolResult, Persona, error) {
	name, err := t.resolve(in.Name)
	if err != nil {
		return nil, Persona{}, err
	}
	p, err := t.cfg.persona(name)
	return nil, p, err
}

// resolve returns name, or the active persona's name when name is empty.
func (t *tools) resolve(name string) (string, error) {
	if name != "" {
		return name, checkPersonaName(name)
	}
	b, err := t.cfg.base()
	return b.ActivePersona, err
}

func (t *tools) setActive(ctx context.Context, _ *mcp.CallToolRequest, in setActiveArgs) (*mcp.CallToolResult, changeOut, error) {
	if in.Name == "" {
		return nil, changeOut{}, errors.New("name is required: the persona to make active (see list_personas)")
	}
	if _, err := t.cfg.persona(in.Name); err != nil {
		return nil, changeOut{}, err
	}
	msg := "set_active_persona " + in.Name
	hash, err := t.env.Update(ctx, msg, func(tx *lifecycle.Tx) error {
		var b Base
		if err := tx.ReadYAMLStrict(baseFile, &b); err != nil {
			return t.cfg.wrap(err)
		}
		b.ActivePersona = in.Name
		return tx.WriteYAML(baseFile, b)
	})
	return nil, changeOut{Commit: hash, Detail: "active persona is " + in.Name}, err
}

func (t *tools) updatePreference(ctx context.Context, _ *mcp.CallToolRequest, in updateArgs) (*mcp.CallToolResult, changeOut, error) {
	if !keyRE.MatchString(in.Key) {
		return nil, changeOut{}, fmt.Errorf("key %q: use 1-64 of A-Z, a-z, 0-9, '_', '.' and '-', starting with a letter or digit", in.Key)
	}
	if len(in.Value) > maxValue {
		return nil, changeOut{}, fmt.Errorf("value is %d bytes; the limit is %d", len(in.Value), maxValue)
	}
	name, err := t.resolve(in.Persona)
	if err != nil {
		return nil, changeOut{}, err
	}
	if _, err := t.cfg.persona(name); err != nil {
		return nil, changeOut{}, err
	}
	rel := personaPath(name)
	msg := fmt.Sprintf("update_preference %s.%s", name, in.Key)
	hash, err := t.env.Update(ctx, msg, func(tx *lifecycle.Tx) error {
		var p Persona
		if err := tx.ReadYAMLStrict(rel, &p); err != nil {
			return t.cfg.wrap(err)
		}
		if p.Preferences == nil {
			p.Preferences = map[string]string{}
		}
		if in.Value == "" {
			delete(p.Preferences, in.Key)
		} else {
			p.Preferences[in.Key] = in.Value
		}
		return tx.WriteYAML(rel, p)
	})
	detail := fmt.Sprintf("%s.%s = %q", name, in.Key, in.Value)
	if hash == "" && err == nil {
		detail += " (unchanged)"
	}
	return nil, changeOut{Commit: hash, Detail: detail}, err
}

func (t *tools) commitChanges(ctx context.Context, _ *mcp.CallToolRequest, in commitArgs) (*mcp.CallToolResult, changeOut, error) {
	msg := strings.TrimSpace(in.Message)
	if msg == "" {
		msg = "commit_changes: edits made by hand"
	}
	// A hand edit must still be valid helios config before it is committed.
	if err := t.validateTree(); err != nil {
		return nil, changeOut{}, err
	}
	hash, err := t.env.Commit(msg)
	detail := "committed"
	if hash == "" && err == nil {
		detail = "nothing to commit"
	}
	return nil, changeOut{Commit: hash, Detail: detail}, err
}

func (t *tools) validateTree() error {
	files, err := t.env.Files()
	if err != nil {
		return err
	}
	for _, rel := range files {
		data, err := t.cfg.read.ReadFile(t.cfg.path(rel))
		if err != nil {
			return t.cfg.wrap(err)
		}
		if err := Validate(rel, data); err != nil {
			if ce, ok := err.(*atomicfile.CorruptError); ok {
				// Named by its path, as a read names it: the remedy and
				// the excerpt are those of a file of the config tree.
				c := *ce
				c.Path = t.cfg.path(rel)
				err = t.cfg.wrap(&c)
			}
			return fmt.Errorf("not committed: %w", err)
		}
	}
	return nil
}

func (t *tools) history(ctx context.Context, _ *mcp.CallToolRequest, in historyArgs) (*mcp.CallToolResult, historyOut, error) {
	if in.Limit < 0 {
		return nil, historyOut{}, fmt.Errorf("limit %d: want 0 (default 20) or more", in.Limit)
	}
	if in.Limit == 0 {
		in.Limit = 20
	}
	commits, err := t.env.Store.History(in.Path, in.Limit)
	if err != nil {
		return nil, historyOut{}, err
	}
	out := historyOut{Commits: []commitOut{}}
	for _, c := range commits {
		out.Commits = append(out.Commits, commitOut{Hash: c.Hash, Message: c.Message, When: c.When,
			Conflicts: c.Conflicts, ConflictTag: c.ConflictTag})
	}
	conflicts, err := t.env.Store.Conflicts()
	if err != nil {
		return nil, historyOut{}, err
	}
	for _, c := range conflicts {
		if in.Path == "" || slices.Contains(c.Files, in.Path) || slices.ContainsFunc(c.Refused, func(r string) bool { return strings.HasPrefix(r, in.Path+" (") }) {
			out.Conflicts = append(out.Conflicts, conflictOut{Tag: c.Tag, When: c.When, Remote: c.Remote, Kept: c.Kept, Files: c.Files, Refused: c.Refused})
		}
	}
	return nil, out, nil
}

func (t *tools) rollback(ctx context.Context, _ *mcp.CallToolRequest, in rollbackArgs) (*mcp.CallToolResult, changeOut, error) {
	if in.Rev == "" {
		return nil, changeOut{}, errors.New("rev is required: a commit hash from the history tool, HEAD~N or a tag")
	}
	hash, err := t.env.Rollback(ctx, in.Rev)
	detail := "config is now as at " + in.Rev
	if hash == "" && err == nil {
		detail += " (it already was)"
	}
	return nil, changeOut{Commit: hash, Detail: detail}, err
}

func (t *tools) serverInfo(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, infoOut, error) {
	r := t.env.Route(req.Session)
	out := infoOut{Protocol: lifecycle.ProtocolVersion(req), Process: processOut{Role: "writer", PID: r.PID, WriterPID: r.WriterPID},
		State: t.env.State(), Boot: t.env.Boot.Before.State.String(), Boots: t.env.Boot.After.Boots}
	if r.Attached {
		out.Process.Role = "attached"
	}
	for _, f := range t.env.Report.Findings {
		out.Recovery = append(out.Recovery, f.Kind+" "+f.Path+": "+f.Action)
	}
	return nil, out, nil
}
