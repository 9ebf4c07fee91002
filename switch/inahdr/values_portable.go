//go:build purego || !amd64

package inahdr

// wideValues is false: there is no wide kernel in this build.
var wideValues = false

func readValuesWide([]int32, []byte) int { return 0 }
