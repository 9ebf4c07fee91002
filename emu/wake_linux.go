package emu

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdWaker is a timerfd read through the netpoller: the driver wakes within
// the kernel's timer slack (about 50 µs) of a deadline instead of the
// millisecond a Go timer takes for short waits.
type fdWaker struct {
	f    *os.File
	rc   syscall.RawConn
	c    chan struct{}
	spec unix.ItimerSpec
	arm  func(fd uintptr) // arms spec; built once, so Reset allocates nothing
}

func newPreciseWaker() (waker, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	w := &fdWaker{f: os.NewFile(uintptr(fd), "emu-timerfd"), c: make(chan struct{}, 1)}
	if w.rc, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, err
	}
	w.arm = func(fd uintptr) { unix.TimerfdSettime(int(fd), 0, &w.spec, nil) }
	go func() {
		var b [8]byte
		for {
			if _, err := w.f.Read(b[:]); err != nil {
				return // closed
			}
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}()
	return w, nil
}

func (w *fdWaker) Reset(d time.Duration) {
	w.spec = unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	w.rc.Control(w.arm)
}

func (w *fdWaker) C() <-chan struct{} { return w.c }
func (w *fdWaker) Close()             { w.f.Close() }
