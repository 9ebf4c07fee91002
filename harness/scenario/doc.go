// Package scenario is the experiment file of `inabox run`, `compare`,
// `validate` and `up`: its schema, defaults and validation, and the model
// profiles the jobs name.
//
// A scenario is YAML (the format is documented on [Scenario]): a seed, a
// policy, scaling factors, a one-switch topology, jobs (model, workers,
// iterations, arrival), and optional faults and per-link impairments.
// [Load] reads a file, [Embedded] one of testdata/scenarios ([EmbeddedNames],
// [DefaultName]), and [Parse] decodes bytes against a set of [Models]. Each
// fills in every absent field with its default and validates the result: an
// invalid scenario is an [*Error] listing every problem in file order, each a
// [*FieldError] that names file, line, field path and value
// ("x.yaml:2: jobs[0].workers: 33: must be between 1 and 32").
//
// Model profiles ([Model]: gradient size and compute time per iteration) come
// from testdata/models/models.yaml ([DefaultModels]) or [ParseModels].
// [Scenario.Plan] resolves each job against its model, the scaling and the
// topology into a [JobPlan] — hosts, PS, elements, bytes and packets per
// all-reduce, compute time, ideal all-reduce time — which is what
// harness/run builds; [Scenario.Estimate] is the emulator's cost of a run,
// and [Scenario.LinkConfig] the emulator configuration of a host's link.
//
// The package only describes experiments: harness/run runs them and
// harness/report measures and writes what they did.
package scenario
