//go:build race

package nodes_test

// raceOn: the race detector makes sync.Pool drop objects on purpose, so
// allocation counts mean nothing under it.
const raceOn = true
