package emu

import (
	"context"
	"testing"
	"time"
)

// ticker is a node that sets a timer every Step, N times.
type ticker struct {
	Step time.Duration
	N, n int
}

func (t *ticker) Start(env *Env)               { env.SetTimer(env.Now()+t.Step, 1) }
func (t *ticker) Receive(*Env, int, []*Packet) {}
func (t *ticker) Timer(env *Env, key uint64) {
	if t.n++; t.n < t.N {
		env.SetTimer(env.Now()+t.Step, 1)
	}
}

// BenchmarkRealtimeWake measures how late the real-time driver runs events
// 200 µs apart with each waker: a Go timer (waits under 1 ms last ~1 ms),
// the goroutine driver's timerfd and the polled driver's epoll_pwait2. Reported: the largest and the
// mean lateness per event.
func BenchmarkRealtimeWake(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"go-timer", Config{}},
		{"timerfd", Config{PreciseWake: true, GoroutinePorts: true}},
		{"polled", Config{PreciseWake: true}}, // epoll_pwait2 and a spin under SpinWait
	} {
		b.Run(c.name, func(b *testing.B) {
			var maxLate time.Duration
			var late, events uint64
			for i := 0; i < b.N; i++ {
				cfg := c.cfg
				cfg.Seed = 1
				n := NewNetwork(cfg)
				tk := &ticker{Step: 200 * time.Microsecond, N: 100}
				if err := n.AddNode("t", 1, tk); err != nil {
					b.Fatal(err)
				}
				st, err := n.RunRealtime(context.Background(), time.Duration(tk.N+1)*tk.Step)
				if err != nil {
					b.Fatal(err)
				}
				maxLate = max(maxLate, st.MaxLate)
				late += st.Late
				events += st.Events
			}
			b.ReportMetric(float64(maxLate.Microseconds()), "max-late-µs")
			b.ReportMetric(float64(late)/float64(events), "late>100µs/event")
		})
	}
}

// TestPreciseWakeRuns: a real-time run with the timerfd waker fires every
// event, in order (the timing itself is the benchmark's business).
func TestPreciseWakeRuns(t *testing.T) {
	n := NewNetwork(Config{Seed: 1, PreciseWake: true})
	tk := &ticker{Step: 100 * time.Microsecond, N: 50}
	if err := n.AddNode("t", 1, tk); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.RunRealtime(ctx, time.Duration(tk.N+1)*tk.Step); err != nil {
		t.Fatal(err)
	}
	if tk.n != tk.N {
		t.Fatalf("%d of %d timers fired", tk.n, tk.N)
	}
}

// Re-arming the timerfd waker allocates nothing (the driver re-arms it on
// every loop turn).
func TestPreciseWakeResetAllocs(t *testing.T) {
	w, err := newPreciseWaker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n := testing.AllocsPerRun(100, func() { w.Reset(time.Hour) }); n != 0 {
		t.Fatalf("Reset allocates %v times", n)
	}
}
