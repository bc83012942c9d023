//go:build simbug

package sim

// replayTags is the go command's flag that builds the planted bug back
// into a replay (docs/sim.md, "The planted bug").
const replayTags = " -tags simbug"
