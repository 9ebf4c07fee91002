package swctl

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// TestControlAPI installs a job over a unix socket, switches its policy and
// reads the counters back.
func TestControlAPI(t *testing.T) {
	s, err := sw.New(sw.Config{Slots: 64, Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, c := serve(t, &Server{S: s, Ports: []int{0, 1}, Runtime: func() any { return map[string]int{"x": 1} }})
	cfg := Config{
		Pools:    []Pool{{ID: 1, Base: 0, Slots: 64, Stride: 1}},
		Jobs:     []sw.JobSpec{{ID: 7, Mask: 3, Group: 7, PSPort: 2, PoolID: 1}},
		Workers:  []sw.WorkerEntry{{Port: 0, QP: 0x10, Job: 7, Worker: 0, RID: 1}, {Port: 1, QP: 0x11, Job: 7, Worker: 1, RID: 2}},
		Rewrites: []Rewrite{{RID: 1, SrcMAC: "02:00:00:00:00:fe", DstMAC: "02:00:00:00:00:01", SrcIP: "10.0.0.254", DstIP: "10.0.0.1", DstQP: 0x10}},
		Groups:   []Group{{ID: 7, Members: []sw.McastMember{{RID: 1, Port: 0}, {RID: 2, Port: 1}}}},
	}
	if err := c.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, 7, sw.StageHashed); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, 8, sw.StageHashed); err == nil || !strings.Contains(err.Error(), "no job 8") {
		t.Fatalf("policy of a missing job: %v", err)
	}
	if err := c.SetPolicy(ctx, 7, 99); err == nil {
		t.Fatal("unknown policy accepted")
	}
	bad := cfg
	bad.Rewrites = []Rewrite{{RID: 1, SrcMAC: "nonsense"}}
	if err := c.Configure(ctx, bad); err == nil || !strings.Contains(err.Error(), "bad MAC") {
		t.Fatalf("bad MAC: %v", err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ID != 7 || len(st.Ports) != 2 || string(st.Runtime) != `{"x":1}` {
		t.Fatalf("stats %+v", st)
	}
	if _, err := Listen("tcp:0.0.0.0:0"); err == nil {
		t.Fatal("non-loopback control address accepted")
	}
}

// TestRegister: POST /register reaches the switch's scheduler (here a
// DynaINA control plane, called directly as a switch without a running
// node may be); a bad profile is refused with the scheduler's error, and a
// switch without a scheduler answers 404.
func TestRegister(t *testing.T) {
	s, err := sw.New(sw.Config{Slots: 64, Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPool(1, 0, 64, 1); err != nil {
		t.Fatal(err)
	}
	f, err := sw.NewFreeINA(s, sw.FreeINAConfig{PoolID: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sw.NewDynaINAControl(f, dynaina.Config{RTT: 10 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, c := serve(t, &Server{S: s, Register: func(r Registration) error { return d.Register(0, r.Profile(), r.AllReduces) }})
	if err := c.Register(ctx, Registration{Job: 3, Workers: 2, GradientBytes: 1 << 20, Compute: time.Millisecond, AllReduces: 4}); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Registered != 1 || d.JobPool(3) < 0 {
		t.Fatalf("job 3 not registered: %+v, pool %d", st, d.JobPool(3))
	}
	if err := c.Register(ctx, Registration{Job: 4, Workers: 0, GradientBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "Workers") {
		t.Fatalf("bad profile: %v", err)
	}
	addr2 := "unix:" + filepath.Join(t.TempDir(), "c2.sock")
	ln2, err := Listen(addr2)
	if err != nil {
		t.Fatal(err)
	}
	hs2 := &http.Server{Handler: (&Server{S: s}).Handler()}
	go hs2.Serve(ln2)
	defer hs2.Close()
	c2 := NewClient(addr2)
	if err := c2.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.Register(ctx, Registration{Job: 5, Workers: 2, GradientBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("switch without a scheduler: %v", err)
	}
}

// serve serves srv on a unix socket until the test ends and returns a
// client that found it healthy, and a context bounding the test's calls.
func serve(t *testing.T, srv *Server) (context.Context, *Client) {
	t.Helper()
	addr := "unix:" + filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c := NewClient(addr)
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}
