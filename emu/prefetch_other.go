//go:build purego || !amd64

package emu

func prefetchPacket(*Packet) {}

func prefetchFrame(*Packet) {}
