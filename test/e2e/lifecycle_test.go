package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// setup installs the CRD (idempotent) and creates the test's namespace.
func setup(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(cluster.RepoRoot(), "manifests", "crd", "example.com_webapps.yaml"))
	waitEstablished(t, "crd/webapps.example.com")
	kubectl(t, "create", "namespace", ns)
}

// applyWebApp applies a WebApp as kubectl would from a file.
func applyWebApp(t *testing.T, ns, name, spec string) {
	t.Helper()
	doc := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":%q,"namespace":%q},"spec":%s}`, name, ns, spec)
	if _, err := kubectlIn(doc, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

func TestRolloutConditions(t *testing.T) {
	const ns = "rollout"
	setup(t, ns)
	mgr := startManager(t, "rollout-manager-1", "--requeue-after=2s")
	applyWebApp(t, ns, "web", `{"image":"nginx:1.25","replicas":2,"progressDeadlineSeconds":5}`)
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")

	t.Run("kubectl wait does not accept a Ready of an older generation", func(t *testing.T) {
		mgr.stop(t)
		kubectl(t, "patch", "-n", ns, "webapp", "web", "--type=merge", "-p", `{"spec":{"image":"nginx:1.27"}}`)
		// Nobody has looked at generation 2 yet: the Ready=True of generation 1 must not satisfy the wait, which
		// must run into its timeout (any other failure, a NotFound say, would prove nothing).
		out, err := kubectlIn("", "wait", "-n", ns, "--for=condition=Ready", "--timeout=3s", "webapp/web")
		if err == nil || !strings.Contains(err.Error(), "timed out waiting for the condition on webapps/web") {
			t.Fatalf("kubectl wait on a stale Ready: err = %v (%s), want a timeout", err, out)
		}
	})
	startManager(t, "rollout-manager-2", "--requeue-after=2s")
	t.Run("the new generation's Ready satisfies it once rolled out", func(t *testing.T) {
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" webapp/web", `{.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].observedGeneration}`, "2 2")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.spec.template.spec.containers[0].image}", "nginx:1.27")
	})

	t.Run("a rollout that cannot progress reports ProgressDeadlineExceeded", func(t *testing.T) {
		kubectl(t, "patch", "-n", ns, "webapp", "web", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"image":%q}}`, cluster.NeverReadyImage))
		jsonpathEquals(t, "-n="+ns+" webapp/web", `{.status.conditions[?(@.type=="Progressing")].status}`, "True")
		kubectl(t, "wait", "-n", ns, `--for=jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=ProgressDeadlineExceeded`, "--timeout=90s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" webapp/web",
			`{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}/{.status.conditions[?(@.type=="Progressing")].status}`,
			"False/ProgressDeadlineExceeded/False")
	})

	t.Run("a good image recovers", func(t *testing.T) {
		kubectl(t, "patch", "-n", ns, "webapp", "web", "--type=merge", "-p", `{"spec":{"image":"nginx:1.25"}}`)
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=90s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" webapp/web", `{.status.conditions[?(@.type=="Progressing")].reason}`, "RolloutComplete")
	})
}

// childrenOrphaned waits until the WebApp is gone and its Deployment and Service still run, without an owner.
func childrenOrphaned(t *testing.T, ns, name string) {
	t.Helper()
	waitDeleted(t, ns, "webapp/"+name)
	for _, obj := range []string{"deployment/" + name, "service/" + name} {
		jsonpathEquals(t, "-n="+ns+" "+obj, "{.metadata.name} owners:{.metadata.ownerReferences}", name+" owners:")
	}
	jsonpathEquals(t, "-n="+ns+" deployment/"+name, "{.status.availableReplicas}", "1")
}

func TestDeletionPolicies(t *testing.T) {
	const ns = "deletion"
	setup(t, ns)
	mgr := startManager(t, "deletion-manager-1", "--requeue-after=2s")

	t.Run("Orphan keeps the children running", func(t *testing.T) {
		applyWebApp(t, ns, "keep", `{"image":"nginx:1.25","deletionPolicy":"Orphan"}`)
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/keep")
		jsonpathEquals(t, "-n="+ns+" webapp/keep", "{.metadata.finalizers}", `["example.com/finalizer"]`)
		kubectl(t, "delete", "-n", ns, "webapp", "keep")
		childrenOrphaned(t, ns, "keep")
	})

	t.Run("switching back to Delete removes the finalizer, and garbage collection the children", func(t *testing.T) {
		applyWebApp(t, ns, "switch", `{"image":"nginx:1.25","deletionPolicy":"Orphan"}`)
		jsonpathEquals(t, "-n="+ns+" webapp/switch", "{.metadata.finalizers}", `["example.com/finalizer"]`)
		applyWebApp(t, ns, "switch", `{"image":"nginx:1.25","deletionPolicy":"Delete"}`)
		jsonpathEquals(t, "-n="+ns+" webapp/switch", "{.metadata.finalizers}", "")
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/switch")
		kubectl(t, "delete", "-n", ns, "webapp", "switch")
		waitDeleted(t, ns, "deployment/switch", "service/switch")
	})

	t.Run("deleted while the operator is down, released when it starts", func(t *testing.T) {
		applyWebApp(t, ns, "down", `{"image":"nginx:1.25","deletionPolicy":"Orphan"}`)
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/down")
		jsonpathEquals(t, "-n="+ns+" webapp/down", "{.metadata.finalizers}", `["example.com/finalizer"]`)
		mgr.stop(t)
		kubectl(t, "delete", "-n", ns, "webapp", "down", "--wait=false")
		// The finalizer holds the WebApp (Terminating) until an operator releases the children.
		if ts := kubectl(t, "get", "-n", ns, "webapp/down", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			t.Fatal("WebApp has no deletionTimestamp after delete")
		}
		startManager(t, "deletion-manager-2", "--requeue-after=2s")
		childrenOrphaned(t, ns, "down")
	})
}

func TestLeaderElection(t *testing.T) {
	const ns = "leader"
	setup(t, ns)
	const lease = 6 * time.Second
	args := []string{"--requeue-after=2s", "--leader-elect", "--leader-election-namespace=kube-system",
		"--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	isLeader := func(m *manager) bool {
		return m.metric(t, "leader_election_master_status", map[string]string{"name": "webapp-operator.example.com"}) == 1
	}
	first := startManager(t, "leader-a", args...)
	testutil.Eventually(t, 30*time.Second, "a leads", func(context.Context) error {
		if !isLeader(first) {
			return fmt.Errorf("not leader yet")
		}
		return nil
	})
	second := startManager(t, "leader-b", args...)
	applyWebApp(t, ns, "web", `{"image":"nginx:1.25","replicas":2}`)
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
	if isLeader(second) || second.metric(t, "controller_runtime_reconcile_total", map[string]string{"controller": "webapp"}) != 0 ||
		second.metric(t, "webapp_operator_applies_total", map[string]string{"result": "sent"}) != 0 ||
		second.metric(t, "webapp_operator_resyncs_total", nil) != 0 {
		t.Fatalf("the non-leader reconciled, resynced or wrote")
	}

	// SIGKILL: the leader cannot release the lease; the other takes over once it expires.
	killed := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*lease, "b takes over", func(context.Context) error {
		if !isLeader(second) {
			return fmt.Errorf("not leader yet")
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("takeover %v after SIGKILL (lease duration %v)", took.Round(100*time.Millisecond), lease)
	// The lease must expire (lease duration after the last renewal the follower saw), then one of its retries
	// (1 s with up to 1.2x jitter) takes it: about lease + 2.2 s at worst, plus slack for a busy machine.
	if took > lease+8*time.Second {
		t.Errorf("takeover took %v, more than the lease duration %v plus 8s", took, lease)
	}
	kubectl(t, "scale", "-n", ns, "webapp", "web", "--replicas=4")
	jsonpathEquals(t, "-n="+ns+" webapp/web", "{.status.availableReplicas}", "4")
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
}

func TestConfigMapChangeRollsThePods(t *testing.T) {
	const ns = "config"
	setup(t, ns)
	startManager(t, "config-manager", "--requeue-after=30s")
	kubectl(t, "create", "configmap", "-n", ns, "cfg", "--from-literal=greeting=hello")
	kubectl(t, "create", "configmap", "-n", ns, "unrelated", "--from-literal=x=1")
	applyWebApp(t, ns, "web", `{"image":"nginx:1.25","replicas":2,"env":[{"name":"GREETING","valueFrom":{"configMapKeyRef":{"name":"cfg","key":"greeting"}}}]}`)
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
	replicaSets := func() string {
		return kubectl(t, "get", "replicasets", "-n", ns, "-l", "app.kubernetes.io/instance=web", "-o", "jsonpath={.items[*].metadata.name}")
	}
	before := replicaSets()
	if n := len(strings.Fields(before)); n != 1 {
		t.Fatalf("replica sets before: %q", before)
	}

	// An unrelated ConfigMap changes, then the referenced one: one new ReplicaSet, from the second.
	kubectl(t, "patch", "configmap", "-n", ns, "unrelated", "--type=merge", "-p", `{"data":{"x":"2"}}`)
	kubectl(t, "patch", "configmap", "-n", ns, "cfg", "--type=merge", "-p", `{"data":{"greeting":"bonjour"}}`)
	testutil.Eventually(t, time.Minute, "a new ReplicaSet", func(context.Context) error {
		if n := len(strings.Fields(replicaSets())); n != 2 {
			return fmt.Errorf("%d replica sets", n)
		}
		return nil
	})
	jsonpathEquals(t, "-n="+ns+" webapp/web", `{.status.conditions[?(@.type=="Progressing")].reason}`, "RolloutComplete")
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
	if n := len(strings.Fields(replicaSets())); n != 2 {
		t.Errorf("replica sets after: %q, want exactly one new", replicaSets())
	}
}

func TestExplainDescribesEveryField(t *testing.T) {
	setup(t, "explain")
	// Every field of both versions; v2, the preferred version, is what kubectl explains by default.
	for _, tc := range []struct {
		path   string
		args   []string
		fields []string
	}{
		{"webapp.spec", []string{"--api-version=example.com/v1"}, []string{"image", "replicas", "port", "progressDeadlineSeconds", "deletionPolicy", "command", "args", "env", "envFrom",
			"resources", "healthCheckPath", "readinessProbe", "livenessProbe", "imagePullSecrets", "imagePullPolicy", "service", "podLabels",
			"podAnnotations", "strategy", "revisionHistoryLimit", "podSecurity"}},
		{"webapp.spec", nil, []string{"image", "replicas", "ports", "container", "pod", "rollout", "service", "deletionPolicy"}},
		{"webapp.spec", []string{"--api-version=example.com/v2"}, []string{"image", "replicas", "ports", "container", "pod", "rollout", "service", "deletionPolicy"}},
		{"webapp.spec.ports", nil, []string{"name", "port"}},
		{"webapp.spec.container", nil, []string{"command", "args", "env", "envFrom", "resources", "imagePullPolicy", "healthCheckPath", "readinessProbe", "livenessProbe"}},
		{"webapp.spec.pod", nil, []string{"labels", "annotations", "imagePullSecrets", "security"}},
		{"webapp.spec.rollout", nil, []string{"maxSurge", "maxUnavailable", "revisionHistoryLimit", "progressDeadlineSeconds"}},
	} {
		out := kubectl(t, append([]string{"explain", tc.path}, tc.args...)...)
		for _, field := range tc.fields {
			i := strings.Index(out, "\n  "+field+"\t")
			if i < 0 {
				t.Errorf("kubectl explain %s %v has no field %s:\n%s", tc.path, tc.args, field, out)
				continue
			}
			// The line after the field's name is its description.
			rest := strings.SplitN(out[i+1:], "\n", 3)
			if len(rest) < 2 || strings.TrimSpace(rest[1]) == "" || strings.Contains(rest[1], "<no description>") {
				t.Errorf("%s.%s has no description in kubectl explain %v", tc.path, field, tc.args)
			}
		}
	}
}

// With --metrics-secure, /metrics answers over HTTPS only to callers the API server authenticates and
// authorizes for GET /metrics (the manifests bind webapp-operator-metrics-reader to a scraper).
func TestSecureMetrics(t *testing.T) {
	const ns = "metrics"
	setup(t, ns)
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(cluster.RepoRoot(), "manifests", "rbac", "metrics_reader_role.yaml"))
	kubectl(t, "create", "serviceaccount", "-n", ns, "scraper")
	kubectl(t, "create", "serviceaccount", "-n", ns, "stranger")
	kubectl(t, "create", "clusterrolebinding", "metrics-scraper", "--clusterrole=webapp-operator-metrics-reader", "--serviceaccount="+ns+":scraper")
	t.Cleanup(func() { _, _ = kubectlIn("", "delete", "clusterrolebinding", "metrics-scraper") })
	mgr := startManager(t, "metrics-manager", "--metrics-secure")
	scraper := strings.TrimSpace(kubectl(t, "create", "token", "-n", ns, "scraper"))
	stranger := strings.TrimSpace(kubectl(t, "create", "token", "-n", ns, "stranger"))
	get := func(token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+mgr.metricsAddr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The operator's certificate is self-signed (or mounted in a real deployment): not what is tested here.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// The metrics server may start listening after /readyz answers: poll until it does.
	testutil.Eventually(t, 30*time.Second, "the scraper reads the metrics", func(context.Context) error {
		code, body, err := get(scraper)
		switch {
		case err != nil:
			return err
		case code != http.StatusOK || !strings.Contains(body, "webapp_operator_applies_total") && !strings.Contains(body, "controller_runtime_reconcile_total"):
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server never issued", "forged." + scraper[:len(scraper)/2], http.StatusUnauthorized},
		{"a token without the reader role", stranger, http.StatusForbidden},
	} {
		if code, _, err := get(tc.token); err != nil || code != tc.want {
			t.Errorf("%s: status %d (%v), want %d", tc.who, code, err, tc.want)
		}
	}
	// Plain HTTP gets Go's "client sent an HTTP request to an HTTPS server", never the metrics.
	resp, err := http.Get("http://" + mgr.metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("plain HTTP: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: status %d, want 400", resp.StatusCode)
	}
}
