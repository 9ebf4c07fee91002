//go:build race

package sw

// raceEnabled skips allocation counts under the race detector.
const raceEnabled = true
