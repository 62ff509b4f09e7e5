package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/testutil"
)

// applyV2 applies the v2 WebApp canary/web as kubectl would from a file.
func applyV2(t *testing.T, spec string) {
	t.Helper()
	doc := fmt.Sprintf(`{"apiVersion":"example.com/v2","kind":"WebApp","metadata":{"name":"web","namespace":"canary"},"spec":%s}`, spec)
	if _, err := kubectlIn(doc, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// canarySpec is a v2 spec with a canary strategy whose first step pauses for pause seconds.
func canarySpec(image string, pause int, checks string) string {
	return fmt.Sprintf(`{"image":%q,"replicas":4,"ports":[{"name":"http","port":8080}],"rollout":{"canary":{"steps":[{"weight":25,"pauseSeconds":%d},{"weight":50,"pauseSeconds":1}]%s}}}`,
		image, pause, checks)
}

// waitQuiet waits for n resyncs of mgr, and returns the objects' resourceVersions before and after.
func waitQuiet(t *testing.T, mgr *manager, n float64, ns string, objs []string) (before, after string) {
	t.Helper()
	before = versionsIn(t, ns, objs)
	start := mgr.metric(t, "webapp_operator_resyncs_total", nil)
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%v resyncs", n), func(context.Context) error {
		if got := mgr.metric(t, "webapp_operator_resyncs_total", nil) - start; got < n {
			return fmt.Errorf("%v resyncs so far", got)
		}
		return nil
	})
	return before, versionsIn(t, ns, objs)
}

// TestCanary walks a canary through its steps on kwok's pods with the real Deployment controller: the stable
// Deployment keeps its version until promotion, a pause costs no write (nor does a restart in it), a check that
// cannot be evaluated rolls the canary back, the failed version applied again does not start again, and a new one
// does.
func TestCanary(t *testing.T) {
	const ns = "canary"
	outer := t
	setup(t, ns)
	// Gone when the test ends: other tests count the cluster's WebApps in the operator's metrics.
	t.Cleanup(func() {
		if out, err := kubectlIn("", "delete", "namespace", ns, "--wait=true", "--timeout=60s"); err != nil {
			t.Errorf("deleting namespace %s: %v %s", ns, err, out)
		}
	})
	mgr := startManager(t, "canary-manager-1", "--requeue-after=2s")
	applyV2(t, canarySpec("app:1", 3600, ""))
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
	stable := kubectl(t, "get", "-n", ns, "webapp/web", "-o", "jsonpath={.status.canary.phase}/{.status.canary.stableRevision}")
	if !strings.HasPrefix(stable, "Stable/") || len(stable) != len("Stable/")+16 {
		t.Fatalf("status.canary of the first version: %q, want Stable/<revision>", stable)
	}
	first := strings.TrimPrefix(stable, "Stable/")
	jsonpathEquals(t, "-n="+ns+" deployment/web", `{.metadata.annotations.webapp\.example\.com/revision}`, first)

	t.Run("a new version runs beside the stable one, which keeps its pods", func(t *testing.T) {
		applyV2(t, canarySpec("app:2", 3600, ""))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.weight}=25", "--timeout=60s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" webapp/web", `{.status.canary.phase}/{.status.canary.step}/{.status.canary.weight}/{.status.conditions[?(@.type=="Ready")].reason}`,
			"Canary//25/Canary")
		// Without a Gateway the split is by replicas behind the one Service: 2 canary pods beside 4 stable ones.
		jsonpathEquals(t, "-n="+ns+" deployment/web-canary", "{.spec.replicas}/{.status.readyReplicas}/{.spec.template.spec.containers[0].image}", "2/2/app:2")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.spec.replicas}/{.spec.template.spec.containers[0].image}", "4/app:1")
	})

	objs := []string{"webapp/web", "deployment/web", "deployment/web-canary", "service/web"}
	t.Run("a pause costs no write, and a restart in it none either", func(t *testing.T) {
		if before, after := waitQuiet(t, mgr, 3, ns, objs); before != after {
			t.Errorf("writes while the step pauses:\nbefore %s\nafter  %s", before, after)
		}
		mgr.stop(t)
		// Started for the rest of the test (its cleanup the test's, not this step's).
		mgr = startManager(outer, "canary-manager-2", "--requeue-after=2s")
		if before, after := waitQuiet(t, mgr, 3, ns, objs); before != after {
			t.Errorf("writes after a restart mid-pause:\nbefore %s\nafter  %s", before, after)
		}
		jsonpathEquals(t, "-n="+ns+" webapp/web", "{.status.canary.phase}/{.status.canary.step}", "Canary/")
	})

	t.Run("a shorter pause lets it through the steps to promotion", func(t *testing.T) {
		// The pause is not part of the pods' template: the same canary goes on.
		applyV2(t, canarySpec("app:2", 1, ""))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.phase}=Stable", "--timeout=90s", "webapp/web")
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
		waitDeleted(t, ns, "deployment/web-canary")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.spec.replicas}/{.spec.template.spec.containers[0].image}", "4/app:2")
		if rev := kubectl(t, "get", "-n", ns, "webapp/web", "-o", "jsonpath={.status.canary.stableRevision}"); rev == first {
			t.Errorf("stableRevision still the first version's after promotion")
		}
		events := kubectl(t, "get", "events", "-n", ns, "--field-selector=involvedObject.name=web", "-o", "jsonpath={range .items[*]}{.reason} {end}")
		for _, want := range []string{"CanaryStarted", "CanaryStep", "Promoting", "Promoted"} {
			if !strings.Contains(events, want) {
				t.Errorf("no %s event among %s", want, events)
			}
		}
	})

	refused := `,"checks":[{"name":"errors","prometheus":{"address":"http://127.0.0.1:1","query":"vector(0)"},"max":"0.01"}],"checkIntervalSeconds":1`
	t.Run("a check that cannot be evaluated rolls the canary back", func(t *testing.T) {
		applyV2(t, canarySpec("app:3", 3600, refused))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.phase}=RolledBack", "--timeout=60s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" webapp/web",
			`{.status.canary.reason}/{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}/{.status.conditions[?(@.type=="Progressing")].status}`,
			"CheckFailed/False/RolledBack/False")
		if msg := kubectl(t, "get", "-n", ns, "webapp/web", "-o", "jsonpath={.status.canary.message}"); !strings.Contains(msg, "check errors") || !strings.Contains(msg, "connection refused") {
			t.Errorf("status.canary.message %q does not say which check failed and why", msg)
		}
		waitDeleted(t, ns, "deployment/web-canary")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.spec.template.spec.containers[0].image}", "app:2")
	})

	t.Run("the failed version applied again stays rolled back, at no write", func(t *testing.T) {
		applyV2(t, canarySpec("app:3", 3600, refused))
		objs := []string{"webapp/web", "deployment/web"}
		if before, after := waitQuiet(t, mgr, 3, ns, objs); before != after {
			t.Errorf("writes while rolled back:\nbefore %s\nafter  %s", before, after)
		}
		if out, err := kubectlIn("", "get", "-n", ns, "deployment/web-canary"); err == nil {
			t.Errorf("the failed version started again: %s", out)
		}
	})

	t.Run("a new version starts a new canary", func(t *testing.T) {
		applyV2(t, canarySpec("app:4", 1, ""))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.phase}=Stable", "--timeout=90s", "webapp/web")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.spec.template.spec.containers[0].image}", "app:4")
		jsonpathEquals(t, "-n="+ns+" webapp/web", "{.status.canary.failedRevision}", "")
	})
}

// versionsIn are the resourceVersions of objs in ns.
func versionsIn(t *testing.T, ns string, objs []string) string {
	t.Helper()
	var parts []string
	for _, o := range objs {
		parts = append(parts, o+"@"+kubectl(t, "get", "-n", ns, o, "-o", "jsonpath={.metadata.resourceVersion}"))
	}
	return strings.Join(parts, " ")
}
