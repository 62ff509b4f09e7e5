// Package monitoring reads the chart's monitoring as Prometheus and promtool take it: the alert rules of its
// PrometheusRule and the queries of its Grafana dashboard (used by this package's promtool tests and test/realnode).
package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/example/webapp-operator/test/cluster"
)

// RulesFromChart renders the chart's PrometheusRule (release webapp-operator in webapp-system, sets added) and
// returns its spec, a Prometheus rule file.
func RulesFromChart(home string, sets ...string) ([]byte, error) {
	args := []string{"template", "webapp-operator", cluster.ChartDir(), "--namespace", "webapp-system",
		"--show-only", "templates/prometheusrule.yaml", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.serviceMonitor.enabled=true"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := cluster.Helm(home, nil, args...)
	if err != nil {
		return nil, err
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(rule.Spec)
}

// DashboardQueries are the dashboard's queries with Grafana's variables replaced for a plain Prometheus: every
// operator ($namespace, $job), a 1m rate interval, a 1h range.
func DashboardQueries() (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(cluster.ChartDir(), "files", "dashboard.json"))
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	r := strings.NewReplacer(`"$job"`, `".+"`, `"$namespace"`, `".+"`, "$__rate_interval", "1m", "$__range", "1h")
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+" "+tg.RefID] = r.Replace(tg.Expr)
		}
	}
	return out, nil
}
