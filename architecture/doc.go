// Package architecture holds the module's import rules: which packages may
// import which (docs/architecture.md, "Import rules"). It has no code of its
// own; its test reads the module's imports with `go list` and fails on any
// import a rule forbids. `make lint` and `make test` run it.
package architecture
