package swctl

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sw "github.com/inabox/inabox/switch"
)

// TestControlAPI installs a job over a unix socket, switches its policy and
// reads the counters back.
func TestControlAPI(t *testing.T) {
	s, err := sw.New(sw.Config{Slots: 64, Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix:" + filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{S: s, Ports: []int{0, 1}, Runtime: func() any { return map[string]int{"x": 1} }}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(addr)
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
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
