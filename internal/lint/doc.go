// Package lint holds the repository's own lint rules, kept as tests: each
// parses the module's Go files and fails on a pattern that compiles but
// measures or does the wrong thing. It has no code of its own.
package lint
