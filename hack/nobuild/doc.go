// Package nobuild holds the go command the suites of make test run with (the script go beside this file) and its
// test; nothing here is imported.
package nobuild
