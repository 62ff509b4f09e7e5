package cluster

import "testing"

func TestToolCommandName(t *testing.T) {
	for pkg, want := range map[string]string{
		"helm.sh/helm/v4/cmd/helm":                      "helm",
		"sigs.k8s.io/kustomize/kustomize/v5":            "kustomize",
		"github.com/prometheus/prometheus/cmd/promtool": "promtool",
		"example.com/v2ray":                             "v2ray",
	} {
		if got := (ToolCommand{Pkg: pkg}).Name(); got != want {
			t.Errorf("the name of %s: %q, want %q", pkg, got, want)
		}
	}
}
