// Command tools builds the tools module's commands the suites run (cluster.SuiteTools: helm, kustomize, promtool)
// into the cache outside the checkout, unless they are there, and prints their paths. make test runs it in a build
// phase, before the suites that run them start, and make verify before the chart's tests, so no test's clock
// includes their compile.
//
//	go run ./test/cmd/tools [NAME...]   all of them, or only these (helm, kustomize, promtool)
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/example/webapp-operator/test/cluster"
)

func main() {
	names := os.Args[1:]
	for _, name := range names {
		if !slices.ContainsFunc(cluster.SuiteTools, func(c cluster.ToolCommand) bool { return c.Name() == name }) {
			fmt.Fprintf(os.Stderr, "tools: no command %s in cluster.SuiteTools\n", name)
			os.Exit(2)
		}
	}
	for _, c := range cluster.SuiteTools {
		if len(names) > 0 && !slices.Contains(names, c.Name()) {
			continue
		}
		bin, err := cluster.Tool(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(bin)
	}
}
