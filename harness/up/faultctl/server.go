package faultctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// Runner runs a change where the process's network may be touched (the
// run goroutine) and waits for it: procnode.Proc.Do.
type Runner interface {
	Do(fn func()) error
}

// Server serves a Table over HTTP. Every request is decoded and checked
// for form on the HTTP goroutine; the change itself runs through Run.
type Server struct {
	Table *Table
	Run   Runner
	// Progress, if set, answers GET /progress (called through Run).
	Progress func() Progress
	// Watcher, if set, answers POST /progress/wait (a worker's).
	Watcher *Watcher

	stopOnce sync.Once
	stop     chan struct{}
}

// Stop ends every POST /progress/wait still waiting (503): call it when
// the server shuts down (http.Server.RegisterOnShutdown).
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopped()) }) }

func (s *Server) stopped() chan struct{} {
	if s.stop == nil {
		s.stop = make(chan struct{})
	}
	return s.stop
}

// Register adds the endpoints to mux:
//
//	GET    /links                          []DirState: every direction the process models
//	GET    /links/{link}                   []DirState of one link ("all": every link)
//	POST   /links/{link}/{dir}/impairments ImpairmentsPatch: set impairments (the fields given)
//	DELETE /links/{link}/{dir}/impairments clear them (a clean channel)
//	POST   /links/{link}/{dir}/config      ConfigPatch: rate_gbps, delay, mtu, queue_packets, queue_bytes
//	POST   /links/{link}/{dir}/window      Window: a burst that reverts by itself after its duration
//	POST   /links/{link}/{dir}/down        {"duration": D} optional: down (for D, then up again)
//	POST   /links/{link}/{dir}/up          up
//	POST   /links/{link}/{dir}/reset       back to the process's starting configuration
//	GET    /progress                       Progress (a worker's all-reduces)
//	POST   /progress/wait                  Trigger: waits until it holds, answers its Event
//
// dir is up, down or both; every POST and DELETE answers the selected
// directions' new []DirState. A bad value is 400 naming the field and
// value, a selection matching nothing 404, a process whose run has
// ended 503.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /links", func(w http.ResponseWriter, r *http.Request) {
		s.run(w, func() ([]DirState, error) { return s.Table.List(), nil })
	})
	mux.HandleFunc("GET /links/{link}", func(w http.ResponseWriter, r *http.Request) {
		s.run(w, func() ([]DirState, error) { return s.Table.Select(r.PathValue("link"), Both) })
	})
	link := func(r *http.Request) (string, string) { return r.PathValue("link"), r.PathValue("dir") }
	mux.HandleFunc("POST /links/{link}/{dir}/impairments", func(w http.ResponseWriter, r *http.Request) {
		var p ImpairmentsPatch
		if !decode(w, r, &p, false) {
			return
		}
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.SetImpairments(l, d, p) })
	})
	mux.HandleFunc("DELETE /links/{link}/{dir}/impairments", func(w http.ResponseWriter, r *http.Request) {
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.ClearImpairments(l, d) })
	})
	mux.HandleFunc("POST /links/{link}/{dir}/config", func(w http.ResponseWriter, r *http.Request) {
		var p ConfigPatch
		if !decode(w, r, &p, false) {
			return
		}
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.SetConfig(l, d, p) })
	})
	mux.HandleFunc("POST /links/{link}/{dir}/window", func(w http.ResponseWriter, r *http.Request) {
		var win Window
		if !decode(w, r, &win, false) {
			return
		}
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.Open(l, d, win) })
	})
	mux.HandleFunc("POST /links/{link}/{dir}/down", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Duration Duration `json:"duration"`
		}
		if !decode(w, r, &body, true) {
			return
		}
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.SetUp(l, d, false, time.Duration(body.Duration)) })
	})
	mux.HandleFunc("POST /links/{link}/{dir}/up", func(w http.ResponseWriter, r *http.Request) {
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.SetUp(l, d, true, 0) })
	})
	mux.HandleFunc("POST /links/{link}/{dir}/reset", func(w http.ResponseWriter, r *http.Request) {
		l, d := link(r)
		s.run(w, func() ([]DirState, error) { return s.Table.Reset(l, d) })
	})
	stop := s.stopped()
	mux.HandleFunc("POST /progress/wait", func(w http.ResponseWriter, r *http.Request) {
		if s.Watcher == nil {
			http.Error(w, "this process has no progress to wait for (not a worker)", http.StatusNotFound)
			return
		}
		var t Trigger
		if !decode(w, r, &t, false) {
			return
		}
		var ch <-chan Event
		var err error
		if rerr := s.Run.Do(func() { ch, err = s.Watcher.Wait(t) }); rerr != nil {
			http.Error(w, rerr.Error(), http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case ev := <-ch:
			writeJSON(w, ev)
		case <-stop:
			http.Error(w, "the process is stopping", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("GET /progress", func(w http.ResponseWriter, r *http.Request) {
		if s.Progress == nil {
			http.Error(w, "this process reports no progress (not a worker)", http.StatusNotFound)
			return
		}
		var p Progress
		if err := s.Run.Do(func() { p = s.Progress() }); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, p)
	})
}

// run runs fn through s.Run and answers its result or error.
func (s *Server) run(w http.ResponseWriter, fn func() ([]DirState, error)) {
	var st []DirState
	var err error
	if rerr := s.Run.Do(func() { st, err = fn() }); rerr != nil {
		http.Error(w, rerr.Error(), http.StatusServiceUnavailable)
		return
	}
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		writeJSON(w, st)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decode reads the JSON body into v, refusing unknown fields; an empty
// body is allowed if optional.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(b) == 0 && optional {
		return true
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	}
	if err != nil {
		http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}
