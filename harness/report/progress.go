package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Progress reports how far a run is. It only ever writes to its writer (a
// terminal's stderr), never changes what a run computes, and reads no clock:
// the runner reports virtual time.
type Progress interface {
	// Update reports virtual time now out of an expected total (total ≤ 0:
	// unknown).
	Update(now, total time.Duration)
	// Done ends the report (a final newline).
	Done()
}

// NewProgress returns a progress bar on w labelled label when enabled, or a
// Progress that does nothing. Pass enabled = IsTerminal(os.Stderr) ||
// a --progress flag.
func NewProgress(w io.Writer, label string, enabled bool) Progress {
	if !enabled || w == nil {
		return nopProgress{}
	}
	return &bar{w: w, label: label, last: -1}
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

type nopProgress struct{}

func (nopProgress) Update(time.Duration, time.Duration) {}
func (nopProgress) Done()                               {}

// bar redraws at most once per percent (or per 1/100 of a second of
// virtual time when the total is unknown), so it costs nothing on the
// packet path.
type bar struct {
	w     io.Writer
	label string
	last  int64
	drawn bool
}

const barWidth = 30

func (b *bar) Update(now, total time.Duration) {
	var step int64
	if total > 0 {
		step = int64(min(now, total) * 100 / total)
	} else {
		step = int64(now / (10 * time.Millisecond))
	}
	if step == b.last {
		return
	}
	b.last = step
	b.drawn = true
	if total <= 0 {
		fmt.Fprintf(b.w, "\r%s  virtual %v ", b.label, now.Truncate(time.Millisecond))
		return
	}
	fill := int(step) * barWidth / 100
	fmt.Fprintf(b.w, "\r%s [%s%s] %3d%%  virtual %v / ≥%v ", b.label, strings.Repeat("=", fill),
		strings.Repeat(" ", barWidth-fill), step, now.Truncate(time.Millisecond), total.Truncate(time.Millisecond))
}

func (b *bar) Done() {
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}

// MultiProgress reports several runs that go on at once on one line:
// how many of them have ended, and each running one's percentage. Its
// methods may be called from any goroutine.
type MultiProgress struct {
	mu      sync.Mutex
	w       io.Writer
	total   int
	done    int
	running []*multiRun // in the order they started
	width   int         // of the last line drawn, to blank it out
	enabled bool
}

// NewMultiProgress returns a MultiProgress for total runs on w, drawing
// only when enabled (as NewProgress).
func NewMultiProgress(w io.Writer, total int, enabled bool) *MultiProgress {
	return &MultiProgress{w: w, total: total, enabled: enabled && w != nil}
}

// Run returns the Progress of one run labelled label, which has started.
func (m *MultiProgress) Run(label string) Progress {
	r := &multiRun{m: m, label: label, pct: -1}
	m.mu.Lock()
	m.running = append(m.running, r)
	m.drawLocked()
	m.mu.Unlock()
	return r
}

// Close ends the line.
func (m *MultiProgress) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.enabled && m.width > 0 {
		fmt.Fprintln(m.w)
		m.width = 0
	}
}

func (m *MultiProgress) drawLocked() {
	if !m.enabled {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\r%d/%d done", m.done, m.total)
	for _, r := range m.running {
		if r.pct < 0 {
			fmt.Fprintf(&b, " · %s", r.label)
		} else {
			fmt.Fprintf(&b, " · %s %d%%", r.label, r.pct)
		}
	}
	n := utf8.RuneCountInString(b.String()) - 1
	if pad := m.width - n; pad > 0 {
		b.WriteString(strings.Repeat(" ", pad))
	}
	m.width = n
	io.WriteString(m.w, b.String())
}

// multiRun is one run of a MultiProgress.
type multiRun struct {
	m     *MultiProgress
	label string
	pct   int // −1: no total known yet
}

func (r *multiRun) Update(now, total time.Duration) {
	if total <= 0 {
		return
	}
	pct := int(min(now, total) * 100 / total)
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if pct == r.pct {
		return
	}
	r.pct = pct
	r.m.drawLocked()
}

func (r *multiRun) Done() {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.running {
		if x == r {
			m.running = append(m.running[:i], m.running[i+1:]...)
			break
		}
	}
	m.done++
	m.drawLocked()
}
