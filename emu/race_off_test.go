//go:build !race

package emu_test

const raceDetectorOn = false
