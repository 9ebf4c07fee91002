package emu_test

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// churnNode arms, re-arms (earlier, later, to the same time) and stops a
// few timers at random, from Start and from each expiry, drawing from its
// own generator: what it does next depends only on which of its timers
// fired, and when.
type churnNode struct {
	id    int
	rng   *rand.Rand
	left  int // expiries it still reacts to
	fired *[]fired
}

type fired struct {
	at   time.Duration
	node int
	key  uint64
}

// churnKeys are the keys a churnNode arms: small ones, as most nodes use,
// and large ones (the switch's control-plane timers set the top bit).
var churnKeys = []uint64{0, 1, 2, 100, 1<<63 | 1}

// act draws one to three timer operations at time now, the last of them
// an arming.
func (c *churnNode) act(now time.Duration, set func(at time.Duration, key uint64), stop func(key uint64)) {
	if c.left <= 0 {
		return
	}
	for k := c.rng.IntN(3) + 1; k > 0; k-- {
		key := churnKeys[c.rng.IntN(len(churnKeys))]
		switch r := c.rng.IntN(10); {
		case r == 0 && k > 1: // the last operation arms, so the node goes on
			stop(key)
		case r == 1:
			set(now-time.Duration(c.rng.IntN(5)), key) // in the past: now
		default:
			set(now+time.Duration(c.rng.IntN(40)), key)
		}
	}
}

func (c *churnNode) Start(env *emu.Env)                   { c.act(env.Now(), env.SetTimer, env.StopTimer) }
func (c *churnNode) Receive(*emu.Env, int, []*emu.Packet) {}
func (c *churnNode) Timer(env *emu.Env, key uint64) {
	*c.fired = append(*c.fired, fired{env.Now(), c.id, key})
	c.left--
	c.act(env.Now(), env.SetTimer, env.StopTimer)
}

// eagerTimers runs the same nodes as the scheduler did before timers were
// re-armed in place: every arming queues an event of its own, and a stale
// one fires as nothing. It returns the expiries and the time of the last
// event, stale or not.
func eagerTimers(nodes []*churnNode) ([]fired, time.Duration) {
	type ev struct {
		at        time.Duration
		seq       uint64
		node, gen int
		key       uint64
	}
	var q []ev
	var seq uint64
	armed := make([]map[uint64]int, len(nodes))
	gen := 0
	var now time.Duration
	var out []fired
	for i := range armed {
		armed[i] = map[uint64]int{}
	}
	env := func(i int) (func(time.Duration, uint64), func(uint64)) {
		return func(at time.Duration, key uint64) {
				at = max(at, now)
				seq++
				gen++
				armed[i][key] = gen
				q = append(q, ev{at, seq, i, gen, key})
			}, func(key uint64) {
				delete(armed[i], key)
			}
	}
	for i, c := range nodes {
		set, stop := env(i)
		c.act(0, set, stop)
	}
	for len(q) > 0 {
		m := slices.MinFunc(q, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
		q = slices.DeleteFunc(q, func(e ev) bool { return e.seq == m.seq })
		now = m.at
		if armed[m.node][m.key] != m.gen {
			continue
		}
		delete(armed[m.node], m.key)
		c := nodes[m.node]
		out = append(out, fired{now, m.node, m.key})
		c.left--
		set, stop := env(m.node)
		c.act(now, set, stop)
	}
	return out, now
}

// TestTimerChurn: nodes that re-arm and stop their timers at random see
// them expire exactly as when every arming queued an event (the same
// expiries, times and order, equal times included), and the run ends at
// the same time.
func TestTimerChurn(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		mk := func(log *[]fired) []*churnNode {
			var ns []*churnNode
			for i := range 3 {
				ns = append(ns, &churnNode{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), left: 300, fired: log})
			}
			return ns
		}
		var got []fired
		n := emu.NewNetwork(emu.Config{})
		for i, c := range mk(&got) {
			must(t, n.AddNode(string(rune('a'+i)), 1, c))
		}
		end := run(t, n)
		want, wantEnd := eagerTimers(mk(new([]fired)))
		if len(want) < 600 {
			t.Fatalf("seed %d: only %d expiries in the reference", seed, len(want))
		}
		if !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("seed %d: expiry %d = %+v, want %+v (%d and %d in all)", seed, i, got[i], want[i], len(got), len(want))
				}
			}
			t.Fatalf("seed %d: %d expiries, want %d", seed, len(got), len(want))
		}
		if end != wantEnd {
			t.Fatalf("seed %d: run ended at %v, want %v", seed, end, wantEnd)
		}
	}
}

// rearmNode re-arms one timer later on every call, as a retransmission
// timer is on every packet sent.
type rearmNode struct{ fires []time.Duration }

func (r *rearmNode) Start(env *emu.Env) {
	for i := range 1000 {
		env.SetTimer(time.Duration(100+i), 1)
	}
}
func (r *rearmNode) Receive(*emu.Env, int, []*emu.Packet) {}
func (r *rearmNode) Timer(env *emu.Env, key uint64)       { r.fires = append(r.fires, env.Now()) }

// TestTimerRearmOneEvent: a timer re-armed later a thousand times holds one
// event in the queue, and fires once, at its last expiry.
func TestTimerRearmOneEvent(t *testing.T) {
	n := emu.NewNetwork(emu.Config{})
	r := &rearmNode{}
	must(t, n.AddNode("r", 1, r))
	if _, err := n.RunUntil(0); err != nil {
		t.Fatal(err)
	}
	if p := n.Pending(); p != 1 {
		t.Fatalf("%d events queued for one timer", p)
	}
	end := run(t, n)
	if !reflect.DeepEqual(r.fires, []time.Duration{1099}) || end != 1099 {
		t.Fatalf("fired at %v, run ended at %v; want once at 1.099µs", r.fires, end)
	}
}

// earlyNode arms a timer, and arms another, re-arms it later and stops
// it.
type earlyNode struct{ fires []time.Duration }

func (r *earlyNode) Start(env *emu.Env) {
	env.SetTimer(100, 1)
	env.SetTimer(200, 2)
	env.SetTimer(800, 2)
	env.StopTimer(2)
}
func (r *earlyNode) Receive(*emu.Env, int, []*emu.Packet) {}
func (r *earlyNode) Timer(env *emu.Env, key uint64)       { r.fires = append(r.fires, env.Now()) }

// TestTimerStoppedKeepsRun: a run lasts until the latest expiry any timer
// was armed for, stopped or re-armed since, as when every arming queued
// an event; RunUntil before then stops at its deadline.
func TestTimerStoppedKeepsRun(t *testing.T) {
	n := emu.NewNetwork(emu.Config{})
	r := &earlyNode{}
	must(t, n.AddNode("r", 1, r))
	if now, err := n.RunUntil(300); err != nil || now != 300 {
		t.Fatalf("RunUntil(300) = %v, %v; want 300ns", now, err)
	}
	if end := run(t, n); end != 800 || !reflect.DeepEqual(r.fires, []time.Duration{100}) {
		t.Fatalf("fired at %v, run ended at %v; want once at 100ns, the end at 800ns", r.fires, end)
	}
}
