//go:build !race

package nodes_test

const raceOn = false
