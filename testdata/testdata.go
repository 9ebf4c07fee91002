// Package testdata embeds the model profiles and the experiment scenarios so
// that the harness and the CLI can use them without reading the working
// directory.
package testdata

import "embed"

// Models is testdata/models/models.yaml: per-model gradient size and
// per-iteration compute time.
//
//go:embed models/models.yaml
var Models []byte

// Scenarios holds testdata/scenarios: the experiment scenarios at
// scenarios/*.yaml and the invalid examples (and the traces they name) at
// scenarios/invalid.
//
//go:embed scenarios/*.yaml scenarios/*.csv scenarios/invalid/*.yaml scenarios/invalid/*.csv
var Scenarios embed.FS
