package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/emu"
	"go.yaml.in/yaml/v3"
)

// This file is the fault language: impairments (standing random effects
// of a link direction, possibly from a named preset), faults (timed or
// event-triggered changes), and their checks.

// Link directions (impairments[].direction, faults[].direction).
const (
	DirBoth = "both" // the default
	DirUp   = "up"   // host → switch
	DirDown = "down" // switch → host
)

// BurstLoss is Gilbert–Elliott bursty loss, given either by its two
// transition probabilities (per packet) and the loss probabilities of the
// two states, or by the long-run loss Rate and the MeanBurst length of a
// loss burst in packets (then the bad state loses every packet and the
// good state none).
type BurstLoss struct {
	PGoodToBad float64 `yaml:"p_good_to_bad,omitempty" json:"p_good_to_bad,omitempty"`
	PBadToGood float64 `yaml:"p_bad_to_good,omitempty" json:"p_bad_to_good,omitempty"`
	LossGood   float64 `yaml:"loss_good,omitempty" json:"loss_good,omitempty"`
	// LossBad is the bad state's loss probability [1].
	LossBad   float64 `yaml:"loss_bad,omitempty" json:"loss_bad,omitempty"`
	Rate      float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	MeanBurst float64 `yaml:"mean_burst,omitempty" json:"mean_burst,omitempty"`
}

// Model is the emulator's model of b. With Rate and MeanBurst: the bad
// state is left with probability 1/MeanBurst per packet, and entered with
// the probability that makes the bad state's long-run share Rate.
func (b *BurstLoss) Model() *emu.GilbertElliott {
	if b.Rate > 0 {
		pbg := 1 / b.MeanBurst
		return &emu.GilbertElliott{PGoodToBad: b.Rate * pbg / (1 - b.Rate), PBadToGood: pbg, LossBad: 1}
	}
	return &emu.GilbertElliott{PGoodToBad: b.PGoodToBad, PBadToGood: b.PBadToGood, LossGood: b.LossGood, LossBad: b.LossBad}
}

// Flap makes a link fail and recover at random: up for exponentially
// distributed times of mean MeanUp, down for exponentially distributed
// times of mean MeanDown.
type Flap struct {
	MeanUp   Duration `yaml:"mean_up" json:"mean_up"`
	MeanDown Duration `yaml:"mean_down" json:"mean_down"`
}

// When is the event a fault is timed from (instead of an absolute time):
// one of FirstPacket, Iteration, AllReduce (with Fraction) of Job, or
// RunFraction. Counts are from 0, like ranks.
type When struct {
	// Job names the job whose progress triggers the fault.
	Job string `yaml:"job,omitempty" json:"job,omitempty"`
	// FirstPacket: when the job's first worker begins its first
	// all-reduce (its first packet leaves).
	FirstPacket bool `yaml:"first_packet,omitempty" json:"first_packet,omitempty"`
	// Iteration: when the job's rank 0 begins the first all-reduce of this
	// iteration.
	Iteration int `yaml:"iteration,omitempty" json:"iteration,omitempty"`
	// AllReduce: when the job's rank 0 has the results of Fraction of this
	// all-reduce's chunks (0: when it begins; 1: when it ends). All-reduces
	// are counted over iterations and buckets.
	AllReduce int     `yaml:"allreduce,omitempty" json:"allreduce,omitempty"`
	Fraction  float64 `yaml:"fraction,omitempty" json:"fraction,omitempty"`
	// RunFraction: when this fraction of every job's all-reduces (counted
	// at each job's rank 0) have ended.
	RunFraction float64 `yaml:"run_fraction,omitempty" json:"run_fraction,omitempty"`

	form string
}

// The forms of When.
const (
	WhenFirstPacket = "first_packet"
	WhenIteration   = "iteration"
	WhenAllReduce   = "allreduce"
	WhenRunFraction = "run_fraction"
)

// Form is which trigger w is: one of the When* constants (set when the
// scenario is validated).
func (w *When) Form() string { return w.form }

// String describes w ("job a's all-reduce 3 at 50 % of its chunks").
func (w *When) String() string {
	switch w.form {
	case WhenFirstPacket:
		return fmt.Sprintf("job %s's first packet", w.Job)
	case WhenIteration:
		return fmt.Sprintf("job %s's iteration %d", w.Job, w.Iteration)
	case WhenAllReduce:
		return fmt.Sprintf("job %s's all-reduce %d at %s of its chunks", w.Job, w.AllReduce, pct(w.Fraction))
	case WhenRunFraction:
		return fmt.Sprintf("%s of the run's all-reduces", pct(w.RunFraction))
	}
	return ""
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'g', 4, 64) + " %" }

// Presets are the built-in impairment presets (impairments[].preset), for
// tests: round numbers of the right order, not measurements of a network.
var Presets = map[string]LinkImpairment{
	// lossy: Bernoulli loss of 0.1 % per frame.
	"lossy": {Loss: 1e-3},
	// bursty: 0.1 % loss in bursts of 8 frames on average.
	"bursty": {BurstLoss: &BurstLoss{Rate: 1e-3, MeanBurst: 8, LossBad: 1}},
	// corrupting: 1 in 10^4 frames with a bad FCS, 1 in 10^6 damaged past
	// the FCS (for the ICRC checks).
	"corrupting": {Corrupt: 1e-4, CorruptUndetected: 1e-6},
	// jittery: up to 20 µs of jitter, 0.1 % of frames reordered by 20 µs.
	"jittery": {Jitter: Duration(20 * time.Microsecond), Reorder: 1e-3, ReorderDelay: Duration(20 * time.Microsecond)},
	// flapping: down for 1 ms on average every 20 ms on average.
	"flapping": {Flap: &Flap{MeanUp: Duration(20 * time.Millisecond), MeanDown: Duration(time.Millisecond)}},
}

// PresetNames lists the built-in presets, sorted.
func PresetNames() []string {
	ns := make([]string, 0, len(Presets))
	for n := range Presets {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// impairmentKeys are the fields of LinkImpairment a preset can give (every
// one but link and preset), by YAML key.
var impairmentKeys = func() []string {
	var ks []string
	t := reflect.TypeFor[LinkImpairment]()
	for i := range t.NumField() {
		k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if k != "link" && k != "preset" {
			ks = append(ks, k)
		}
	}
	return ks
}()

func impairmentField(im *LinkImpairment, key string) reflect.Value {
	v := reflect.ValueOf(im).Elem()
	f, _ := fieldByTag(v, key)
	return f
}

// resolvePresets fills each impairment's fields that the file does not
// give from its preset (the scenario's presets first, then the built-in
// ones); a preset may itself name a preset it extends.
func (s *Scenario) resolvePresets() error {
	// burst_loss.loss_bad defaults to 1 where the file gives a burst_loss
	// without it.
	for i := range s.Impairments {
		if b := s.Impairments[i].BurstLoss; b != nil && !s.has(fmt.Sprintf("impairments[%d].burst_loss.loss_bad", i)) {
			b.LossBad = 1
		}
	}
	for name, im := range s.Presets {
		if b := im.BurstLoss; b != nil && !s.has("presets."+name+".burst_loss.loss_bad") {
			b.LossBad = 1
		}
	}
	var errs []*FieldError
	fail := func(p, val, rule string) {
		errs = append(errs, &FieldError{File: s.file, Line: s.lineOf(p), Path: p, Value: strconv.Quote(val), Rule: rule})
	}
	fromFile, err := s.loadPresetsFile()
	if err != nil {
		return err
	}
	resolved := map[string]LinkImpairment{}
	var resolve func(name string, stack []string) (LinkImpairment, bool)
	resolve = func(name string, stack []string) (LinkImpairment, bool) {
		if r, ok := resolved[name]; ok {
			return r, true
		}
		own, ok := s.Presets[name]
		if !ok {
			f, inFile := fromFile[name]
			if !inFile {
				r, ok := Presets[name]
				return r, ok
			}
			// a file's preset: its fields that are set are the ones it gives
			if slices.Contains(stack, name) {
				fail("presets_file", name, "presets extend each other in a cycle: "+strings.Join(append(stack, name), " → "))
				return f, false
			}
			out := f
			if f.Preset != "" {
				base, ok := resolve(f.Preset, append(stack, name))
				if !ok {
					fail("presets_file", s.PresetsFile, fmt.Sprintf("preset %s extends %q: not a preset: %s", name, f.Preset, s.presetList()))
					return f, false
				}
				out = base
				for _, k := range impairmentKeys {
					if v := impairmentField(&f, k); !v.IsZero() {
						impairmentField(&out, k).Set(v)
					}
				}
			}
			out.Preset = ""
			resolved[name] = out
			return out, true
		}
		p := "presets." + name
		if slices.Contains(stack, name) {
			fail(p+".preset", own.Preset, "presets extend each other in a cycle: "+strings.Join(append(stack, name), " → "))
			return own, false
		}
		if own.Link != "" {
			fail(p+".link", own.Link, "a preset names no link (the impairments that use it do)")
		}
		out := own
		if own.Preset != "" {
			base, ok := resolve(own.Preset, append(stack, name))
			if !ok {
				if !slices.Contains(stack, name) && len(errs) == 0 {
					fail(p+".preset", own.Preset, "not a preset: "+s.presetList())
				}
				return own, false
			}
			out = s.overlay(base, own, p)
		}
		out.Preset = ""
		resolved[name] = out
		return out, true
	}
	for _, name := range sortedKeys(s.Presets) {
		if !namePattern.MatchString(name) {
			fail("presets."+name, name, "a preset's name must match [A-Za-z0-9_.-]+")
		}
		resolve(name, nil)
	}
	for _, name := range sortedKeys(fromFile) {
		resolve(name, nil)
	}
	for i := range s.Impairments {
		im := &s.Impairments[i]
		if im.Preset == "" {
			continue
		}
		base, ok := resolve(im.Preset, nil)
		if !ok {
			if _, own := s.Presets[im.Preset]; !own {
				fail(fmt.Sprintf("impairments[%d].preset", i), im.Preset, "not a preset: "+s.presetList())
			}
			continue
		}
		*im = s.overlay(base, *im, fmt.Sprintf("impairments[%d]", i))
	}
	if len(errs) > 0 {
		return &Error{Errs: errs}
	}
	return nil
}

// overlay is base with the fields the file gives at path p (an impairment
// or a preset) taken from top.
func (s *Scenario) overlay(base, top LinkImpairment, p string) LinkImpairment {
	out := base
	out.Link, out.Preset = top.Link, top.Preset
	for _, k := range impairmentKeys {
		if s.has(p + "." + k) {
			impairmentField(&out, k).Set(impairmentField(&top, k))
		}
	}
	return out
}

func (s *Scenario) presetList() string {
	names := PresetNames()
	for _, n := range append(sortedKeys(s.Presets), sortedKeys(s.filePresets)...) {
		if _, builtin := Presets[n]; !builtin && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return "want one of " + strings.Join(names, ", ")
}

// loadPresetsFile reads presets_file: a mapping of preset names to
// impairment fields, strictly (unknown keys are errors), each preset
// checked like the scenario's own.
func (s *Scenario) loadPresetsFile() (map[string]LinkImpairment, error) {
	if s.PresetsFile == "" || s.read == nil {
		return nil, nil
	}
	one := func(rule string) error {
		return &Error{Errs: []*FieldError{{File: s.file, Line: s.lineOf("presets_file"), Path: "presets_file", Value: strconv.Quote(s.PresetsFile), Rule: rule}}}
	}
	data, err := s.read(s.PresetsFile)
	if err != nil {
		return nil, one("cannot read it: " + err.Error())
	}
	if len(data) > MaxFileBytes {
		return nil, one(fmt.Sprintf("%d bytes: a presets file may have at most %d", len(data), MaxFileBytes))
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, one(err.Error())
	}
	idx := newNodeIndex(&root)
	if idx.over != "" {
		return nil, one(fmt.Sprintf("line %d: %s: %s", idx.line(idx.over), idx.over, idx.why))
	}
	var ps map[string]LinkImpairment
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&ps); err != nil && !errors.Is(err, io.EOF) {
		return nil, one(err.Error())
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, one(fmt.Sprintf("line %d: a second YAML document: a presets file holds one", next.Line))
	}
	// checked as the scenario's own presets, errors naming this file
	v := validator{s: &Scenario{file: s.PresetsFile, index: idx, TimeLimit: s.TimeLimit}}
	for _, name := range sortedKeys(ps) {
		im := ps[name]
		v.check(name, name, namePattern.MatchString(name), "a preset's name must match [A-Za-z0-9_.-]+")
		v.check(name+".link", im.Link, im.Link == "", "a preset names no link (the impairments that use it do)")
		if b := im.BurstLoss; b != nil && !idx.has(name+".burst_loss.loss_bad") {
			b.LossBad = 1
		}
		v.validateImpairment(name+".", im)
	}
	if len(v.errs) > 0 {
		return nil, &Error{Errs: v.errs}
	}
	s.filePresets = ps
	return ps, nil
}

func (s *Scenario) lineOf(p string) int {
	if s.index == nil {
		return 0
	}
	return s.index.line(p)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// linkKinds are the fault kinds that act on a link.
var linkKinds = []string{FaultLinkDown, FaultLinkUp, FaultLossBurst, FaultDupBurst, FaultReorderBurst, FaultCorrupt,
	FaultCorruptUndetected, FaultDelaySpike, FaultJitterBurst, FaultRateChange, FaultMTUChange}

// IsLinkFault reports whether kind acts on a link.
func IsLinkFault(kind string) bool { return slices.Contains(linkKinds, kind) }

// validateFaults checks faults[] and impairments[] (links names every
// link, by its host).
func (v *validator) validateFaults(links map[string]bool, linkRule string, models Models) {
	s := v.s
	jobs := map[string]int{}
	for i, j := range s.Jobs {
		jobs[j.Name] = i
	}
	for i, f := range s.Faults {
		p := fmt.Sprintf("faults[%d].", i)
		if f.When == nil {
			v.check(p+"at", f.At, f.At >= 0 && f.At < s.TimeLimit, "must be in [0, time_limit)")
		} else {
			v.check(p+"at", f.At, f.At >= 0 && f.At < s.TimeLimit, "with when: the delay after the event, in [0, time_limit)")
			v.validateWhen(p+"when", f.When, jobs, models)
		}
		v.check(p+"duration", f.Duration, f.Duration >= 0, "must be ≥ 0")
		hasValue := s.has(p + "value")
		switch {
		case IsLinkFault(f.Kind):
			v.check(p+"target", f.Target, links[f.Target], linkRule)
			v.check(p+"direction", f.Direction, f.Direction == "" || f.Direction == DirBoth || f.Direction == DirUp || f.Direction == DirDown,
				"must be both (the default), up (host → switch) or down (switch → host)")
		case f.Kind == FaultSwitchReboot || f.Kind == FaultSwitchCrash:
			v.check(p+"target", f.Target, f.Target == "" || f.Target == SwitchName, `must be "sw" (or absent)`)
		case f.Kind == FaultNodeCrash:
			v.check(p+"target", f.Target, links[f.Target], "must name a host (h0..) or parameter server (ps0..)")
		default:
			v.fail(p+"kind", f.Kind, "must be one of "+strings.Join(FaultKinds, ", "))
		}
		if !IsLinkFault(f.Kind) && f.Direction != "" {
			v.fail(p+"direction", f.Direction, f.Kind+" is not a link fault: it has no direction")
		}
		v.check(p+"lose_state", f.LoseState, !f.LoseState || f.Kind == FaultNodeCrash, "only a node_crash loses state (a switch_reboot always does)")
		switch f.Kind {
		case FaultLinkUp, FaultSwitchCrash:
			v.check(p+"duration", f.Duration, f.Duration == 0, f.Kind+" takes no duration")
		case FaultLossBurst, FaultDupBurst, FaultReorderBurst, FaultCorrupt, FaultCorruptUndetected:
			v.check(p+"duration", f.Duration, f.Duration > 0, f.Kind+" needs a duration > 0")
			v.check(p+"value", f.Value, f.Value > 0 && f.Value <= 1, f.Kind+" needs a probability in (0, 1]")
			hasValue = false
		case FaultDelaySpike, FaultJitterBurst:
			v.check(p+"duration", f.Duration, f.Duration > 0, f.Kind+" needs a duration > 0")
			v.check(p+"value", f.Value, f.Value > 0 && f.Value <= 1e6, f.Kind+" needs the extra delay in µs, in (0, 1e6]")
			hasValue = false
		case FaultRateChange:
			v.check(p+"value", f.Value, f.Value > 0 && f.Value <= MaxLinkGbps, fmt.Sprintf("rate_change needs the new rate in Gb/s (before rate_scale), in (0, %d]", MaxLinkGbps))
			if f.Value > 0 && s.Scaling.RateScale > 0 {
				v.check(p+"value", f.Value, f.Value*1e9*s.Scaling.RateScale >= MinLinkBitsPerSecond,
					fmt.Sprintf("× rate_scale makes the link slower than %d b/s", MinLinkBitsPerSecond))
			}
			hasValue = false
		case FaultMTUChange:
			v.check(p+"value", f.Value, f.Value == math.Trunc(f.Value) && f.Value >= emu.MinMTU && f.Value <= MaxMTU,
				fmt.Sprintf("mtu_change needs the new MTU in bytes, a whole number in [%d, %d]", emu.MinMTU, MaxMTU))
			hasValue = false
		}
		if hasValue && slices.Contains(FaultKinds, f.Kind) {
			v.fail(p+"value", f.Value, f.Kind+" takes no value")
		}
	}
	type span struct{ up, down int }
	seen := map[string]span{}
	for i, im := range s.Impairments {
		p := fmt.Sprintf("impairments[%d].", i)
		dirOK := v.check(p+"direction", im.Direction, im.Direction == "" || im.Direction == DirBoth || im.Direction == DirUp || im.Direction == DirDown,
			"must be both (the default), up (host → switch) or down (switch → host)")
		if v.check(p+"link", im.Link, im.Link == "all" || links[im.Link], linkRule+`, or "all"`) && dirOK {
			sp, ok := seen[im.Link]
			if !ok {
				sp = span{-1, -1}
			}
			for _, d := range []struct {
				on  bool
				at  *int
				dir string
			}{{im.Direction != DirDown, &sp.up, DirUp}, {im.Direction != DirUp, &sp.down, DirDown}} {
				if !d.on {
					continue
				}
				if *d.at >= 0 {
					v.fail(p+"link", im.Link, fmt.Sprintf("duplicate: impairments[%d] already sets this link's %s direction", *d.at, d.dir))
					break
				}
				*d.at = i
			}
			seen[im.Link] = sp
		}
		v.validateImpairment(p, im)
	}
	for _, name := range sortedKeys(s.Presets) {
		im := s.Presets[name]
		v.validateImpairment("presets."+name+".", im)
	}
}

// validateImpairment checks the effects of an impairment or preset at
// path p (ending in ".").
func (v *validator) validateImpairment(p string, im LinkImpairment) {
	for _, pr := range []struct {
		f string
		x float64
	}{{"loss", im.Loss}, {"duplicate", im.Duplicate}, {"reorder", im.Reorder}, {"corrupt", im.Corrupt},
		{"corrupt_undetected", im.CorruptUndetected}} {
		v.check(p+pr.f, pr.x, pr.x >= 0 && pr.x <= 1, "must be a probability in [0, 1]")
	}
	v.check(p+"reorder_delay", im.ReorderDelay, im.ReorderDelay >= 0 && im.ReorderDelay.D() <= time.Second, "must be in [0, 1s]")
	v.check(p+"jitter", im.Jitter, im.Jitter >= 0 && im.Jitter.D() <= time.Second, "must be in [0, 1s]")
	if b := im.BurstLoss; b != nil {
		q := p + "burst_loss."
		byRate := v.s.has(q+"rate") || v.s.has(q+"mean_burst") || b.Rate > 0 || b.MeanBurst > 0
		byProb := v.s.has(q+"p_good_to_bad") || v.s.has(q+"p_bad_to_good") || b.PGoodToBad > 0 || b.PBadToGood > 0
		switch {
		case byRate && byProb:
			v.fail(q+"rate", b.Rate, "give rate and mean_burst, or p_good_to_bad and p_bad_to_good, not both")
		case byRate:
			v.check(q+"rate", b.Rate, b.Rate > 0 && b.Rate < 1, "must be a loss rate in (0, 1)")
			v.check(q+"mean_burst", b.MeanBurst, b.MeanBurst >= 1 && b.MeanBurst <= 1e6, "must be the mean burst length in packets, in [1, 1e6]")
			v.check(q+"loss_good", b.LossGood, b.LossGood == 0, "with rate and mean_burst the good state loses nothing")
			v.check(q+"loss_bad", b.LossBad, b.LossBad == 1, "with rate and mean_burst the bad state loses everything")
			if b.Rate > 0 && b.Rate < 1 && b.MeanBurst >= 1 {
				v.check(q+"rate", b.Rate, b.Rate/(1-b.Rate)/b.MeanBurst <= 1, "with this mean_burst no good→bad probability gives this rate (rate/(1−rate)/mean_burst must be ≤ 1)")
			}
		case byProb:
			v.check(q+"p_good_to_bad", b.PGoodToBad, b.PGoodToBad > 0 && b.PGoodToBad <= 1, "must be a probability in (0, 1]")
			v.check(q+"p_bad_to_good", b.PBadToGood, b.PBadToGood > 0 && b.PBadToGood <= 1, "must be a probability in (0, 1]")
			v.check(q+"loss_good", b.LossGood, b.LossGood >= 0 && b.LossGood <= 1, "must be a probability in [0, 1]")
			v.check(q+"loss_bad", b.LossBad, b.LossBad >= 0 && b.LossBad <= 1, "must be a probability in [0, 1]")
		default:
			v.fail(p+"burst_loss", "{}", "give rate and mean_burst, or p_good_to_bad and p_bad_to_good")
		}
	}
	if fl := im.Flap; fl != nil {
		v.check(p+"flap.mean_up", fl.MeanUp, fl.MeanUp.D() >= time.Microsecond && fl.MeanUp < v.s.TimeLimit, "must be in [1µs, time_limit)")
		v.check(p+"flap.mean_down", fl.MeanDown, fl.MeanDown.D() >= time.Microsecond && fl.MeanDown < v.s.TimeLimit, "must be in [1µs, time_limit)")
	}
}

// validateWhen checks a fault's trigger at path p and records its form.
func (v *validator) validateWhen(p string, w *When, jobs map[string]int, models Models) {
	var forms []string
	for _, f := range []string{WhenFirstPacket, WhenIteration, WhenAllReduce, WhenRunFraction} {
		if v.s.has(p+"."+f) || (f == WhenFirstPacket && w.FirstPacket) || (f == WhenRunFraction && w.RunFraction != 0) {
			forms = append(forms, f)
		}
	}
	if v.s.has(p+".fraction") && !slices.Contains(forms, WhenAllReduce) {
		v.fail(p+".fraction", w.Fraction, "only with allreduce")
	}
	if len(forms) != 1 {
		v.fail(p, strings.Join(forms, ", "), "must give exactly one of first_packet, iteration, allreduce (with fraction) or run_fraction")
		return
	}
	w.form = forms[0]
	if w.form == WhenRunFraction {
		v.check(p+".job", w.Job, w.Job == "", "run_fraction counts every job's all-reduces: no job")
		v.check(p+".run_fraction", w.RunFraction, w.RunFraction > 0 && w.RunFraction <= 1, "must be in (0, 1]")
		return
	}
	j, ok := jobs[w.Job]
	if !v.check(p+".job", w.Job, ok, "must name a job") {
		return
	}
	switch w.form {
	case WhenFirstPacket:
		v.check(p+".first_packet", w.FirstPacket, w.FirstPacket, "must be true (or absent)")
	case WhenIteration:
		n := v.s.Jobs[j].Iterations
		v.check(p+".iteration", w.Iteration, w.Iteration >= 0 && w.Iteration < n, fmt.Sprintf("must be an iteration of job %s: 0 … %d", w.Job, n-1))
	case WhenAllReduce:
		job := v.s.Jobs[j]
		n := job.Iterations
		if m, ok := models[job.Model]; ok && job.BucketMiB > 0 && job.BucketMiB <= MaxBucketMiB {
			_, bs := m.Buckets(int64(math.Round(job.BucketMiB * (1 << 20))))
			n *= max(len(bs), 1)
		}
		v.check(p+".allreduce", w.AllReduce, w.AllReduce >= 0 && w.AllReduce < n, fmt.Sprintf("must be an all-reduce of job %s: 0 … %d (iterations × buckets)", w.Job, n-1))
		v.check(p+".fraction", w.Fraction, w.Fraction >= 0 && w.Fraction <= 1, "must be in [0, 1]")
	}
}
