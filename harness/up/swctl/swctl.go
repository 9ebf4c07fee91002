// Package swctl is the control API of the inaswitch process: JSON over HTTP
// on a unix socket (or loopback TCP). It installs pools, jobs, workers,
// egress rewrites and multicast groups, switches a job's allocation policy,
// and reads the switch's counters. The same Config can be applied in-process
// (Apply), so a scenario configures a switch identically under virtual time
// and in a process.
//
// Endpoints (all JSON):
//
//	GET  /healthz                 200 "ok" once the switch runs
//	POST /config    Config        install everything in it (in order: pools, jobs, workers, rewrites, groups)
//	POST /policy    PolicyChange  set a job's allocation policy
//	POST /register  Registration  register a job with the switch's scheduler (DynaINA; 404 without one)
//	GET  /stats     -> Stats      switch, per-job and per-port counters (+ the runtime's, if provided)
package swctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/up/internal/jsonhttp"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// Pool is a memory pool (Switch.SetPool).
type Pool struct {
	ID     uint16 `json:"id" yaml:"id"`
	Base   int    `json:"base" yaml:"base"`
	Slots  int    `json:"slots" yaml:"slots"`
	Stride int    `json:"stride" yaml:"stride"`
}

// Rewrite is an egress rewrite for a replication id (Switch.SetRewrite).
type Rewrite struct {
	RID    uint16 `json:"rid" yaml:"rid"`
	SrcMAC string `json:"src_mac" yaml:"src_mac"`
	DstMAC string `json:"dst_mac" yaml:"dst_mac"`
	SrcIP  string `json:"src_ip" yaml:"src_ip"`
	DstIP  string `json:"dst_ip" yaml:"dst_ip"`
	DstQP  uint32 `json:"dst_qp" yaml:"dst_qp"`
}

// Group is a multicast group (Switch.AddMcastGroup).
type Group struct {
	ID      uint16           `json:"id" yaml:"id"`
	Members []sw.McastMember `json:"members" yaml:"members"`
}

// Config is a batch of control-plane entries.
type Config struct {
	Pools    []Pool           `json:"pools,omitempty" yaml:"pools"`
	Jobs     []sw.JobSpec     `json:"jobs,omitempty" yaml:"jobs"`
	Workers  []sw.WorkerEntry `json:"workers,omitempty" yaml:"workers"`
	Rewrites []Rewrite        `json:"rewrites,omitempty" yaml:"rewrites"`
	Groups   []Group          `json:"groups,omitempty" yaml:"groups"`
}

// PolicyChange sets job Job's PolicyID (0 static, 1 hashed, 2 preemptive,
// ≥16 registered).
type PolicyChange struct {
	Job    uint16 `json:"job"`
	Policy int    `json:"policy"`
}

// Registration is a job's registration with the switch's scheduler (the
// cluster manager's message at the job's arrival; sw.DynaINAControl's
// Register): its profile and how many all-reduces it performs (0: it
// never leaves).
type Registration struct {
	Job           uint16        `json:"job"`
	Workers       int           `json:"workers"`
	GradientBytes int64         `json:"gradient_bytes"`
	Compute       time.Duration `json:"compute_ns"`
	AllReduces    int           `json:"all_reduces"`
}

// Profile returns the registration's job profile.
func (r Registration) Profile() dynaina.JobProfile {
	return dynaina.JobProfile{ID: r.Job, Workers: r.Workers, GradientBytes: r.GradientBytes, Compute: r.Compute}
}

// PolicyByName maps the built-in policy names to their ids.
var PolicyByName = map[string]int{"static": sw.StageStatic, "hashed": sw.StageHashed, "preemptive": sw.StagePreemptive}

func parseMAC(s string) ([6]byte, error) {
	var m [6]byte
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return m, fmt.Errorf("swctl: bad MAC %q", s)
	}
	copy(m[:], hw)
	return m, nil
}

// FormatMAC formats a MAC for Rewrite.
func FormatMAC(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// Apply installs c on s.
func Apply(s *sw.Switch, c Config) error {
	for _, p := range c.Pools {
		if err := s.SetPool(p.ID, p.Base, p.Slots, p.Stride); err != nil {
			return fmt.Errorf("pool %d: %w", p.ID, err)
		}
	}
	for _, j := range c.Jobs {
		if err := s.SetJob(j); err != nil {
			return fmt.Errorf("job %d: %w", j.ID, err)
		}
	}
	for _, w := range c.Workers {
		if err := s.AddWorker(w); err != nil {
			return fmt.Errorf("worker port %d qp %#x: %w", w.Port, w.QP, err)
		}
	}
	for _, r := range c.Rewrites {
		var rw sw.Rewrite
		var err error
		if rw.SrcMAC, err = parseMAC(r.SrcMAC); err != nil {
			return err
		}
		if rw.DstMAC, err = parseMAC(r.DstMAC); err != nil {
			return err
		}
		if rw.SrcIP, err = netip.ParseAddr(r.SrcIP); err != nil {
			return fmt.Errorf("rewrite %d: %w", r.RID, err)
		}
		if rw.DstIP, err = netip.ParseAddr(r.DstIP); err != nil {
			return fmt.Errorf("rewrite %d: %w", r.RID, err)
		}
		rw.DstQP = r.DstQP
		s.SetRewrite(r.RID, rw)
	}
	for _, g := range c.Groups {
		if err := s.AddMcastGroup(g.ID, g.Members...); err != nil {
			return fmt.Errorf("group %d: %w", g.ID, err)
		}
	}
	return nil
}

// JobCounters are one job's counters.
type JobCounters struct {
	ID uint16 `json:"id"`
	sw.JobStats
}

// PortCounters are one port's counters.
type PortCounters struct {
	Port int `json:"port"`
	sw.PortStats
}

// Stats is the answer of GET /stats.
type Stats struct {
	Switch sw.Stats          `json:"switch"`
	Reason map[string]uint64 `json:"by_reason"`
	Jobs   []JobCounters     `json:"jobs"`
	Ports  []PortCounters    `json:"ports"`
	// Runtime holds the process runtime's counters (node adapter, links,
	// backends), if the server was given a source for them.
	Runtime json.RawMessage `json:"runtime,omitempty"`
}

// Server serves the control API for one switch.
type Server struct {
	S *sw.Switch
	// Ports are the ports whose counters /stats reports.
	Ports []int
	// Runtime, if set, returns extra counters for /stats.
	Runtime func() any
	// Register, if set, delivers a registration to the switch's
	// scheduler; nil: the switch has none (POST /register is 404).
	Register func(Registration) error

	jobs map[uint16]sw.JobSpec
}

// Handler returns the HTTP handler.
func (sv *Server) Handler() http.Handler {
	sv.jobs = map[uint16]sw.JobSpec{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /config", func(w http.ResponseWriter, r *http.Request) {
		var c Config
		if !decode(w, r, &c) {
			return
		}
		if err := Apply(sv.S, c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sv.S.Lock()
		for _, j := range c.Jobs {
			sv.jobs[j.ID] = j
		}
		sv.S.Unlock()
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("POST /policy", func(w http.ResponseWriter, r *http.Request) {
		var pc PolicyChange
		if !decode(w, r, &pc) {
			return
		}
		sv.S.Lock()
		js, ok := sv.jobs[pc.Job]
		sv.S.Unlock()
		if !ok {
			http.Error(w, fmt.Sprintf("no job %d", pc.Job), http.StatusNotFound)
			return
		}
		js.PolicyID = pc.Policy
		if err := sv.S.SetJob(js); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sv.S.Lock()
		sv.jobs[pc.Job] = js
		sv.S.Unlock()
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		if sv.Register == nil {
			http.Error(w, "the switch has no scheduler to register with", http.StatusNotFound)
			return
		}
		var reg Registration
		if !decode(w, r, &reg) {
			return
		}
		if err := sv.Register(reg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st := sv.Snapshot()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	return mux
}

// Snapshot returns the counters /stats reports.
func (sv *Server) Snapshot() Stats {
	st := Stats{Switch: sv.S.Stats(), Reason: map[string]uint64{}}
	for r, v := range st.Switch.ByReason {
		if v != 0 {
			st.Reason[sw.Reason(r).String()] = v
		}
	}
	sv.S.Lock()
	ids := make([]uint16, 0, len(sv.jobs))
	for id := range sv.jobs {
		ids = append(ids, id)
	}
	sv.S.Unlock()
	for _, id := range ids {
		if js, ok := sv.S.JobStats(id); ok {
			st.Jobs = append(st.Jobs, JobCounters{ID: id, JobStats: js})
		}
	}
	for _, p := range sv.Ports {
		st.Ports = append(st.Ports, PortCounters{Port: p, PortStats: sv.S.PortStats(p)})
	}
	if sv.Runtime != nil {
		if b, err := json.Marshal(sv.Runtime()); err == nil {
			st.Runtime = b
		}
	}
	return st
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// Listen opens the control listener: "unix:/path" (or a path starting with
// "/") for a unix socket, "tcp:127.0.0.1:port" for loopback TCP. Non-loopback
// TCP addresses are refused.
func Listen(addr string) (net.Listener, error) {
	network, a := splitAddr(addr)
	if network == "tcp" {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("swctl: control address %q: want a loopback address", addr)
		}
	}
	return net.Listen(network, a)
}

func splitAddr(addr string) (network, a string) {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		return "unix", addr[5:]
	case strings.HasPrefix(addr, "tcp:"):
		return "tcp", addr[4:]
	}
	return "unix", addr
}

// Client talks to a switch's control API.
type Client struct {
	hc   *http.Client
	base string
}

// NewClient returns a client for addr (as Listen takes it).
func NewClient(addr string) *Client {
	network, a := splitAddr(addr)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	}, DisableKeepAlives: true}
	return &Client{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, base: "http://inaswitch"}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	err := jsonhttp.Do(ctx, c.hc, method, c.base+path, in, out, 64<<20)
	if se, ok := err.(*jsonhttp.StatusError); ok {
		return fmt.Errorf("swctl: %s %s: %w", method, path, se)
	}
	return err
}

// Healthy reports whether the switch answers.
func (c *Client) Healthy(ctx context.Context) error { return c.do(ctx, "GET", "/healthz", nil, nil) }

// WaitHealthy polls /healthz until it answers or ctx ends.
func (c *Client) WaitHealthy(ctx context.Context) error {
	return jsonhttp.Poll(ctx, 20*time.Millisecond, c.Healthy)
}

// Configure installs cfg.
func (c *Client) Configure(ctx context.Context, cfg Config) error {
	return c.do(ctx, "POST", "/config", cfg, nil)
}

// SetPolicy changes a job's policy.
func (c *Client) SetPolicy(ctx context.Context, job uint16, policy int) error {
	return c.do(ctx, "POST", "/policy", PolicyChange{Job: job, Policy: policy}, nil)
}

// Register registers a job with the switch's scheduler.
func (c *Client) Register(ctx context.Context, r Registration) error {
	return c.do(ctx, "POST", "/register", r, nil)
}

// Stats reads the counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.do(ctx, "GET", "/stats", nil, &st)
	return st, err
}
