package faultctl

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/up/internal/jsonhttp"
)

// Client talks to one process's fault API.
type Client struct {
	hc   *http.Client
	addr string
}

// NewClient returns a client for a control socket: a unix socket path or
// "unix:PATH".
func NewClient(addr string) *Client {
	path := strings.TrimPrefix(addr, "unix:")
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}, DisableKeepAlives: true}
	return &Client{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, addr: path}
}

// StatusError is an answer other than 200: its code and its text.
type StatusError = jsonhttp.StatusError

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return jsonhttp.Do(ctx, c.hc, method, "http://inabox"+path, in, out, 16<<20)
}

func linkPath(link, dir, op string) string {
	return "/links/" + url.PathEscape(link) + "/" + url.PathEscape(dir) + "/" + op
}

// Healthy reports whether the process answers.
func (c *Client) Healthy(ctx context.Context) error { return c.do(ctx, "GET", "/healthz", nil, nil) }

// WaitHealthy polls /healthz until it answers or ctx ends.
func (c *Client) WaitHealthy(ctx context.Context) error {
	return jsonhttp.Poll(ctx, 10*time.Millisecond, c.Healthy)
}

// List returns every direction the process models.
func (c *Client) List(ctx context.Context) ([]DirState, error) {
	var st []DirState
	err := c.do(ctx, "GET", "/links", nil, &st)
	return st, err
}

func (c *Client) post(ctx context.Context, method, link, dir, op string, in any) ([]DirState, error) {
	var st []DirState
	err := c.do(ctx, method, linkPath(link, dir, op), in, &st)
	return st, err
}

// SetImpairments sets the impairments p gives on link's dir.
func (c *Client) SetImpairments(ctx context.Context, link, dir string, p ImpairmentsPatch) ([]DirState, error) {
	return c.post(ctx, "POST", link, dir, "impairments", p)
}

// ClearImpairments removes every impairment of link's dir.
func (c *Client) ClearImpairments(ctx context.Context, link, dir string) ([]DirState, error) {
	return c.post(ctx, "DELETE", link, dir, "impairments", nil)
}

// SetConfig changes link's dir's rate, delay, MTU or queue.
func (c *Client) SetConfig(ctx context.Context, link, dir string, p ConfigPatch) ([]DirState, error) {
	return c.post(ctx, "POST", link, dir, "config", p)
}

// Open opens a window on link's dir.
func (c *Client) Open(ctx context.Context, link, dir string, w Window) ([]DirState, error) {
	return c.post(ctx, "POST", link, dir, "window", w)
}

// SetUp takes link's dir down (for d > 0: then up again) or up.
func (c *Client) SetUp(ctx context.Context, link, dir string, up bool, d time.Duration) ([]DirState, error) {
	if up {
		return c.post(ctx, "POST", link, dir, "up", nil)
	}
	var body any
	if d > 0 {
		body = struct {
			Duration Duration `json:"duration"`
		}{Duration(d)}
	}
	return c.post(ctx, "POST", link, dir, "down", body)
}

// Reset returns link's dir to the process's starting configuration.
func (c *Client) Reset(ctx context.Context, link, dir string) ([]DirState, error) {
	return c.post(ctx, "POST", link, dir, "reset", nil)
}

// Wait waits until trigger t holds on the worker (or ctx ends) and
// returns when it did.
func (c *Client) Wait(ctx context.Context, t Trigger) (Event, error) {
	var ev Event
	long := *c
	long.hc = &http.Client{Transport: c.hc.Transport} // no timeout: ctx bounds it
	err := long.do(ctx, "POST", "/progress/wait", t, &ev)
	return ev, err
}

// Progress reads a worker's progress.
func (c *Client) Progress(ctx context.Context) (Progress, error) {
	var p Progress
	err := c.do(ctx, "GET", "/progress", nil, &p)
	return p, err
}
