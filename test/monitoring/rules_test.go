// The tests of this package check the chart's monitoring with promtool, built from the Prometheus module
// test/tools/prometheus pins: the alert rules of templates/prometheusrule.yaml load and behave as rules_test.yaml
// says (input series, expected alerts with their labels and annotations, every alert shown firing and resolving),
// and every query of the Grafana dashboard is valid PromQL. (test/realnode runs them all in a real Prometheus.)

package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/example/webapp-operator/test/cluster"
)

func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin, err := cluster.Tool(cluster.PromtoolCommand)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestAlertRulesLoadAndFireAsTheirTestsSay(t *testing.T) {
	dir := t.TempDir()
	rules, err := RulesFromChart(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "rules.yaml"), rules)
	write(t, filepath.Join(dir, "rules_test.yaml"), tests)
	t.Logf("promtool check rules:\n%s", promtool(t, dir, "check", "rules", "rules.yaml"))
	t.Logf("promtool test rules:\n%s", promtool(t, dir, "test", "rules", "rules_test.yaml"))

	// Every alert of the rules is tested firing at least once.
	var parsedRules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var parsedTests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	unmarshal(t, rules, &parsedRules)
	unmarshal(t, tests, &parsedTests)
	fired, resolved := map[string]bool{}, map[string]bool{}
	for _, tc := range parsedTests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			} else if fired[a.Alertname] {
				resolved[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range parsedRules.Groups {
		for _, r := range g.Rules {
			n++
			if !fired[r.Alert] || !resolved[r.Alert] {
				t.Errorf("alert %s has no test in which it fires, then resolves", r.Alert)
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d alert rules rendered, want 5", n)
	}
}

// Every query of the dashboard parses as PromQL: promtool checks them as recording rules.
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	queries, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n- name: dashboard\n  rules:\n")
	i := 0
	for title, q := range queries {
		if strings.Contains(q, "$") {
			t.Errorf("%s: a Grafana variable is left: %s", title, q)
		}
		i++
		fmt.Fprintf(&b, "  - record: dashboard:query_%d\n    expr: %q\n", i, q)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "dashboard.yaml"), []byte(b.String()))
	t.Logf("%d queries:\n%s", len(queries), promtool(t, dir, "check", "rules", "dashboard.yaml"))
}

func write(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func unmarshal(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}
