//go:build race

package testbed

// raceEnabled shrinks the acceptance tensors under the race detector.
const raceEnabled = true
