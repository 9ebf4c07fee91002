// Package faultctl is the runtime fault API of the `inabox up` processes,
// in the style of toxiproxy: every process (inaswitch, inaps, inahost)
// serves it on its control socket (JSON over HTTP), for the link
// directions it models. A link is named as in the scenario (its host:
// "h3", "ps0"); direction "up" is host→switch, modelled in the peer's
// process, "down" is switch→host, modelled in the switch process. Each
// direction's rate, delay, queue, MTU and impairments live in exactly one
// process, so a change acts in one place.
//
// The core, Table, is free of I/O: it holds each direction's
// configuration as the scenario set it, the changes made through the API
// and the timed windows (bursts) open on it, and computes what the emulated
// link direction carries. Its methods run on the process's run goroutine
// (the Server hands every change to a Runner, procnode.Proc.Do). Index is
// the file an `inabox up` run writes with every process's socket, and
// Client talks to one process. docs/processes.md lists the endpoints.
package faultctl

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/inabox/inabox/emu"
)

// Directions of a link.
const (
	Up   = "up"   // host → switch: modelled in the peer's process
	Down = "down" // switch → host: modelled in the switch process
	Both = "both" // a selector: every direction of the link a process models
)

// AllLinks selects every link.
const AllLinks = "all"

// Target is one modelled link direction as the Table changes it: an emu
// link direction (LinkDir), or a fake in tests. It is called on the run
// goroutine only.
type Target interface {
	Config() emu.LinkConfig
	SetConfig(emu.LinkConfig) error
	Up() bool
	SetUp(bool)
	Stats() emu.LinkStats
}

// LinkDir is one direction of an emu.Link as a Target.
type LinkDir struct {
	L *emu.Link
	D emu.Dir
}

func (t LinkDir) Config() emu.LinkConfig           { return t.L.Config(t.D) }
func (t LinkDir) SetConfig(c emu.LinkConfig) error { return t.L.SetConfig(t.D, c) }
func (t LinkDir) Up() bool                         { return t.L.DirUp(t.D) }
func (t LinkDir) SetUp(up bool)                    { t.L.SetDirUp(t.D, up) }
func (t LinkDir) Stats() emu.LinkStats             { return t.L.Stats(t.D) }

// Clock is the run's clock, used on the run goroutine: After calls fn
// there, d of run time from now.
type Clock interface {
	Now() time.Duration
	After(d time.Duration, fn func())
}

// NetClock is an emu.Network's clock (After is emu.Network.At).
type NetClock struct{ N *emu.Network }

func (c NetClock) Now() time.Duration               { return c.N.Now() }
func (c NetClock) After(d time.Duration, fn func()) { c.N.At(c.N.Now()+d, fn) }

// Direction is one link direction a process models.
type Direction struct {
	// Link is the scenario's link name (the host: h3, ps0); Node the
	// scenario node at its host end (w1.0, ps); Dir Up or Down.
	Link, Node, Dir string
	T               Target
}

// Window kinds: a fault that holds for a while on top of a direction's
// configuration and then reverts by itself.
const (
	WinLoss              = "loss"               // Value: a loss probability, combined with the configured one
	WinDuplicate         = "duplicate"          // Value: a duplication probability
	WinReorder           = "reorder"            // Value: a reordering probability
	WinCorrupt           = "corrupt"            // Value: a corruption probability (dropped by the MAC: bad FCS)
	WinCorruptUndetected = "corrupt_undetected" // Value: a probability of damage past the FCS
	WinDelay             = "delay"              // Delay: added propagation delay
	WinJitter            = "jitter"             // Delay: added jitter
	WinRate              = "rate"               // Value: the rate in Gb/s while open (replaces the configured one)
	WinMTU               = "mtu"                // Value: the MTU in bytes while open
)

// WindowKinds lists the window kinds.
var WindowKinds = []string{WinLoss, WinDuplicate, WinReorder, WinCorrupt, WinCorruptUndetected, WinDelay, WinJitter, WinRate, WinMTU}

// Window is a timed fault on a direction: it opens when given and closes
// Duration of run time later (timed by the process's own clock). Windows
// of the same probability kind add up (as emu's bursts do), and add to the
// configured probability as independent events; delays add; the latest
// rate or MTU window wins.
type Window struct {
	Kind     string   `json:"kind"`
	Value    float64  `json:"value,omitempty"`
	Delay    Duration `json:"delay,omitempty"`
	Duration Duration `json:"duration"`
}

func (w Window) check(where string) error {
	bad := func(field string, v any, why string) error {
		return &FieldError{Where: where, Field: field, Value: v, Why: why}
	}
	if w.Duration <= 0 {
		return bad("duration", w.Duration, "must be > 0")
	}
	switch w.Kind {
	case WinLoss, WinDuplicate, WinReorder, WinCorrupt, WinCorruptUndetected:
		if math.IsNaN(w.Value) || w.Value <= 0 || w.Value > 1 {
			return bad("value", w.Value, "must be a probability in (0, 1]")
		}
	case WinDelay, WinJitter:
		if w.Delay <= 0 {
			return bad("delay", w.Delay, "must be > 0")
		}
	case WinRate:
		if math.IsNaN(w.Value) || w.Value <= 0 || math.IsInf(w.Value, 0) {
			return bad("value", w.Value, "must be a rate in Gb/s > 0")
		}
	case WinMTU:
		if w.Value != math.Trunc(w.Value) || w.Value < emu.MinMTU || w.Value > 65535 {
			return bad("value", w.Value, fmt.Sprintf("must be an MTU in bytes, %d..65535", emu.MinMTU))
		}
	default:
		return bad("kind", w.Kind, "must be one of "+strings.Join(WindowKinds, ", "))
	}
	return nil
}

// FieldError is a bad value given to the API, naming the field (as the
// API spells it) and the value.
type FieldError struct {
	Where string
	Field string
	Value any
	Why   string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s = %v: %s", e.Where, e.Field, e.Value, e.Why)
}

// NotFoundError is a selection that matches no direction of the process.
type NotFoundError struct {
	Link, Dir string
	Have      []string // the directions the process models ("h3 up")
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no link direction %s %s here (this process models: %s)", e.Link, e.Dir, strings.Join(e.Have, ", "))
}

// apiField names emu.LinkConfig's fields as the API does.
var apiField = map[string]string{
	"BitsPerSecond":     "rate_gbps",
	"Delay":             "delay",
	"Jitter":            "jitter",
	"MTUBytes":          "mtu",
	"OverheadBytes":     "overhead_bytes",
	"QueuePackets":      "queue_packets",
	"QueueBytes":        "queue_bytes",
	"ECNThresholdBytes": "ecn_threshold_bytes",

	"Impairments.Loss":                      "loss",
	"Impairments.Duplicate":                 "duplicate",
	"Impairments.Reorder":                   "reorder",
	"Impairments.ReorderDelay":              "reorder_delay",
	"Impairments.Corrupt":                   "corrupt",
	"Impairments.CorruptUndetected":         "corrupt_undetected",
	"Impairments.GilbertElliott.PGoodToBad": "gilbert_elliott.p_good_to_bad",
	"Impairments.GilbertElliott.PBadToGood": "gilbert_elliott.p_bad_to_good",
	"Impairments.GilbertElliott.LossGood":   "gilbert_elliott.loss_good",
	"Impairments.GilbertElliott.LossBad":    "gilbert_elliott.loss_bad",
}

// validate checks c with emu's Validate and names a bad field as the API
// does.
func validate(where string, c emu.LinkConfig) error {
	err := c.Validate(where)
	var ce *emu.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	f, v := ce.Field, ce.Value
	if n, ok := apiField[f]; ok {
		f = n
	}
	switch x := v.(type) {
	case int64:
		if ce.Field == "BitsPerSecond" {
			v = float64(x) / 1e9
		}
	case time.Duration:
		v = Duration(x)
	}
	return &FieldError{Where: where, Field: f, Value: v, Why: ce.Why}
}

// entry is one direction's state.
type entry struct {
	Direction
	scenario emu.LinkConfig // as the process was started (Reset returns to it)
	base     emu.LinkConfig // with the API's changes, windows excluded
	windows  []*window
}

type window struct {
	id    int
	w     Window
	until time.Duration
}

func (e *entry) name() string { return e.Link + " " + e.Dir }

// Table is the fault state of a process's link directions. Every method
// must be called on the run goroutine.
type Table struct {
	clock  Clock
	dirs   []*entry
	nextID int
}

// NewTable returns the table of dirs, each starting with its target's
// configuration as the scenario's.
func NewTable(clock Clock, dirs ...Direction) *Table {
	t := &Table{clock: clock}
	for _, d := range dirs {
		c := d.T.Config()
		t.dirs = append(t.dirs, &entry{Direction: d, scenario: c, base: c})
	}
	return t
}

// selectDirs returns the directions link and dir select: link AllLinks is
// every link, dir Both or "" every direction.
func (t *Table) selectDirs(link, dir string) ([]*entry, error) {
	if dir != "" && dir != Up && dir != Down && dir != Both {
		return nil, &FieldError{Where: "link " + link, Field: "dir", Value: dir, Why: "must be up, down or both"}
	}
	var out []*entry
	var have []string
	for _, e := range t.dirs {
		have = append(have, e.name())
		if (link == AllLinks || e.Link == link) && (dir == "" || dir == Both || e.Dir == dir) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, &NotFoundError{Link: link, Dir: dir, Have: have}
	}
	return out, nil
}

// change computes every selected direction's new base and windows with
// fn, validates what each would carry, and only then applies them all: a
// bad value changes nothing.
func (t *Table) change(link, dir string, fn func(e *entry, base *emu.LinkConfig, ws *[]*window) error) ([]DirState, error) {
	es, err := t.selectDirs(link, dir)
	if err != nil {
		return nil, err
	}
	bases := make([]emu.LinkConfig, len(es))
	wins := make([][]*window, len(es))
	for i, e := range es {
		bases[i], wins[i] = e.base, slices.Clone(e.windows)
		if err := fn(e, &bases[i], &wins[i]); err != nil {
			return nil, err
		}
		if err := validate(e.name(), effective(bases[i], wins[i])); err != nil {
			return nil, err
		}
	}
	for i, e := range es {
		e.base, e.windows = bases[i], wins[i]
		if err := e.T.SetConfig(effective(e.base, e.windows)); err != nil {
			return nil, err // validated above: cannot happen
		}
	}
	return t.states(es), nil
}

// either is the probability of p or q, independent (emu's rule for a
// burst on top of the configured probability).
func either(p, q float64) float64 {
	if q <= 0 {
		return p
	}
	return 1 - (1-p)*(1-math.Min(q, 1))
}

// effective is what a direction carries: its base with the open windows.
func effective(base emu.LinkConfig, ws []*window) emu.LinkConfig {
	c := base
	var loss, dup, reo, cor, und float64
	for _, w := range ws {
		switch w.w.Kind {
		case WinLoss:
			loss += w.w.Value
		case WinDuplicate:
			dup += w.w.Value
		case WinReorder:
			reo += w.w.Value
		case WinCorrupt:
			cor += w.w.Value
		case WinCorruptUndetected:
			und += w.w.Value
		case WinDelay:
			c.Delay += time.Duration(w.w.Delay)
		case WinJitter:
			c.Jitter += time.Duration(w.w.Delay)
		case WinRate:
			c.BitsPerSecond = bps(w.w.Value)
		case WinMTU:
			c.MTUBytes = int(w.w.Value)
		}
	}
	im := &c.Impairments
	im.Loss, im.Duplicate, im.Reorder = either(im.Loss, loss), either(im.Duplicate, dup), either(im.Reorder, reo)
	im.Corrupt, im.CorruptUndetected = either(im.Corrupt, cor), either(im.CorruptUndetected, und)
	return c
}

func bps(gbps float64) int64 { return int64(math.Round(gbps * 1e9)) }

// List returns the state of every direction.
func (t *Table) List() []DirState { return t.states(t.dirs) }

// Select returns the state of the directions link and dir select.
func (t *Table) Select(link, dir string) ([]DirState, error) {
	es, err := t.selectDirs(link, dir)
	if err != nil {
		return nil, err
	}
	return t.states(es), nil
}

func (t *Table) states(es []*entry) []DirState {
	out := make([]DirState, 0, len(es))
	now := t.clock.Now()
	for _, e := range es {
		c := e.T.Config()
		s := DirState{Link: e.Link, Node: e.Node, Dir: e.Dir, Up: e.T.Up(), Config: configOf(c), Impairments: impairmentsOf(c),
			Counters: countersOf(e.T.Stats())}
		for _, w := range e.windows {
			s.Windows = append(s.Windows, WindowState{Window: w.w, Remaining: Duration(max(w.until-now, 0))})
		}
		out = append(out, s)
	}
	return out
}

// SetImpairments changes the impairments p gives (the others stay) of the
// selected directions.
func (t *Table) SetImpairments(link, dir string, p ImpairmentsPatch) ([]DirState, error) {
	return t.change(link, dir, func(_ *entry, c *emu.LinkConfig, _ *[]*window) error {
		p.apply(c)
		return nil
	})
}

// ClearImpairments removes every impairment (and jitter) of the selected
// directions: the channel is clean, windows still open stay until they
// close.
func (t *Table) ClearImpairments(link, dir string) ([]DirState, error) {
	return t.change(link, dir, func(_ *entry, c *emu.LinkConfig, _ *[]*window) error {
		c.Impairments, c.Jitter = emu.Impairments{}, 0
		return nil
	})
}

// SetConfig changes the rate, delay, MTU or queue p gives of the selected
// directions.
func (t *Table) SetConfig(link, dir string, p ConfigPatch) ([]DirState, error) {
	return t.change(link, dir, func(_ *entry, c *emu.LinkConfig, _ *[]*window) error {
		return p.apply(c)
	})
}

// Open opens window w on the selected directions; each closes by itself
// w.Duration later.
func (t *Table) Open(link, dir string, w Window) ([]DirState, error) {
	if err := w.check("link " + link + " " + dir); err != nil {
		return nil, err
	}
	var opened []*window
	until := t.clock.Now() + time.Duration(w.Duration)
	st, err := t.change(link, dir, func(_ *entry, _ *emu.LinkConfig, ws *[]*window) error {
		t.nextID++
		nw := &window{id: t.nextID, w: w, until: until}
		*ws = append(*ws, nw)
		opened = append(opened, nw)
		return nil
	})
	if err != nil {
		return nil, err
	}
	es, _ := t.selectDirs(link, dir)
	for i, e := range es {
		e, id := e, opened[i].id
		t.clock.After(time.Duration(w.Duration), func() { t.close(e, id) })
	}
	return st, nil
}

// close closes window id on e (if Reset has not dropped it already).
func (t *Table) close(e *entry, id int) {
	i := slices.IndexFunc(e.windows, func(w *window) bool { return w.id == id })
	if i < 0 {
		return
	}
	e.windows = slices.Delete(e.windows, i, i+1)
	e.T.SetConfig(effective(e.base, e.windows)) // valid: the base and the rest were
}

// SetUp takes the selected directions down (dropping what they hold) or
// brings them up. Down with a duration > 0 comes back up by itself after
// it.
func (t *Table) SetUp(link, dir string, up bool, d time.Duration) ([]DirState, error) {
	es, err := t.selectDirs(link, dir)
	if err != nil {
		return nil, err
	}
	if d < 0 {
		return nil, &FieldError{Where: "link " + link + " " + dir, Field: "duration", Value: Duration(d), Why: "must be ≥ 0"}
	}
	for _, e := range es {
		e.T.SetUp(up)
		if !up && d > 0 {
			e := e
			t.clock.After(d, func() { e.T.SetUp(true) })
		}
	}
	return t.states(es), nil
}

// Reset returns the selected directions to the configuration the process
// started with: API changes undone, windows closed, up.
func (t *Table) Reset(link, dir string) ([]DirState, error) {
	es, err := t.selectDirs(link, dir)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		e.T.SetUp(true)
	}
	return t.change(link, dir, func(e *entry, c *emu.LinkConfig, ws *[]*window) error {
		*c, *ws = e.scenario, nil
		return nil
	})
}
