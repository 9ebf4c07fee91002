// Package report measures runs and writes every output of `inabox run` and
// `inabox compare`.
//
// A [Collector] is fed a run's events in virtual time — job arrivals and
// finishes, iteration and all-reduce spans, switch occupancy per (pool, job),
// collisions, switch- and PS-path chunks, retransmissions — and turns them
// into [Results]: one [JobResult] per job, a [Summary] over jobs, switch
// [Memory] use and throughput time series, with every number a [Num] so that
// equal runs give byte-identical JSON. It reads no clock; harness/run feeds
// it.
//
// From Results come the outputs: results.json ([WriteResultsJSON]), jobs.csv
// and a per-job iteration log ([WriteJobsCSV], [WriteIterationsCSV]), the SVG
// plots ([JCTChart], [MemoryChart], [ThroughputChart]: each a [Figure],
// drawn with gonum/plot onto the package's SVG canvas) — all written into a
// directory by [WriteOutputs] — and the summary table
// ([Results.PrintSummary]). [Compare] sets the Results of one scenario under
// several policies side by side ([Comparison], as a table, JSON or CSV),
// with gains over the reference policy and the best baseline of
// harness/testbed's registry; [CompareFigures] plots them side by side and
// [WriteCompareOutputs] and [WriteRepeatedOutputs] write `compare --out`. A [Progress] bar ([NewProgress], [IsTerminal]) shows a run's
// virtual time on a terminal; [FormatSeconds], [FormatSI] and [FormatPercent]
// format numbers for the tables.
//
// The package knows nothing of the runner: harness/run creates the Collector
// with the scenario's name, policy, seed and switch size. Of scenarios it
// reads only a run's scenario_as_run, for a plot's scale and line rate.
package report
