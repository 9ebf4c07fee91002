package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
