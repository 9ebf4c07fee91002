//go:build race

package emu

// raceOn: the race detector makes sync.Pool drop objects on purpose, so
// allocation counts mean nothing under it.
const raceOn = true
