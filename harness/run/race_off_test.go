//go:build !race

package run

// raceEnabled: the test binary was built with -race.
const raceEnabled = false
