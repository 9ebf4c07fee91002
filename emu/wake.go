package emu

import "time"

// waker wakes the real-time driver when the next event is due.
type waker interface {
	// Reset arms the waker to fire once after d, replacing any deadline.
	Reset(d time.Duration)
	// C fires when a deadline passes (possibly one since replaced: the
	// driver rechecks the event heap, so a stale wake-up is harmless).
	C() <-chan struct{}
	Close()
}

// goWaker is a Go timer. Go's timers sleep in the netpoller with a
// millisecond timeout, so a wait under 1 ms lasts about 1 ms; it is the
// waker under testing/synctest, whose fake clock only Go timers follow.
type goWaker struct {
	t *time.Timer
	c chan struct{}
}

func newGoWaker() *goWaker {
	w := &goWaker{c: make(chan struct{}, 1)}
	w.t = time.AfterFunc(time.Hour, func() {
		select {
		case w.c <- struct{}{}:
		default:
		}
	})
	w.t.Stop()
	return w
}

func (w *goWaker) Reset(d time.Duration) { w.t.Reset(d) }
func (w *goWaker) C() <-chan struct{}    { return w.c }
func (w *goWaker) Close()                { w.t.Stop() }
