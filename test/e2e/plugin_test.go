package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/example/webapp-operator/plugin"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// kubectlWebApp runs kubectl-webapp in this process against the local cluster and returns its exit code, stdout
// and stderr.
func kubectlWebApp(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := plugin.Main(append([]string{"--kubeconfig", lc.Kubeconfig}, args...), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// pluginSays runs kubectl-webapp until its output is the golden file name's, for 30 s at most
// (testutil.GoldenEventually): the controllers' counts (a PodDisruptionBudget's) follow the pods a moment later.
func pluginSays(t *testing.T, name string, args ...string) {
	t.Helper()
	testutil.GoldenEventually(t, cluster.RepoRoot(), name, 30*time.Second, func() (string, error) {
		code, out, errOut := kubectlWebApp(args...)
		if code != 0 || errOut != "" {
			return "", fmt.Errorf("kubectl webapp %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return out, nil
	})
}

// The plugin over what only a whole cluster shows: a canary mid-step and rolled back (the Deployment controller
// runs both versions' pods), a count the HorizontalPodAutoscaler controller decided, and a claim kept with its
// data after its WebApp was deleted. Each output is a golden file, and docs/kubectl-webapp.md shows it.
func TestPluginOnTheLocalCluster(t *testing.T) {
	const ns = "plugin"
	setup(t, ns)
	t.Cleanup(func() {
		if out, err := kubectlIn("", "delete", "namespace", ns, "--wait=true", "--timeout=60s"); err != nil {
			t.Errorf("deleting namespace %s: %v %s", ns, err, out)
		}
	})
	startManager(t, "plugin-manager", "--requeue-after=2s")
	apply := func(name, spec string) {
		t.Helper()
		doc := fmt.Sprintf(`{"apiVersion":"example.com/v2","kind":"WebApp","metadata":{"name":%q,"namespace":%q},"spec":%s}`, name, ns, spec)
		if _, err := kubectlIn(doc, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	canary := func(image, checks string) string {
		return fmt.Sprintf(`{"image":%q,"replicas":4,"ports":[{"name":"http","port":8080}],"rollout":{"canary":{"steps":[{"weight":25,"pauseSeconds":3600},{"weight":50,"pauseSeconds":1}]%s}}}`, image, checks)
	}

	t.Run("a canary mid-step", func(t *testing.T) {
		apply("web", canary("app:1", ""))
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "webapp/web")
		apply("web", canary("app:2", ""))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.weight}=25", "--timeout=60s", "webapp/web")
		// Both versions' pods ready, so the output is the same every run.
		jsonpathEquals(t, "-n="+ns+" deployment/web-canary", "{.status.readyReplicas}", "2")
		jsonpathEquals(t, "-n="+ns+" deployment/web", "{.status.readyReplicas}", "4")
		jsonpathEquals(t, "-n="+ns+" pdb/web", "{.status.currentHealthy}", "6")
		pluginSays(t, "cluster-canary-get", "-n", ns, "get", "web")
		pluginSays(t, "cluster-canary-explain", "-n", ns, "explain", "web")
	})

	t.Run("a canary rolled back", func(t *testing.T) {
		refused := `,"checks":[{"name":"errors","prometheus":{"address":"http://127.0.0.1:1","query":"vector(0)"},"max":"0.01"}],"checkIntervalSeconds":1`
		apply("web", canary("app:3", refused))
		kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.canary.phase}=RolledBack", "--timeout=60s", "webapp/web")
		waitDeleted(t, ns, "deployment/web-canary")
		jsonpathEquals(t, "-n="+ns+" webapp/web", "{.status.availableReplicas}", "4")
		jsonpathEquals(t, "-n="+ns+" pdb/web", "{.status.currentHealthy}", "4")
		pluginSays(t, "cluster-rollback-get", "-n", ns, "get", "web")
		pluginSays(t, "cluster-rollback-explain", "-n", ns, "explain", "web")
	})

	t.Run("a count the HPA decided", func(t *testing.T) {
		// The HPA's floor is above the WebApp's first count: kube-controller-manager's HPA controller scales the
		// Deployment to it (no metrics served here, so it says so).
		apply("scaled", `{"image":"app:1","ports":[{"name":"http","port":8080}],"container":{"resources":{"requests":{"cpu":"100m"}}},"autoscaling":{"minReplicas":3,"maxReplicas":5}}`)
		jsonpathEquals(t, "-n="+ns+" webapp/scaled", `{.status.replicasSetBy}/{.status.conditions[?(@.type=="Ready")].status}`, "HorizontalPodAutoscaler/True")
		// Someone scales the Deployment below the floor: the HPA, not the operator, brings it back.
		kubectl(t, "scale", "-n", ns, "deployment/scaled", "--replicas=1")
		testutil.Eventually(t, time.Minute, "the HPA scales back to its floor", func(context.Context) error {
			out, err := kubectlIn("", "get", "-n", ns, "hpa/scaled", "-o", `jsonpath={.status.desiredReplicas}/{.status.currentReplicas}/{.status.conditions[?(@.type=="ScalingActive")].status}`)
			if err != nil {
				return err
			}
			if out != "3/3/False" {
				return fmt.Errorf("desiredReplicas/currentReplicas/ScalingActive = %s", out)
			}
			return nil
		})
		jsonpathEquals(t, "-n="+ns+" deployment/scaled", "{.spec.replicas}/{.status.readyReplicas}", "3/3")
		jsonpathEquals(t, "-n="+ns+" webapp/scaled", `{.status.availableReplicas}/{.status.conditions[?(@.type=="Ready")].status}`, "3/True")
		jsonpathEquals(t, "-n="+ns+" pdb/scaled", "{.status.currentHealthy}", "3")
		pluginSays(t, "cluster-hpa-get", "-n", ns, "get", "scaled")
		pluginSays(t, "cluster-hpa-explain", "-n", ns, "explain", "scaled")
	})

	t.Run("a claim kept after its WebApp was deleted", func(t *testing.T) {
		apply("data", `{"image":"app:1","ports":[{"name":"http","port":8080}],"volumes":[{"name":"data","claim":{"size":"1Gi","storageClassName":"manual"}}],"container":{"volumeMounts":[{"name":"data","mountPath":"/data"}]}}`)
		jsonpathEquals(t, "-n="+ns+" pvc/data", "{.metadata.ownerReferences[0].kind}", "WebApp")
		kubectl(t, "delete", "-n", ns, "webapp/data", "--wait=true", "--timeout=60s")
		code, out, errOut := kubectlWebApp("-n", ns, "get", "data")
		if code != 1 || out != "" {
			t.Fatalf("kubectl webapp get of a deleted WebApp: exit %d, stdout %q", code, out)
		}
		testutil.Golden(t, cluster.RepoRoot(), "cluster-claim-kept", errOut)
	})
}
