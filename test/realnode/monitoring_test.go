package realnode

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/monitoring"
)

// TestPrometheusScrapesTheOperatorAndAlertsOnANotReadyWebApp: Prometheus, built from its module, runs on the node
// with a ServiceAccount of its own, and scrapes the operator the way the chart's ServiceMonitor says (HTTPS, its
// token reviewed by the operator; the ServiceMonitor turned into a scrape configuration as the Prometheus Operator
// would, since no Prometheus Operator runs here). It evaluates the chart's alert rules, WebAppNotReady's wait
// shortened to 20s: a WebApp whose image cannot be pulled makes the alert fire, naming it, and fixing the image
// resolves it. Every query of the chart's Grafana dashboard runs without error, and on data.
func TestPrometheusScrapesTheOperatorAndAlertsOnANotReadyWebApp(t *testing.T) {
	ensureAppNamespace(t)
	const notReadyFor = "20s"
	base := deployPrometheus(t, notReadyFor, "")

	// Both replicas are scraped through their authenticated endpoint.
	eventually(t, 2*time.Minute, "both operator replicas scraped", func() error {
		res, err := promQuery(base, `up{job="webapp-operator-metrics", namespace="webapp-system"} == 1`)
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("%d targets up: %v (targets: %s)", len(res), res, promTargets(base))
		}
		return err
	})
	// Every rule loaded, and healthy once evaluated.
	eventually(t, time.Minute, "5 alert rules evaluated without error", func() error {
		rules, err := promGet(base, "/api/v1/rules?type=alert")
		if n := strings.Count(rules, `"health":"ok"`); err == nil && n != 5 {
			err = fmt.Errorf("%d alert rules healthy: %s", n, rules)
		}
		return err
	})

	// A WebApp that cannot become Ready: its image does not exist.
	const name = "monitored"
	manifest := func(image string) string { return webAppV2(appNS, name, image, 0, "") }
	apply(t, manifest("missing.invalid/webapp-test/absent:1"))
	defer kubectl(t, "delete", "-n", appNS, "webapp/"+name, "--wait=false")
	jsonpathEquals(t, 2*time.Minute, "False", `{.status.conditions[?(@.type=="Ready")].status}`, "-n", appNS, "webapp/"+name)
	notReady := time.Now()
	eventually(t, 3*time.Minute, "WebAppNotReady fires for "+name, func() error {
		return alertState(base, name, "firing")
	})
	fired := time.Since(notReady)

	// Every dashboard query runs; all but the drift repairs (none happened) have data.
	queries, err := monitoring.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	withData := 0
	for title, q := range queries {
		res, err := promQuery(base, q)
		switch {
		case err != nil:
			t.Errorf("dashboard query %s: %v", title, err)
		case len(res) > 0:
			withData++
		case !strings.HasPrefix(title, "Drift repaired"):
			t.Errorf("dashboard query %s has no data: %s", title, q)
		}
	}

	apply(t, manifest(cluster.WebserverImage))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/"+name)
	ready := time.Now()
	eventually(t, 2*time.Minute, "WebAppNotReady resolved for "+name, func() error {
		return alertState(base, name, "")
	})
	resolved := time.Since(ready)
	if err := alertState(base, "", ""); err != nil {
		t.Errorf("another alert is active: %v", err)
	}
	fmt.Printf("realnode: WebAppNotReady (for: %s, 5s scrapes and evaluations) fired %.0fs after Ready went False and resolved %.0fs after it went True; %d/%d dashboard queries had data\n",
		notReadyFor, fired.Seconds(), resolved.Seconds(), withData, len(queries))
}

// deployPrometheus runs Prometheus in the namespace monitoring with the chart's alert rules (WebAppNotReady after
// notReadyFor) and a scrape configuration made from the chart's ServiceMonitor (and extraScrape, more jobs of the
// scrape_configs list), and returns its URL. Its namespace is gone again when the test ends (another test makes
// it anew).
func deployPrometheus(t *testing.T, notReadyFor, extraScrape string) string {
	t.Helper()
	home := t.TempDir()
	rules, err := monitoring.RulesFromChart(home, "metrics.prometheusRule.notReadyFor="+notReadyFor)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cluster.Helm(home, nil, "template", "webapp-operator", cluster.ChartDir(), "--namespace", operatorNS,
		"--show-only", "templates/servicemonitor.yaml", "--set", "metrics.serviceMonitor.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := scrapeConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	config := "global: {scrape_interval: 5s, evaluation_interval: 5s}\nrule_files: [/etc/prometheus/rules.yaml]\nscrape_configs:\n" + scrape + extraScrape
	data, err := json.Marshal(map[string]string{"prometheus.yml": config, "rules.yaml": string(rules)})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, `apiVersion: v1
kind: Namespace
metadata:
  name: monitoring
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: monitoring}
---
# Service discovery of the operator's endpoints, in its namespace only.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: prometheus-discovery, namespace: `+operatorNS+`}
rules:
- apiGroups: [""]
  resources: [services, endpoints, pods]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: prometheus-discovery, namespace: `+operatorNS+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: prometheus-discovery}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
---
# GET /metrics on the operator, as docs/install-and-operate.md says to grant a scraper.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus-webapp-operator-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: webapp-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prometheus, namespace: monitoring}
data: `+string(data)+`
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: prometheus, namespace: monitoring}
spec:
  selector: {matchLabels: {app: prometheus}}
  template:
    metadata: {labels: {app: prometheus}}
    spec:
      serviceAccountName: prometheus
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: prometheus
        image: `+cluster.PrometheusImage+`
        args: [--config.file=/etc/prometheus/prometheus.yml, --storage.tsdb.path=/prometheus, --web.listen-address=:9090]
        ports: [{name: web, containerPort: 9090}]
        readinessProbe: {httpGet: {path: /-/ready, port: web}, periodSeconds: 2}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts:
        - {name: config, mountPath: /etc/prometheus}
        - {name: data, mountPath: /prometheus}
      volumes:
      - {name: config, configMap: {name: prometheus}}
      - {name: data, emptyDir: {}}
---
apiVersion: v1
kind: Service
metadata: {name: prometheus, namespace: monitoring}
spec:
  selector: {app: prometheus}
  ports: [{name: web, port: 9090, targetPort: web}]
`)
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "namespace", "monitoring", "--wait=true", "--timeout=120s")
		_, _ = kubectlErr("delete", "clusterrolebinding", "prometheus-webapp-operator-metrics")
		_, _ = kubectlErr("delete", "-n", operatorNS, "role,rolebinding", "prometheus-discovery")
	})
	start := time.Now()
	kubectl(t, "wait", "--for=condition=Available", "--timeout=120s", "-n", "monitoring", "deployment/prometheus")
	fmt.Printf("realnode: Prometheus ready %.0fs after its apply\n", time.Since(start).Seconds())
	return "http://" + jsonpath(t, "{.spec.clusterIP}:{.spec.ports[0].port}", "-n", "monitoring", "service/prometheus")
}

// scrapeConfig turns a rendered ServiceMonitor into the scrape configuration the Prometheus Operator makes of it:
// endpoint slices of the Services in its namespaces with its labels, on its port, the job named after the Service.
func scrapeConfig(manifest string) (string, error) {
	var sm struct {
		Metadata struct{ Namespace, Name string }
		Spec     struct {
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port, Path, Scheme, BearerTokenFile string
				TLSConfig                           struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify"`
				} `json:"tlsConfig"`
			} `json:"endpoints"`
		}
	}
	if err := yaml.Unmarshal([]byte(manifest), &sm); err != nil {
		return "", err
	}
	if len(sm.Spec.Endpoints) != 1 || len(sm.Spec.Selector.MatchLabels) == 0 {
		return "", fmt.Errorf("not the ServiceMonitor expected: %s", manifest)
	}
	ep := sm.Spec.Endpoints[0]
	var b strings.Builder
	fmt.Fprintf(&b, `- job_name: serviceMonitor/%s/%s/0
  metrics_path: %s
  scheme: %s
  authorization: {type: Bearer, credentials_file: %s}
  tls_config: {insecure_skip_verify: %t}
  kubernetes_sd_configs: [{role: endpointslice, namespaces: {names: [%s]}}]
  relabel_configs:
`, sm.Metadata.Namespace, sm.Metadata.Name, ep.Path, ep.Scheme, ep.BearerTokenFile, ep.TLSConfig.InsecureSkipVerify, strings.Join(sm.Spec.NamespaceSelector.MatchNames, ", "))
	keys := make([]string, 0, len(sm.Spec.Selector.MatchLabels))
	for k := range sm.Spec.Selector.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		l := strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(k)
		fmt.Fprintf(&b, "  - {action: keep, source_labels: [__meta_kubernetes_service_label_%s], regex: %q}\n", l, sm.Spec.Selector.MatchLabels[k])
	}
	fmt.Fprintf(&b, `  - {action: keep, source_labels: [__meta_kubernetes_endpointslice_port_name], regex: %q}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_service_name], target_label: service}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_service_name], target_label: job}
`, ep.Port)
	return b.String(), nil
}

// promGet GETs a path of Prometheus's API.
func promGet(base, path string) (string, error) {
	code, body, err := get(base+path, "")
	if err == nil && code != 200 {
		err = fmt.Errorf("GET %s: %d %s", path, code, body)
	}
	return body, err
}

// promQuery runs an instant query and returns its result's series (their labels).
func promQuery(base, q string) ([]map[string]string, error) {
	body, err := promGet(base, "/api/v1/query?query="+url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	out := make([]map[string]string, len(r.Data.Result))
	for i, s := range r.Data.Result {
		out[i] = s.Metric
	}
	return out, nil
}

// alertState is nil when the active alerts say state for WebApp webapp ("" for both: no alert active at all for
// it, or with webapp "": none at all).
func alertState(base, webapp, state string) error {
	body, err := promGet(base, "/api/v1/alerts")
	if err != nil {
		return err
	}
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return err
	}
	got := ""
	for _, a := range r.Data.Alerts {
		if webapp == "" || (a.Labels["alertname"] == "WebAppNotReady" && a.Labels["webapp"] == webapp && a.Labels["webapp_namespace"] == appNS) {
			got = a.State
			if webapp == "" {
				return fmt.Errorf("active: %v", a.Labels)
			}
		}
	}
	if got != state {
		return fmt.Errorf("the alert's state is %q (alerts: %s)", got, body)
	}
	return nil
}

// promTargets is Prometheus's view of its targets, for a failure's message.
func promTargets(base string) string {
	body, err := promGet(base, "/api/v1/targets?state=active")
	if err != nil {
		return err.Error()
	}
	return body
}
