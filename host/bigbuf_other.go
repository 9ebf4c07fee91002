//go:build !linux

package host

import "unsafe"

// adviseHuge does nothing here: huge pages are asked for on Linux only.
func adviseHuge(unsafe.Pointer, uintptr) {}
