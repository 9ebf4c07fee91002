package faultctl

import (
	"fmt"
	"math"
	"time"

	"github.com/inabox/inabox/host"
)

// Trigger is an event of a worker's progress that POST /progress/wait
// waits for; one of its forms is given. All-reduces count from 0.
type Trigger struct {
	// Begun: all-reduce K has begun (its first packet left).
	Begun *int `json:"begun,omitempty"`
	// AllReduce: all-reduce K holds the results of Fraction of its chunks
	// (Fraction 0: it has begun; 1: it has ended).
	AllReduce *int    `json:"allreduce,omitempty"`
	Fraction  float64 `json:"fraction,omitempty"`
	// Finished: N all-reduces have ended.
	Finished *int `json:"finished,omitempty"`
}

func (t Trigger) check() error {
	n := 0
	for _, p := range []*int{t.Begun, t.AllReduce, t.Finished} {
		if p != nil {
			n++
			if *p < 0 {
				return &FieldError{Where: "trigger", Field: "all-reduce", Value: *p, Why: "must be ≥ 0"}
			}
		}
	}
	if n != 1 {
		return &FieldError{Where: "trigger", Field: "form", Value: n, Why: "give one of begun, allreduce (with fraction) or finished"}
	}
	if math.IsNaN(t.Fraction) || t.Fraction < 0 || t.Fraction > 1 || (t.Fraction != 0 && t.AllReduce == nil) {
		return &FieldError{Where: "trigger", Field: "fraction", Value: t.Fraction, Why: "must be in [0, 1], with allreduce"}
	}
	return nil
}

func (t Trigger) String() string {
	switch {
	case t.Begun != nil:
		return fmt.Sprintf("all-reduce %d begun", *t.Begun)
	case t.AllReduce != nil:
		return fmt.Sprintf("all-reduce %d at %g of its chunks", *t.AllReduce, t.Fraction)
	case t.Finished != nil:
		return fmt.Sprintf("%d all-reduces finished", *t.Finished)
	}
	return "no trigger"
}

// Event is a trigger that happened: when, on the worker's run clock (the
// run's time since time 0), and the worker's progress then.
type Event struct {
	At       Duration `json:"at"`
	Finished int      `json:"finished"`
}

// Watcher follows a worker's all-reduce steps (host.Core.Observe) and
// wakes those waiting for a Trigger. Step and Wait run on the run
// goroutine.
type Watcher struct {
	clock    Clock
	began    map[int]time.Duration // when each all-reduce began
	ended    map[int]time.Duration
	stored   map[int]uint32 // chunk results stored, per all-reduce in progress
	chunks   map[int]uint32 // chunks of each all-reduce begun
	finished int
	waits    []*waiting
}

type waiting struct {
	t  Trigger
	ch chan Event // buffered: Step never blocks
}

// NewWatcher returns a watcher on clock (the worker's run clock).
func NewWatcher(clock Clock) *Watcher {
	return &Watcher{clock: clock, began: map[int]time.Duration{}, ended: map[int]time.Duration{}, stored: map[int]uint32{},
		chunks: map[int]uint32{}}
}

// Restored records the all-reduces a worker restored from its checkpoint
// (their reports) as finished at the times they did.
func (w *Watcher) Restored(reps []host.Report) {
	for k, r := range reps {
		w.began[k], w.ended[k] = r.Start, r.End
	}
	w.finished = len(reps)
}

// Step records one step and wakes the waits it satisfies.
func (w *Watcher) Step(st host.Step) {
	now := w.clock.Now()
	switch st.Kind {
	case host.StepBegin:
		w.began[st.Index], w.chunks[st.Index] = now, st.Chunks
	case host.StepChunk:
		w.stored[st.Index]++
	case host.StepEnd:
		w.ended[st.Index] = now
		delete(w.stored, st.Index)
		w.finished++
	}
	w.wake()
}

// Wait returns the channel that gets the event t (at once if it has
// happened).
func (w *Watcher) Wait(t Trigger) (<-chan Event, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	wt := &waiting{t: t, ch: make(chan Event, 1)}
	w.waits = append(w.waits, wt)
	w.wake()
	return wt.ch, nil
}

// wake sends its event to every wait whose trigger holds.
func (w *Watcher) wake() {
	kept := w.waits[:0]
	for _, wt := range w.waits {
		if at, ok := w.holds(wt.t); ok {
			wt.ch <- Event{At: Duration(at), Finished: w.finished}
			continue
		}
		kept = append(kept, wt)
	}
	clear(w.waits[len(kept):])
	w.waits = kept
}

// holds reports whether t holds, and since when.
func (w *Watcher) holds(t Trigger) (time.Duration, bool) {
	now := w.clock.Now()
	switch {
	case t.Begun != nil:
		at, ok := w.began[*t.Begun]
		return at, ok
	case t.Finished != nil:
		if w.finished >= *t.Finished {
			if at, ok := w.ended[*t.Finished-1]; ok {
				return at, true
			}
			return now, true
		}
	case t.AllReduce != nil:
		k := *t.AllReduce
		if at, ok := w.ended[k]; ok {
			return at, true
		}
		at, begun := w.began[k]
		if !begun {
			return 0, false
		}
		if t.Fraction == 0 {
			return at, true
		}
		if w.stored[k] >= max(uint32(math.Ceil(t.Fraction*float64(w.chunks[k]))), 1) {
			return now, true
		}
	}
	return 0, false
}
