// Package chart checks the Helm chart (manifests/chart/webapp-operator) with helm and kustomize built from their Go
// modules (test/tools/helm): it renders what the kustomize tree renders (so the two never diverge), helm lint
// passes for every supported shape of values, the namespaced shape grants nothing cluster-wide beyond the CRD's,
// and values.schema.json refuses bad values with the value's path.
package chart

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/example/webapp-operator/test/cluster"
)

// Chart is the chart's directory.
var Chart = cluster.ChartDir()

// helmLabels are the labels the chart adds to what the kustomize tree has (and, with the instance, to selectors).
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// Helm runs helm with a configuration, cache and data directory of the test's own.
func Helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return cluster.Helm(t.TempDir(), nil, args...)
}

// template renders the chart as release webapp-operator in webapp-system with the image of `make deploy` and sets.
func template(t *testing.T, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "webapp-operator", Chart, "--namespace", "webapp-system", "--set", "image.tag=dev"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := Helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// withoutHelmLabels removes helmLabels from every map of o (metadata, selectors, pod templates) and the keep policy
// annotation (the chart's alone, with crds.keep).
func withoutHelmLabels(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if slices.Contains(helmLabels, k) || k == "helm.sh/resource-policy" {
				continue
			}
			out[k] = withoutHelmLabels(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutHelmLabels(e)
		}
		return out
	default:
		return v
	}
}

// The chart with its default values renders the objects `kubectl apply -k manifests` applies, field for field, but
// for Helm's own labels: the CRD and the RBAC rules are generated from the same files (make generate), and the
// rest is checked here. The kustomize tree alone has the Namespace (Helm's is --create-namespace).
func TestChartRendersWhatKustomizeRenders(t *testing.T) {
	kustomize, err := cluster.Tool(cluster.KustomizeCommand)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kustomize, "build", filepath.Join(cluster.RepoRoot(), "manifests")).Output()
	if err != nil {
		t.Fatalf("kustomize build manifests: %v", err)
	}
	want := map[string]*unstructured.Unstructured{}
	for _, o := range decode(t, string(out)) {
		want[key(o)] = o
	}
	onlyKustomize := []string{"Namespace//webapp-system"}
	got := template(t)
	for _, o := range got {
		k := key(o)
		w, ok := want[k]
		if !ok {
			t.Errorf("the chart renders %s, which the kustomize tree does not", k)
			continue
		}
		delete(want, k)
		if diff := cmp.Diff(normalized(w), normalized(o)); diff != "" {
			t.Errorf("%s differs between kustomize (-) and the chart (+):\n%s", k, diff)
		}
	}
	for k := range want {
		if !slices.Contains(onlyKustomize, k) {
			t.Errorf("the kustomize tree has %s, which the chart does not render", k)
		}
	}
	t.Logf("%d objects rendered alike", len(got))
}

// normalized is o without Helm's labels, its RBAC rules as a sorted list of single grants (a Role's rules are a
// union: the chart splits controller-gen's rules by scope, which changes their grouping, not what they grant).
func normalized(o *unstructured.Unstructured) any {
	m := withoutHelmLabels(o.Object).(map[string]any)
	rules, ok := m["rules"].([]any)
	if !ok {
		return m
	}
	var grants []string
	strs := func(r map[string]any, k string) []string {
		v, _, _ := unstructured.NestedStringSlice(r, k)
		if len(v) == 0 {
			return []string{""}
		}
		return v
	}
	for _, r := range rules {
		rule := r.(map[string]any)
		for _, g := range strs(rule, "apiGroups") {
			for _, res := range strs(rule, "resources") {
				for _, n := range strs(rule, "resourceNames") {
					for _, u := range strs(rule, "nonResourceURLs") {
						for _, v := range strs(rule, "verbs") {
							grants = append(grants, fmt.Sprintf("%s %s/%s %s %s", v, g, res, n, u))
						}
					}
				}
			}
		}
	}
	slices.Sort(grants)
	m["rules"] = grants
	return m
}

// valueSets are the shapes of values the chart supports; each must lint and render.
var valueSets = map[string][]string{
	"defaults":   nil,
	"namespaced": {"watchNamespaces={team-a,team-b}", "crds.enabled=false", "rbac.userRoles=false"},
	"namespaced, another release serving the CRD": {"watchNamespaces={team-c}", "crds.enabled=false", "webhook.enabled=false",
		"rbac.userRoles=false"},
	"certManager": {"webhook.certificate.source=certManager"},
	"certManager with an issuer": {"webhook.certificate.source=certManager", "webhook.certificate.certManager.issuerRef.name=ca",
		"webhook.certificate.certManager.issuerRef.kind=ClusterIssuer"},
	"own secret":                      {"webhook.certificate.source=secret", "webhook.certificate.secretName=my-cert", "webhook.certificate.caBundle=Y2E="},
	"monitoring":                      {"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"},
	"no metrics":                      {"metrics.enabled=false", "metrics.serviceMonitor.enabled=true"},
	"plain metrics":                   {"metrics.secure=false", "metrics.serviceMonitor.enabled=true"},
	"one replica, no leader election": {"replicaCount=1", "leaderElection.enabled=false", "podDisruptionBudget.enabled=false"},
	"crds not kept":                   {"crds.keep=false"},
}

// shape is the sets of valueSets[name].
func shape(t *testing.T, name string) []string {
	t.Helper()
	sets, ok := valueSets[name]
	if !ok {
		t.Fatalf("no shape of values %q", name)
	}
	return sets
}

func TestLintPassesForEverySupportedShape(t *testing.T) {
	for name, sets := range valueSets {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", Chart}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			if out, err := Helm(t, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if objs := template(t, sets...); len(objs) == 0 {
				t.Fatal("rendered nothing")
			}
		})
	}
}

// A namespaced install (watchNamespaces) has Roles in its namespaces, and cluster-wide only the CRD's rules and
// the metrics endpoint's reviews; the operator is told to watch exactly those namespaces and not to migrate storage.
func TestNamespacedInstallGrantsNothingClusterWideButTheCRDs(t *testing.T) {
	objs := template(t, shape(t, "namespaced")...)
	roles := map[string][]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			roles[o.GetNamespace()+"/"+o.GetName()] = normalized(o).(map[string]any)["rules"].([]string)
		case "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
				resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
				urls, _, _ := unstructured.NestedStringSlice(rule, "nonResourceURLs")
				ok := slices.Equal(groups, []string{"apiextensions.k8s.io"}) ||
					slices.Equal(resources, []string{"tokenreviews"}) || slices.Equal(resources, []string{"subjectaccessreviews"}) ||
					slices.Equal(urls, []string{"/metrics"})
				if !ok {
					t.Errorf("ClusterRole %s grants %v on %v %v", o.GetName(), rule["verbs"], groups, resources)
				}
			}
		case "Deployment":
			args, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := args[0].(map[string]any)
			flags, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, want := range []string{"--namespace=team-a,team-b", "--migrate-storage=false"} {
				if !slices.Contains(flags, want) {
					t.Errorf("the operator's flags lack %s: %v", want, flags)
				}
			}
		case "CustomResourceDefinition":
			t.Errorf("crds.enabled=false rendered the CRD")
		}
	}
	for _, want := range []string{"team-a/webapp-operator", "team-b/webapp-operator", "webapp-system/webapp-operator-leader-election", "webapp-system/webapp-operator-webhook-cert"} {
		if roles[want] == nil {
			t.Errorf("no Role %s (have %v)", want, roles)
		}
	}
	// The certificate rotator's cache reads the Secrets of the operator's namespace, which no watched namespace's
	// Role covers.
	if g := roles["webapp-system/webapp-operator-webhook-cert"]; !slices.Contains(g, "list /secrets  ") || !slices.Contains(g, "watch /secrets  ") {
		t.Errorf("the webhook certificate's Role lets the rotator's cache not list and watch Secrets: %v", g)
	}
}

// A namespaced release beside the one that serves the CRD's conversion serves none, keeps no certificate and has
// no right on the CRD.
func TestNamespacedReleaseWithoutTheWebhookHasNoRightOnTheCRD(t *testing.T) {
	for _, o := range template(t, shape(t, "namespaced, another release serving the CRD")...) {
		switch {
		case o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-crd"),
			o.GetKind() == "Secret", o.GetKind() == "Service" && strings.HasSuffix(o.GetName(), "-webhook"):
			t.Errorf("rendered %s", key(o))
		case o.GetKind() == "Deployment":
			c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			flags, _, _ := unstructured.NestedStringSlice(c[0].(map[string]any), "args")
			if !slices.Contains(flags, "--webhook-port=0") || slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--cert-rotation") }) {
				t.Errorf("the operator's flags: %v", flags)
			}
		}
	}
}

// values.schema.json (and, for what it cannot compare, the templates) refuses what the chart cannot render into a
// working install, naming the value.
func TestSchemaRefusesBadValuesNamingThem(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"replicaCount=0", "replicaCount"},
		{"replicaCount=two", "replicaCount"},
		{"watchNamespaces={Team_A}", "watchNamespaces"},
		{"controller.requeueAfter=soon", "requeueAfter"},
		{"controller.kubeAPIQPS=0", "kubeAPIQPS"},
		{"controller.maxConcurrentReconciles=0", "maxConcurrentReconciles"},
		{"webhook.certificate.source=vault", "source"},
		{"webhook.certificate.source=secret", "secretName"},
		{"metrics.prometheusRule.notReadyFor=15 minutes", "notReadyFor"},
		{"metrics.prometheusRule.errorRatio=2", "errorRatio"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"crds.enabeld=true", "enabeld"},
		{"resources.limits.memory=lots", "memory"},
		{"controller.requeueAfter=0s", "requeueAfter"},
		{"controller.logLevel=0", "logLevel"},
		{"leaderElection.enabled=false", "replicaCount"},
		{"webhook.certificate.source=certManager,webhook.certificate.certManager.issuerRef.kind=ClusterIssuer", "name"},
		// What the schema cannot compare, the templates refuse.
		{"metrics.port=8081", "must differ"},
		{"podLabels.app\\.kubernetes\\.io/instance=x", "podLabels.app.kubernetes.io/instance"},
		{"webhook.enabled=false", "crds.enabled needs webhook.enabled"},
		{"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.job"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := Helm(t, "template", "x", Chart, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s was accepted", tc.set)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error does not name %s: %v", tc.want, err)
			}
			t.Logf("%v", err)
		})
	}
}

// The dashboard is JSON Grafana can import, with a query in every panel.
func TestDashboardIsJSONWithAQueryInEveryPanel(t *testing.T) {
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile(filepath.Join(Chart, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("uid %q, %d panels", d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
}
