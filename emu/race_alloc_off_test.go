//go:build !race

package emu

const raceOn = false
