//go:build race

package emu_test

// raceDetectorOn: the race detector makes sync.Pool drop objects on purpose, so
// allocation counts mean nothing under it.
const raceDetectorOn = true
