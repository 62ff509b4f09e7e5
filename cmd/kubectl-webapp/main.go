// Command kubectl-webapp is the WebApp operator's kubectl plugin: kubectl webapp get, explain and owners (see
// package plugin).
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/example/webapp-operator/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
