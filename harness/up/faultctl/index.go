package faultctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// IndexFile is the name of a run's index in its work directory.
const IndexFile = "controls.json"

// Index is what an `inabox up` run writes into its work directory
// (IndexFile) once every process runs: each process's control socket and
// which process models each direction of each link.
type Index struct {
	ID       string `json:"id"`
	Pid      int    `json:"pid"` // the orchestrator's
	Dir      string `json:"dir"`
	Scenario string `json:"scenario"`
	Policy   string `json:"policy"`
	// StartUnixNano is the wall-clock time of the run's time 0.
	StartUnixNano int64 `json:"start_unix_ns"`
	// Sockets maps a process (switch, ps, w1.0, ...) to its control socket.
	Sockets map[string]string `json:"sockets"`
	Links   []IndexLink       `json:"links"`
}

// IndexLink is one host↔switch link: its scenario name, the node at its
// host end and the processes modelling its two directions.
type IndexLink struct {
	Link string `json:"link"`
	Node string `json:"node"`
	Up   string `json:"up"`   // host → switch
	Down string `json:"down"` // switch → host
}

// Write writes the index into dir (atomically).
func (ix *Index) Write(dir string) error {
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, IndexFile)
	if err := os.WriteFile(p+".tmp", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// ReadIndex reads the index of the run whose work directory is dir.
func ReadIndex(dir string) (*Index, error) {
	b, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w (is inabox up running there?)", dir, err)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, IndexFile), err)
	}
	return &ix, nil
}

// RunDirGlob matches the work directories of `inabox up` runs.
var RunDirGlob = filepath.Join(os.TempDir(), "inabox-up-*")

// FindRun returns the index of the run in dir, or with dir "" of the one
// `inabox up` running (whose orchestrator is alive); an error if there
// is none or several.
func FindRun(dir string) (*Index, error) {
	if dir != "" {
		return ReadIndex(dir)
	}
	dirs, _ := filepath.Glob(RunDirGlob)
	var live []*Index
	for _, d := range dirs {
		ix, err := ReadIndex(d)
		if err != nil || ix.Pid <= 0 || syscall.Kill(ix.Pid, 0) == syscall.ESRCH {
			continue
		}
		live = append(live, ix)
	}
	switch len(live) {
	case 0:
		return nil, fmt.Errorf("no inabox up is running (no %s in %s with a live orchestrator)", IndexFile, RunDirGlob)
	case 1:
		return live[0], nil
	}
	var ds []string
	for _, ix := range live {
		ds = append(ds, ix.Dir)
	}
	return nil, fmt.Errorf("%d inabox up runs: choose one with --run (%s)", len(live), strings.Join(ds, ", "))
}

// Call is one process to ask about a selection, and the direction to ask
// it for.
type Call struct {
	Process, Socket, Dir string
}

// Calls returns the processes that model link's dir (link AllLinks: every
// link; dir Up, Down, Both or ""), each once per direction.
func (ix *Index) Calls(link, dir string) ([]Call, error) {
	if dir != "" && dir != Up && dir != Down && dir != Both {
		return nil, &FieldError{Where: "link " + link, Field: "dir", Value: dir, Why: "must be up, down or both"}
	}
	var out []Call
	add := func(proc, d string) error {
		sock, ok := ix.Sockets[proc]
		if !ok {
			return fmt.Errorf("run %s: no control socket for %s", ix.ID, proc)
		}
		c := Call{Process: proc, Socket: sock, Dir: d}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
		return nil
	}
	var names []string
	for _, l := range ix.Links {
		names = append(names, l.Link)
		if link != AllLinks && l.Link != link {
			continue
		}
		if dir != Down {
			if err := add(l.Up, Up); err != nil {
				return nil, err
			}
		}
		if dir != Up {
			if err := add(l.Down, Down); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		slices.Sort(names)
		return nil, fmt.Errorf("run %s has no link %q (links: %s)", ix.ID, link, strings.Join(slices.Compact(names), ", "))
	}
	return out, nil
}

// Each calls fn on every process that models link's dir and returns the
// directions they answer, sorted by link, node and direction; the errors
// name the process.
func (ix *Index) Each(ctx context.Context, link, dir string, fn func(ctx context.Context, c *Client, link, dir string) ([]DirState, error)) ([]DirState, error) {
	calls, err := ix.Calls(link, dir)
	if err != nil {
		return nil, err
	}
	// In parallel: the directions of a link change at (nearly) the same
	// time in the processes that model them.
	sts := make([][]DirState, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := fn(ctx, NewClient(c.Socket), link, c.Dir)
			if err != nil {
				err = fmt.Errorf("%s: %w", c.Process, err)
			}
			sts[i], errs[i] = st, err
		}()
	}
	wg.Wait()
	var out []DirState
	for _, st := range sts {
		out = append(out, st...)
	}
	SortStates(out)
	return out, errors.Join(errs...)
}

// List returns every direction of every link of the run.
func (ix *Index) List(ctx context.Context) ([]DirState, error) {
	var procs []string
	for p := range ix.Sockets {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	var out []DirState
	var errs []error
	for _, p := range procs {
		st, err := NewClient(ix.Sockets[p]).List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		out = append(out, st...)
	}
	SortStates(out)
	return out, errors.Join(errs...)
}

// SortStates sorts directions by link, node, then up before down.
func SortStates(st []DirState) {
	sort.SliceStable(st, func(i, j int) bool {
		a, b := st[i], st[j]
		if a.Link != b.Link {
			return a.Link < b.Link
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Dir == Up && b.Dir == Down
	})
}
