package realnode

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

const (
	operatorNS = "webapp-system"
	appNS      = "shop" // restricted Pod Security enforced, like the operator's own namespace
	leaseName  = "webapp-operator.example.com"
)

// reply is the test web app's answer to GET / (test/images/webserver).
type reply struct {
	Hostname string `json:"hostname"`
	UID      int    `json:"uid"`
	Greeting string `json:"greeting"`
}

// get sends one GET on a new connection (so kube-proxy picks an endpoint each time) and returns the status and
// body. Only ever called inside the node's namespace (TestMain runs the tests nowhere else).
func get(url, token string) (int, string, error) {
	// The operator's metrics certificate is self-signed, as controller-runtime makes it without a cert dir.
	return request(url, "", token, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // see above; the token is what is tested
}

// request sends one GET of url on a new connection, naming host (when not empty) with a bearer token (when not
// empty), with TLS configured by tlsConfig for https.
func request(url, host, token string, tlsConfig *tls.Config) (int, string, error) {
	return send(&http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConfig}}, url, host, token)
}

// send GETs url through client, naming host (when not empty) with a bearer token (when not empty), and returns the
// status and body.
func send(client *http.Client, url, host, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// getReply GETs the test web app's / through url and decodes the answer.
func getReply(url string) (reply, error) {
	var r reply
	code, body, err := get(url, "")
	if err != nil {
		return r, err
	}
	if code != http.StatusOK {
		return r, fmt.Errorf("GET %s: %d %s", url, code, body)
	}
	return r, json.Unmarshal([]byte(body), &r)
}

// serviceURL is http://CLUSTER-IP:PORT/ of a WebApp's Service.
func serviceURL(t *testing.T, name string) string {
	t.Helper()
	return "http://" + jsonpath(t, "{.spec.clusterIP}:{.spec.ports[0].port}", "-n", appNS, "service/"+name) + "/"
}

// podNames are the names of a WebApp's pods.
func podNames(t *testing.T, name string) []string {
	t.Helper()
	return strings.Fields(jsonpath(t, "{.items[*].metadata.name}", "-n", appNS, "pods", "-l", "app.kubernetes.io/instance="+name))
}

// webAppV2 is a v2 WebApp of image on port 8080 with replicas (unset when 0), restricted; extra is more of its
// spec, indented as it.
func webAppV2(ns, name, image string, replicas int, extra string) string {
	count := ""
	if replicas > 0 {
		count = fmt.Sprintf("  replicas: %d\n", replicas)
	}
	return fmt.Sprintf(`apiVersion: example.com/v2
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
%s  ports: [{name: http, port: 8080}]
  pod: {security: Restricted}
%s`, name, ns, image, count, extra)
}

// webApp is a WebApp of the test web app on port 8080 with a readiness check of healthCheckPath; extra is more
// of its spec, indented as it.
func webApp(name string, replicas int, extra string) string {
	return fmt.Sprintf(`apiVersion: example.com/v1
kind: WebApp
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  replicas: %d
  port: 8080
  healthCheckPath: /healthz
  podSecurity: Restricted
%s`, name, appNS, cluster.WebserverImage, replicas, extra)
}

// restrictedNamespace applies a namespace with the restricted Pod Security Standard enforced.
func restrictedNamespace(ns string) error {
	_, err := kubectlIn(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`","labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`,
		"apply", "--server-side", "-f", "-")
	return err
}

// ensureAppNamespace creates the restricted namespace of the WebApps once.
func ensureAppNamespace(t *testing.T) {
	t.Helper()
	if err := restrictedNamespace(appNS); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorRunsFromItsOwnImageAsShipped(t *testing.T) {
	jsonpathEquals(t, 10*time.Second, "restricted", `{.metadata.labels.pod-security\.kubernetes\.io/enforce}`, "namespace/"+operatorNS)
	pods := operatorPods(t, 2)
	for _, pod := range pods {
		got := jsonpath(t, "{.spec.containers[0].image} {.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.containers[0].args} {.status.containerStatuses[0].ready}", "-n", operatorNS, "pod/"+pod)
		want := `webapp-operator:dev true ["--leader-elect=true","--leader-elect-lease-duration=15s","--leader-elect-renew-deadline=10s","--leader-elect-retry-period=2s","--metrics-bind-address=:8443","--metrics-secure=true","--health-probe-bind-address=:8081","--webhook-port=9443","--cert-rotation=true","--webhook-secret-name=webapp-operator-webhook-cert","--webhook-service-name=webapp-operator-webhook","--max-concurrent-reconciles=8","--kube-api-qps=200","--kube-api-burst=400","--requeue-after=30s","--migrate-storage=true","--zap-log-level=info"] true`
		if got != want {
			t.Fatalf("operator pod %s: got %q, want %q", pod, got, want)
		}
		// The kubelet ran the image the build made: containerd reports its digest.
		if id := jsonpath(t, "{.status.containerStatuses[0].imageID}", "-n", operatorNS, "pod/"+pod); !strings.HasPrefix(id, "sha256:") && !strings.Contains(id, "@sha256:") {
			t.Fatalf("operator container's imageID %q is not a digest", id)
		}
	}
	eventually(t, 30*time.Second, "one of the operator's pods holds the leader-election Lease", func() error {
		_, err := leader(t)
		return err
	})
}

func TestWebAppReadyByTheKubeletsProbeAndServedByItsPods(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, webApp("web", 2, ""))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/web")
	pods := podNames(t, "web")
	if len(pods) != 2 {
		t.Fatalf("pods of web: %v", pods)
	}
	for _, p := range pods {
		// Ready is the kubelet's verdict from the HTTP readiness probe on /healthz; the container really started.
		got := jsonpath(t, `{.spec.containers[0].readinessProbe.httpGet.path} {.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].started} {.spec.securityContext.runAsNonRoot}`, "-n", appNS, "pod/"+p)
		if got != "/healthz True true true" {
			t.Fatalf("pod %s: probe path, Ready, started, runAsNonRoot = %q", p, got)
		}
	}
	url := serviceURL(t, "web")
	seen := map[string]bool{}
	eventually(t, 30*time.Second, "GETs through the Service answered by both pods", func() error {
		r, err := getReply(url)
		if err != nil {
			return err
		}
		if !slices.Contains(pods, r.Hostname) {
			t.Fatalf("answer from %q, not one of the WebApp's pods %v", r.Hostname, pods)
		}
		if r.UID == 0 {
			t.Fatalf("pod %s runs as root under podSecurity: Restricted", r.Hostname)
		}
		seen[r.Hostname] = true
		if len(seen) < 2 {
			return fmt.Errorf("answered by %v so far", seen)
		}
		return nil
	})
}

func TestFailingHealthCheckKeepsReadyFalseWithTheRealReason(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, webApp("sick", 1, "  args: [--fail-healthz]\n  progressDeadlineSeconds: 10\n"))
	ready := `{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}`
	// Until the deadline passes it is progressing, then stuck: never Ready.
	eventually(t, 90*time.Second, "sick reports the stuck rollout", func() error {
		got := jsonpath(t, ready, "-n", appNS, "webapp/sick")
		if strings.HasPrefix(got, "True") {
			t.Fatalf("sick became Ready: %s", got)
		}
		if got != "False/ProgressDeadlineExceeded" {
			return fmt.Errorf("Ready = %s", got)
		}
		return nil
	})
	// The pod runs, and the kubelet says why it is not ready.
	pod := podNames(t, "sick")[0]
	if got := jsonpath(t, "{.status.containerStatuses[0].started} {.status.containerStatuses[0].ready}", "-n", appNS, "pod/"+pod); got != "true false" {
		t.Fatalf("pod %s started/ready = %q", pod, got)
	}
	eventually(t, 30*time.Second, "the kubelet's Unhealthy event", func() error {
		msgs := jsonpath(t, "{.items[*].message}", "-n", appNS, "events", "--field-selector", "reason=Unhealthy,involvedObject.name="+pod)
		if !strings.Contains(msgs, "Readiness probe failed: HTTP probe failed with statuscode: 500") {
			return fmt.Errorf("events: %q", msgs)
		}
		return nil
	})
}

func TestConfigMapChangeRollsRealPods(t *testing.T) {
	ensureAppNamespace(t)
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greeting, namespace: " + appNS + "}\ndata: {greeting: %s}\n"
	apply(t, fmt.Sprintf(configMap, "hello"))
	apply(t, webApp("cfg", 2, "  env:\n  - name: GREETING\n    valueFrom: {configMapKeyRef: {name: greeting, key: greeting}}\n"))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/cfg")
	before := podNames(t, "cfg")
	url := serviceURL(t, "cfg")
	// kube-proxy writes the new Service's rules shortly after its endpoints exist: poll.
	eventually(t, 30*time.Second, "the pods say hello through the Service", func() error {
		r, err := getReply(url)
		if err == nil && r.Greeting != "hello" {
			t.Fatalf("before the change: %+v", r)
		}
		return err
	})
	apply(t, fmt.Sprintf(configMap, "bonjour"))
	eventually(t, 2*time.Minute, "only new pods, all saying bonjour", func() error {
		pods := podNames(t, "cfg")
		for _, p := range pods {
			if slices.Contains(before, p) {
				return fmt.Errorf("old pod %s still there (pods %v)", p, pods)
			}
		}
		for range 6 {
			r, err := getReply(url)
			if err != nil {
				return err
			}
			if r.Greeting != "bonjour" || !slices.Contains(pods, r.Hostname) {
				return fmt.Errorf("answer %+v (pods %v)", r, pods)
			}
		}
		return nil
	})
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/cfg")
}

func TestMetricsOverHTTPSNeedAnAuthorizedToken(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, `apiVersion: v1
kind: ServiceAccount
metadata: {name: scraper, namespace: `+appNS+`}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: stranger, namespace: `+appNS+`}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: webapp-realnode-scraper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: webapp-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: scraper, namespace: `+appNS+`}]
`)
	url := "https://" + jsonpath(t, "{.status.podIP}", "-n", operatorNS, "pod/"+operatorPods(t, 2)[0]) + ":8443/metrics"
	cases := []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token without the metrics-reader role", strings.TrimSpace(kubectl(t, "create", "token", "-n", appNS, "stranger")), http.StatusForbidden},
		{"the scraper's token", strings.TrimSpace(kubectl(t, "create", "token", "-n", appNS, "scraper")), http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, 30*time.Second, "GET /metrics", func() error {
				code, body, err := get(url, tc.token)
				if err != nil {
					return err
				}
				if code != tc.want {
					return fmt.Errorf("status %d, want %d", code, tc.want)
				}
				if code == http.StatusOK && !strings.Contains(body, "controller_runtime_reconcile_total") {
					return fmt.Errorf("no controller_runtime_reconcile_total in the metrics")
				}
				return nil
			})
		})
	}
}

func TestKilledOperatorPodIsReplacedAndTheNewOneLeads(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, webApp("failover", 1, ""))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/failover")
	old, err := leader(t)
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "delete", "pod", "-n", operatorNS, old, "--grace-period=0", "--force", "--wait=false")
	eventually(t, 2*time.Minute, "another operator pod holds the Lease", func() error {
		next, err := leader(t)
		if err != nil {
			return err
		}
		if next == old {
			return fmt.Errorf("still %s", old)
		}
		return nil
	})
	operatorPods(t, 2)
	// The new leader reconciles: a spec change reaches the Deployment and the pods.
	kubectl(t, "patch", "webapp", "-n", appNS, "failover", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/failover")
	jsonpathEquals(t, 30*time.Second, "2", "{.status.availableReplicas}", "-n", appNS, "deployment/failover")
	if len(podNames(t, "failover")) != 2 {
		t.Fatalf("pods of failover: %v", podNames(t, "failover"))
	}
}

// operatorPods are the names of the operator's n running and ready pods (ones being deleted are skipped).
func operatorPods(t *testing.T, n int) []string { //nolint:unparam // the count is what is waited for
	t.Helper()
	var names []string
	eventually(t, 3*time.Minute, fmt.Sprintf("%d running operator pods", n), func() error {
		out, err := kubectlErr("get", "pods", "-n", operatorNS, "-l", "app.kubernetes.io/name=webapp-operator",
			"-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.deletionTimestamp}/{.metadata.name}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return err
		}
		var live []string
		for _, l := range strings.Fields(out) {
			if strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/True") {
				live = append(live, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/True"))
			}
		}
		if len(live) != n {
			return fmt.Errorf("running and ready operator pods: %q", out)
		}
		names = live
		return nil
	})
	return names
}

// leader is the operator pod that holds the leader-election Lease.
func leader(t *testing.T) (string, error) {
	t.Helper()
	for _, pod := range operatorPods(t, 2) {
		if holds(pod) == nil {
			return pod, nil
		}
	}
	return "", fmt.Errorf("no running operator pod holds the Lease")
}

// holds is nil when pod holds the leader-election Lease (controller-runtime's identity is POD-NAME_UUID).
func holds(pod string) error {
	holder, err := kubectlErr("get", "lease", "-n", operatorNS, leaseName, "-o", "jsonpath={.spec.holderIdentity}")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(holder, pod+"_") {
		return fmt.Errorf("the Lease is held by %q, not %s", holder, pod)
	}
	return nil
}
