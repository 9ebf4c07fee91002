//go:build race

package host

// raceEnabled shrinks the acceptance tensors under the race detector.
const raceEnabled = true
