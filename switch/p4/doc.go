// Package p4 holds ina.p4, the P4_16 (v1model, BMv2) twin of the Go
// aggregation switch in package sw, and difftest.sh, which runs the STF
// vectors in testdata/stf on it. There is no Go code here: ina.p4 is
// generated from gen/ina.p4.tmpl by the directive below (see package gen and
// README.md).
package p4

//go:generate go run ./gen/cmd/p4gen -o ina.p4
