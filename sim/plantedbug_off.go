//go:build !simbug

package sim

// replayTags: no build tag (see plantedbug_on.go).
const replayTags = ""
