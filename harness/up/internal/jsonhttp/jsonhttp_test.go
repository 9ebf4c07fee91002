package jsonhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDo: a 200 answer decodes into out, the body in arrives as JSON, any
// other status is a *StatusError with the answer's text.
func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		if r.Body != nil {
			buf := make([]byte, 64)
			n, _ := r.Body.Read(buf)
			b.Write(buf[:n])
		}
		if r.URL.Path == "/bad" {
			http.Error(w, "loss = 2: must be a probability", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"echo":` + b.String() + `}`))
	}))
	defer srv.Close()
	var out struct{ Echo struct{ X int } }
	if err := Do(context.Background(), srv.Client(), "POST", srv.URL+"/ok", map[string]int{"X": 3}, &out, 1<<10); err != nil || out.Echo.X != 3 {
		t.Errorf("ok: %+v, %v", out, err)
	}
	err := Do(context.Background(), srv.Client(), "GET", srv.URL+"/bad", nil, nil, 1<<10)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || se.Error() != "400 Bad Request: loss = 2: must be a probability" {
		t.Errorf("bad: %v", err)
	}
}

// TestPoll: Poll returns once check succeeds, and with the context's error
// and check's when the context ends first.
func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(context.Background(), time.Millisecond, func(context.Context) error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("%d calls, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	err := Poll(ctx, time.Millisecond, func(context.Context) error { return errors.New("down") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down") {
		t.Errorf("ended: %v", err)
	}
}
