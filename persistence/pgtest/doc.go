// Package pgtest gives each Postgres test a schema of its own on a real
// server. It is for tests only; production code never imports it.
//
// The server is named by SWITCHBOARD_TEST_POSTGRES (a DSN), by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. A server that
// cannot be reached fails the test: in CI a missing Postgres is a failure,
// not a skip.
package pgtest
