//go:build !linux

package emu

import (
	"context"
	"time"
)

const (
	pollSupported  = false
	pollMaxPending = 0
)

type pollState struct{}

func (n *Network) runPolled(context.Context, time.Time, bool, time.Duration) (RealtimeStats, error) {
	panic("unreachable")
}

func (n *Network) pollWrite(*extPort) {}
