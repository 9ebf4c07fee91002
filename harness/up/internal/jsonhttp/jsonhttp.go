// Package jsonhttp is the one JSON-over-HTTP request of the inabox up
// control clients (the switch's control API and every process's fault
// API).
package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// StatusError is an answer other than 200 OK: its code and its text.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

// Do sends in as JSON (nil: no body) with method to url and decodes a 200
// answer's JSON into out (nil: the answer is read and dropped), reading at
// most limit bytes of it; another status is a *StatusError.
func Do(ctx context.Context, hc *http.Client, method, url string, in, out any, limit int64) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode, Msg: strings.TrimSpace(string(b))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Poll calls check every interval until it succeeds or ctx ends (then the
// context's error joined with check's last).
func Poll(ctx context.Context, every time.Duration, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(every):
		}
	}
}
