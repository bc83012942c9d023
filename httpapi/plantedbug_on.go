//go:build simbug

package httpapi

// plantedBug is on in builds with the simbug tag: the sim harness's
// proof that it catches a real mistake (docs/sim.md, "The planted bug").
// Never build a node with it.
const plantedBug = true
