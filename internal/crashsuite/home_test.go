package crashsuite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// persona and base mirror helios's config files.
type persona struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description,omitempty"`
	Preferences map[string]string `yaml:"preferences"`
}

type base struct {
	Name          string `yaml:"name"`
	ActivePersona string `yaml:"active_persona"`
}

// The personas and keys the suite writes. The keys are not in helios's
// defaults, so a key that was never acknowledged is absent.
var (
	personaNames = []string{"default", "concise"}
	prefKeys     = []string{"k0", "k1", "k2", "k3", "k4", "k5"}
)

func personaFile(name string) string { return "personas/" + name + ".yaml" }

// update is one update_preference call.
type update struct {
	Persona string `json:"persona"`
	Key     string `json:"key"`
	Value   string `json:"value"`
}

func (u update) slot() string { return u.Persona + "." + u.Key }

// ack is an update a server acknowledged, with the commit it named.
type ack struct {
	update
	commit string
}

// slot is what the model knows of one persona's key.
type slot struct {
	acked   string   // the last acknowledged value (or what a check saw); "" = absent
	pending []string // values sent since and not acknowledged: each may or may not have landed
	// orphans are values whose call an attached process had taken when
	// it was killed: the writer may have read the request already and
	// commit it at any time while it runs, after changes acknowledged
	// later too (two clients' changes, in the order the writer took
	// them). checkHistory still finds each acknowledged change at its
	// commit.
	orphans []string
}

// home is a home the suite crashes servers on, and the model of what they
// acknowledged there.
type home struct {
	dir     string
	next    bool   // upgraded to heliosnext's schema 2; helios refuses it
	remote  string // the file:// URL of the git remote it replicates to in sync mode; "" for none
	acks    []ack
	checked int // acks[:checked] were found at their commits by an earlier check
	slots   map[string]*slot
	seq     int
}

func newHome(dir string) *home { return &home{dir: dir, slots: map[string]*slot{}} }

func (h *home) configDir() string { return filepath.Join(h.dir, "config") }

// clone returns a copy of the model for a copy of the home at dir.
func (h *home) clone(dir string) *home {
	c := &home{dir: dir, next: h.next, acks: slices.Clone(h.acks), checked: h.checked, slots: map[string]*slot{}, seq: h.seq}
	for k, s := range h.slots {
		c.slots[k] = &slot{acked: s.acked, pending: slices.Clone(s.pending), orphans: slices.Clone(s.orphans)}
	}
	return c
}

func (h *home) slot(u update) *slot {
	s := h.slots[u.slot()]
	if s == nil {
		s = &slot{}
		h.slots[u.slot()] = s
	}
	return s
}

// newUpdate returns an update of a random slot to a value never used in h.
func (h *home) newUpdate(sched *crashtest.Schedule, tag string) update {
	h.seq++
	return update{Persona: sched.Pick(personaNames), Key: sched.Pick(prefKeys), Value: fmt.Sprintf("%s.%d", tag, h.seq)}
}

// sent records an update about to be sent.
func (h *home) sent(u update) {
	s := h.slot(u)
	s.pending = append(s.pending, u.Value)
}

// orphaned records that the attached process that took u was killed
// before it answered (see slot.orphans).
func (h *home) orphaned(u update) {
	s := h.slot(u)
	s.orphans = append(s.orphans, u.Value)
}

// acked records the result of u. A failed call or an acknowledgement
// without a commit is a violation: the suite's values are always new.
func (h *home) acked(u update, r *toolResult) error {
	if r.IsError {
		return fmt.Errorf("update_preference %s=%q failed: %s", u.slot(), u.Value, r.Text())
	}
	var out struct {
		Commit string `json:"commit"`
	}
	if err := json.Unmarshal(r.Structured, &out); err != nil || out.Commit == "" {
		return fmt.Errorf("update_preference %s=%q acknowledged without a commit: %s", u.slot(), u.Value, r.Structured)
	}
	h.record(u, out.Commit)
	return nil
}

func (h *home) record(u update, commit string) {
	s := h.slot(u)
	s.acked, s.pending = u.Value, nil
	h.acks = append(h.acks, ack{update: u, commit: commit})
}

// lostError is an acknowledged write a home no longer holds.
type lostError struct{ err error }

func (e *lostError) Error() string { return "lost an acknowledged write: " + e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// checkServing checks what must hold once a restarted server (pid) is
// serving: its start left no temporary file of a dead write, no open
// checkpoint, and no state or PID file of a dead process.
func checkServing(h *home, pid int) []error {
	var errs []error
	orphans, err := orphanTemps(h.dir, liveTempWait, nil)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range orphans {
		errs = append(errs, fmt.Errorf("orphan temporary file %s survived the start", rel(h.dir, p)))
	}
	entries, err := os.ReadDir(filepath.Join(h.dir, "checkpoints"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, fmt.Errorf("checkpoint checkpoints/%s survived the start", e.Name()))
	}
	st, err := statefile.Read(filepath.Join(h.dir, statefile.FileName))
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("state file of the running server: %w", err))
	case st.PID != pid:
		errs = append(errs, fmt.Errorf("state.json names pid %d, not the running server's %d", st.PID, pid))
	}
	data, err := os.ReadFile(filepath.Join(h.dir, lifecycle.LockFile))
	if err != nil {
		errs = append(errs, fmt.Errorf("PID file of the running server: %w", err))
	} else if got, err := lifecycle.ParseLockContent(data); err != nil || got != pid {
		errs = append(errs, fmt.Errorf("%s holds %q, not the running server's pid %d", lifecycle.LockFile, data, pid))
	}
	return errs
}

// liveTempWait is how long checkServing gives a temporary file it finds
// to go. The running server writes while it is checked (its journal's
// flush and packs, right after a start that merged from a git remote; a
// fetch; the state file), and renames each temporary file into place
// within milliseconds. A dead write's stays: only the start removes
// those (gitstore.Open, recovery), before the server serves.
var liveTempWait = 30 * time.Second

// orphanTemps returns the temporary files of writes under dir (atomicfile's
// and git's) that are still there wait after they were found, none when
// the walk finds none. found, when not nil, is called with what the walk
// found, before the wait.
func orphanTemps(dir string, wait time.Duration, found func([]string)) ([]string, error) {
	var temps []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed by the running server as the walk went
			}
			return err
		}
		name := d.Name()
		if !d.IsDir() && (atomicfile.IsTemp(name) || strings.HasPrefix(name, "tmp_obj_") ||
			strings.HasPrefix(name, "tmp_pack_") || strings.HasPrefix(name, "tmp_idx_")) {
			temps = append(temps, p)
		}
		return nil
	})
	if err != nil || len(temps) == 0 {
		return nil, err
	}
	if found != nil {
		found(slices.Clone(temps))
	}
	deadline := time.Now().Add(wait)
	for {
		left := temps[:0]
		for _, p := range temps {
			_, err := os.Lstat(p)
			switch {
			case err == nil:
				left = append(left, p)
			case !errors.Is(err, fs.ErrNotExist):
				return nil, err
			}
		}
		temps = left
		if len(temps) == 0 || time.Now().After(deadline) {
			return temps, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func rel(dir, p string) string {
	if r, err := filepath.Rel(dir, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// checker verifies a home after its server stopped cleanly.
type checker struct {
	mcpkeep  string // the mcpkeep binary
	registry string // the registry file the servers used
}

// check verifies, after the restarted server stopped: no state or PID file
// left, no dead registry entry, every config file parses, every
// acknowledged value is on disk and at the commit its server named, git
// fsck is clean and mcpkeep doctor finds nothing. It then folds what it saw
// into the model, so the next crash is judged from here.
func (c checker) check(ctx context.Context, h *home) []error {
	var errs []error
	for _, name := range []string{statefile.FileName, lifecycle.LockFile, "mcp.sock"} {
		if _, err := os.Lstat(filepath.Join(h.dir, name)); !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s is still there after a clean stop (err %v)", name, err))
		}
	}
	errs = append(errs, c.checkRegistry()...)
	disk, perrs := readConfig(h)
	errs = append(errs, perrs...)
	errs = append(errs, h.checkDisk(disk)...)
	errs = append(errs, h.checkHistory(ctx)...)
	errs = append(errs, h.checkOrphans(ctx, disk)...)
	if err := fsck(ctx, h.configDir()); err != nil {
		errs = append(errs, err)
	}
	if h.remote != "" {
		errs = append(errs, c.checkRemote(ctx, h)...)
	}
	if err := c.doctor(ctx, h.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		h.settle(disk)
	}
	return errs
}

// checkRegistry fails for any entry of a process that is not running:
// every server of the suite has stopped by now.
func (c checker) checkRegistry() []error {
	var f struct {
		Servers []statefile.Entry `json:"servers"`
	}
	err := atomicfile.ReadJSON(c.registry, &f)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("registry: %w", err)}
	}
	var errs []error
	for _, e := range f.Servers {
		if !e.State.Alive() {
			errs = append(errs, fmt.Errorf("registry %s holds a dead entry: %s, pid %d", c.registry, e.ID, e.State.PID))
		}
	}
	return errs
}

// readConfig parses every config file strictly and returns the
// preferences of each persona.
func readConfig(h *home) (map[string]map[string]string, []error) {
	var errs []error
	prefs := map[string]map[string]string{}
	dir := h.configDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		r := rel(dir, p)
		switch {
		case r == "base.yaml":
			var b base
			if err := atomicfile.ReadYAMLStrict(p, &b); err != nil {
				errs = append(errs, err)
			} else if _, err := os.Stat(filepath.Join(dir, personaFile(b.ActivePersona))); err != nil {
				errs = append(errs, fmt.Errorf("base.yaml: active persona %q: %w", b.ActivePersona, err))
			}
		case strings.HasPrefix(r, "personas/"):
			var pr persona
			if err := atomicfile.ReadYAMLStrict(p, &pr); err != nil {
				errs = append(errs, err)
				return nil
			}
			name := strings.TrimSuffix(filepath.Base(r), ".yaml")
			if pr.Name != name {
				errs = append(errs, fmt.Errorf("%s: name is %q, want %q", r, pr.Name, name))
			}
			prefs[name] = pr.Preferences
		default:
			var v any
			if err := atomicfile.ReadYAMLStrict(p, &v); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return prefs, errs
}

// checkDisk checks that each slot holds its last acknowledged value, a
// value sent after it that was never acknowledged, or an orphan.
func (h *home) checkDisk(disk map[string]map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(h.slots)) {
		s := h.slots[k]
		name, key, _ := strings.Cut(k, ".")
		got := disk[name][key]
		if got != s.acked && !slices.Contains(s.pending, got) && !slices.Contains(s.orphans, got) {
			errs = append(errs, &lostError{fmt.Errorf("%s: %s is %q on disk; want the acknowledged %q, one of %q sent after it, or one of %q whose process was killed",
				personaFile(name), key, got, s.acked, s.pending, s.orphans)})
		}
	}
	return errs
}

// checkOrphans checks that a slot holding an orphan (see slot.orphans)
// got it from a commit made after the slot's last acknowledged one: an
// orphan that landed before it and came back later (stale bytes written
// again) is a lost write too.
func (h *home) checkOrphans(ctx context.Context, disk map[string]map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(h.slots)) {
		s := h.slots[k]
		name, key, _ := strings.Cut(k, ".")
		got := disk[name][key]
		if got == s.acked || slices.Contains(s.pending, got) || !slices.Contains(s.orphans, got) {
			continue
		}
		since := "HEAD"
		for _, a := range slices.Backward(h.acks) {
			if a.slot() == k {
				since = a.commit + "..HEAD"
				break
			}
		}
		out, err := git(ctx, h.configDir(), nil, "rev-list", since, "--", personaFile(name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		found := false
		for c := range strings.FieldsSeq(string(out)) {
			data, err := git(ctx, h.configDir(), nil, "show", c+":"+personaFile(name))
			if err != nil {
				errs = append(errs, err)
				break
			}
			var p persona
			if yaml.Unmarshal(data, &p) == nil && p.Preferences[key] == got {
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, &lostError{fmt.Errorf("%s: %s is %q on disk, a change whose process was killed, but no commit after the acknowledged %q sets it",
				personaFile(name), key, got, s.acked)})
		}
	}
	return errs
}

// settle makes what the disk holds the model's starting point.
func (h *home) settle(disk map[string]map[string]string) {
	for k, s := range h.slots {
		name, key, _ := strings.Cut(k, ".")
		s.acked, s.pending, s.orphans = disk[name][key], nil, nil
	}
	h.checked = len(h.acks)
}

// checkHistory checks that every acknowledged commit is still reachable
// from HEAD and that the acknowledgements not seen before hold their value
// at that commit, using the git command rather than the library under
// test.
func (h *home) checkHistory(ctx context.Context) []error {
	if len(h.acks) == 0 {
		return nil
	}
	out, err := git(ctx, h.configDir(), nil, "rev-list", "HEAD")
	if err != nil {
		return []error{err}
	}
	reachable := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		reachable[line] = true
	}
	var errs []error
	for _, a := range h.acks {
		if !reachable[a.commit] {
			errs = append(errs, &lostError{fmt.Errorf("acknowledged commit %s (%s=%q) is not in the history of HEAD", a.commit, a.slot(), a.Value)})
		}
	}
	fresh := h.acks[h.checked:]
	if len(fresh) == 0 || len(errs) > 0 {
		return errs
	}
	var in bytes.Buffer
	for _, a := range fresh {
		fmt.Fprintf(&in, "%s:%s\n", a.commit, personaFile(a.Persona))
	}
	out, err = git(ctx, h.configDir(), &in, "cat-file", "--batch")
	if err != nil {
		return []error{err}
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, a := range fresh {
		data, err := batchObject(r)
		if err != nil {
			errs = append(errs, &lostError{fmt.Errorf("%s at acknowledged commit %s: %w", personaFile(a.Persona), a.commit, err)})
			continue
		}
		var p persona
		if err := yaml.Unmarshal(data, &p); err != nil {
			errs = append(errs, &lostError{fmt.Errorf("%s at acknowledged commit %s: %w", personaFile(a.Persona), a.commit, err)})
		} else if got := p.Preferences[a.Key]; got != a.Value {
			errs = append(errs, &lostError{fmt.Errorf("%s at acknowledged commit %s: %s is %q, want %q", personaFile(a.Persona), a.commit, a.Key, got, a.Value)})
		}
	}
	return errs
}

// batchObject reads one object from git cat-file --batch output.
func batchObject(r *bufio.Reader) ([]byte, error) {
	header, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("cat-file: %w", err)
	}
	f := strings.Fields(header)
	if len(f) != 3 {
		return nil, fmt.Errorf("cat-file: %s", strings.TrimSpace(header))
	}
	size, err := strconv.Atoi(f[2])
	if err != nil {
		return nil, fmt.Errorf("cat-file header %q", header)
	}
	data := make([]byte, size+1) // and the newline after it
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("cat-file: %w", err)
	}
	return data[:size], nil
}

// git runs the git command in dir.
func git(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// fsck runs git fsck --full --strict (objects as git itself would write
// them, modes and tree order included); dangling objects (a crash between
// writing objects and the ref leaves some) are not corruption.
func fsck(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "-c", "safe.directory=*", "-C", dir, "fsck", "--full", "--strict", "--no-progress", "--no-dangling")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("git fsck --full --strict in %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// doctor runs mcpkeep doctor --json and fails unless it exits 0 with no
// findings.
func (c checker) doctor(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, c.mcpkeep, "doctor", "--home", dir, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var report struct {
		Findings []json.RawMessage `json:"findings"`
	}
	if jerr := json.Unmarshal(out, &report); err != nil || jerr != nil || len(report.Findings) > 0 {
		return fmt.Errorf("mcpkeep doctor --json: %v: %s%s", errors.Join(err, jerr), bytes.TrimSpace(out), bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
