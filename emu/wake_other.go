//go:build !linux

package emu

func newPreciseWaker() (waker, error) { return newGoWaker(), nil }
