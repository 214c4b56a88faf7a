//go:build race

package fleet

// raceEnabled: the race detector slows a three-node in-process cluster
// several times over; the cluster test runs without it (the worker's
// concurrent paths stay covered under -race by the single-server tests).
const raceEnabled = true
