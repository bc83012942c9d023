//go:build !simbug

package httpapi

// plantedBug is off: see plantedbug_on.go (build tag simbug).
const plantedBug = false
