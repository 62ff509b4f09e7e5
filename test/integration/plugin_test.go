package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/plugin"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// kubectlWebApp runs the plugin in this process against the test API server, as a user of system:masters, and
// returns its exit code, stdout and stderr.
func kubectlWebApp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	user, err := testEnv.AddUser(envtest.User{Name: "plugin-user", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := plugin.Main(append([]string{"--kubeconfig", kubeconfig}, args...), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/plugin/name.golden and docs/kubectl-webapp.md (testutil.Golden).
func golden(t *testing.T, name, got string) {
	t.Helper()
	testutil.Golden(t, cluster.RepoRoot(), name, got)
}

// kubectl webapp get, explain and owners over a WebApp the operator converged, with a Service label another manager holds
// too and an annotation only it holds: their outputs as the golden files say, from the real API server's objects
// and managed fields.
func TestPluginShowsTheTreeAndTheOwners(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       webappv2.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](3), Ports: []webappv2.Port{{Name: "http", Port: 8080}}},
	}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the WebApp's status observes its spec", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return err
		}
		if app.Status.ObservedGeneration != app.Generation || meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady) == nil {
			return fmt.Errorf("status %+v", app.Status)
		}
		return nil
	})
	// Another manager applies one of our labels with our value (shared), and an annotation of its own.
	svc := corev1ac.Service("web", ns).
		WithLabels(map[string]string{webappv2.LabelName: webappv2.AppName}).
		WithAnnotations(map[string]string{"platform.example.com/team": "payments"})
	if err := k8s.Apply(ctx, svc, client.FieldOwner("platform-team")); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := kubectlWebApp(t, "-n", ns, "get", "web")
	if code != 0 || errOut != "" {
		t.Fatalf("get: exit %d, stderr %q", code, errOut)
	}
	golden(t, "get", out)

	code, out, errOut = kubectlWebApp(t, "-n", ns, "explain", "web")
	if code != 0 || errOut != "" {
		t.Fatalf("explain: exit %d, stderr %q", code, errOut)
	}
	golden(t, "explain", out)

	code, out, errOut = kubectlWebApp(t, "-n", ns, "owners", "web", "--child", "Service")
	if code != 0 || errOut != "" {
		t.Fatalf("owners: exit %d, stderr %q", code, errOut)
	}
	golden(t, "owners-service", out)
	if !strings.Contains(out, ".metadata.labels.app.kubernetes.io/name") {
		t.Errorf("owners does not list the shared label:\n%s", out)
	}

	code, out, _ = kubectlWebApp(t, "-n", ns, "get", "web", "-o", "json")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("get -o json: exit %d, output %q", code, out)
	}

	// A WebApp that is not there: kubectl's words and exit code.
	code, _, errOut = kubectlWebApp(t, "-n", ns, "get", "nothere")
	if code != 1 || !strings.HasPrefix(errOut, "Error from server (NotFound): ") {
		t.Errorf("get of a missing WebApp: exit %d, stderr %q; want 1 and kubectl's NotFound words", code, errOut)
	}
}

// applyManifest applies a WebApp manifest as `kubectl apply --server-side` would (field manager kubectl).
func applyManifest(t *testing.T, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl")); err != nil {
		t.Fatal(err)
	}
}

// converged waits until the operator reported on the current generation of the WebApp web, and returns it.
func converged(t *testing.T, ns string) *webappv2.WebApp {
	t.Helper()
	app := &webappv2.WebApp{}
	testutil.Eventually(t, time.Minute, "the status observes the spec", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, app); err != nil {
			return err
		}
		if app.Status.ObservedGeneration != app.Generation {
			return fmt.Errorf("status of generation %d, spec %d", app.Status.ObservedGeneration, app.Generation)
		}
		return nil
	})
	return app
}

// kubectl webapp plan predicts, from dry runs, exactly what the operator then writes: for each child, the fields
// that change (the next apply's changes, compared field by field with the objects before and after), and "pods
// restart" exactly when the pod template moves. A refused manifest exits 1 with the API server's words; nothing is
// ever written.
func TestPluginPlanPredictsTheNextApply(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	manifest := func(image string, replicas int) string {
		return fmt.Sprintf("apiVersion: example.com/v2\nkind: WebApp\nmetadata: {name: web, namespace: %s}\nspec: {image: %q, replicas: %d, ports: [{name: http, port: 8080}]}\n", ns, image, replicas)
	}
	applyManifest(t, manifest("nginx:1.27", 2))
	converged(t, ns)
	cases := []struct {
		name     string
		image    string
		replicas int
		restart  bool
		// changed are fields the plan must name for the Deployment (it names what the dry run says; these are
		// the ones the change is about).
		changed []string
		// golden names the golden file of the plan's text ("": none).
		golden string
	}{
		{"a new image", "nginx:1.28", 2, true, []string{".spec.template.spec.containers[0].image"}, "plan-image"},
		{"more replicas", "nginx:1.28", 3, false, []string{".spec.replicas"}, "plan-replicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "web.yaml")
			if err := os.WriteFile(file, []byte(manifest(tc.image, tc.replicas)), 0o600); err != nil {
				t.Fatal(err)
			}
			before := converged(t, ns)
			children := map[string]client.Object{}
			for _, obj := range controller.ChildObjects(before) {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err == nil {
					children[kindName(obj)] = obj
				}
			}
			code, out, errOut := kubectlWebApp(t, "-n", ns, "plan", "-f", file, "-o", "json")
			if code != 0 || errOut != "" {
				t.Fatalf("plan: exit %d, stderr %q", code, errOut)
			}
			var p plugin.Plan
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if code, text, _ := kubectlWebApp(t, "-n", ns, "plan", "-f", file); code != 0 {
				t.Errorf("plan as text: exit %d", code)
			} else {
				golden(t, tc.golden, text)
			}
			// Nothing was written.
			if again := converged(t, ns); again.ResourceVersion != before.ResourceVersion {
				t.Fatalf("plan wrote the WebApp: resourceVersion %s, was %s", again.ResourceVersion, before.ResourceVersion)
			}
			predicted := map[string]plugin.ChildPlan{}
			for _, c := range p.Children {
				predicted[c.Kind+"/"+c.Name] = c
			}
			dep := predicted["Deployment/web"]
			if dep.PodsRestart != tc.restart {
				t.Errorf("Deployment: pods restart %v, want %v:\n%s", dep.PodsRestart, tc.restart, out)
			}
			for _, f := range tc.changed {
				if !slices.ContainsFunc(dep.Changes, func(c plugin.Change) bool { return c.Field == f }) {
					t.Errorf("the plan does not name %s among the Deployment's changes: %+v", f, dep.Changes)
				}
			}
			// Apply it, and compare what the operator really wrote with the prediction, child by child.
			applyManifest(t, manifest(tc.image, tc.replicas))
			after := converged(t, ns)
			for key, obj := range children {
				now := obj.DeepCopyObject().(client.Object)
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), now); err != nil {
					t.Fatal(err)
				}
				got := plugin.Diff(obj, now)
				want := predicted[key].Changes
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: the operator changed %+v; the plan said %+v", key, got, want)
				}
			}
			if before.Status.Canary != nil || after.Status.Canary != nil {
				t.Errorf("no canary strategy, but a canary status")
			}
		})
	}
	// The same change written through v1 (the manifests' examples are): planned as the operator reads it.
	v1 := filepath.Join(t.TempDir(), "v1.yaml")
	if err := os.WriteFile(v1, []byte(fmt.Sprintf("apiVersion: example.com/v1\nkind: WebApp\nmetadata: {name: web, namespace: %s}\nspec: {image: nginx:1.29, replicas: 3, port: 8080}\n", ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "plan", "-f", v1); code != 0 || !strings.Contains(out, `"nginx:1.28" -> "nginx:1.29"`) || !strings.Contains(out, "its pods are replaced") {
		t.Errorf("plan of a v1 manifest: exit %d, stderr %q, output:\n%s", code, errOut, out)
	}
	// A manifest the API server refuses: its words, exit code 1, nothing written.
	file := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(file, []byte(manifest("nginx:1.28", 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := converged(t, ns)
	code, out, errOut := kubectlWebApp(t, "-n", ns, "plan", "-f", file)
	if code != 1 || !strings.Contains(out, "spec.replicas") || !strings.Contains(errOut, "refuses") {
		t.Errorf("plan of replicas 0: exit %d, stdout %q, stderr %q; want 1 and the API server's words on spec.replicas", code, out, errOut)
	}
	if again := converged(t, ns); again.ResourceVersion != before.ResourceVersion {
		t.Errorf("a refused plan wrote the WebApp")
	}
}

// kindName is "Kind/name" of a typed object.
func kindName(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:] + "/" + obj.GetName()
}

// TestAPersonsActionsOnAGatedCanary (issue 51, item 1): a step's gate holds the canary, saying since when and for
// whom, until kubectl webapp promote passes it; abort rolls the canary back at once (while it is being promoted too: the
// stable Deployment goes back to the version it ran) and retry starts it again.
// Each is the user's own annotation (the operator writes none of it, and no spec), acted on once.
func TestAPersonsActionsOnAGatedCanary(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	canaryStarted(t, ns, &webappv2.CanarySpec{
		Steps: []webappv2.CanaryStep{{Weight: 50, Gate: &webappv2.CanaryGate{}}, {Weight: 60, Gate: &webappv2.CanaryGate{}}},
	})
	held := status(t, ns, "held at the first step's gate", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "Canary" && c.Step == 0 && c.GateSince != nil
	})
	generation := held.Generation
	if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil || !strings.Contains(ready.Message, "its gate waits for a person since") {
		t.Errorf("Ready does not say the gate waits for a person: %+v", ready)
	}
	code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web")
	if code != 0 || !strings.Contains(out, "its gate waits for a person since") || !strings.Contains(out, "kubectl webapp promote web") {
		t.Errorf("explain at a gate: exit %d, %s%s", code, out, errOut)
	}

	code, out, errOut = kubectlWebApp(t, "-n", ns, "promote", "web")
	if code != 0 || !strings.Contains(out, webappv2.AnnotationAction) {
		t.Fatalf("kubectl webapp promote: exit %d, %s%s", code, out, errOut)
	}
	status(t, ns, "the second step, held at its gate", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "Canary" && c.Step == 1 && c.GateSince != nil
	})
	markAvailable(t, ns, "web-canary")

	code, _, errOut = kubectlWebApp(t, "-n", ns, "abort", "web")
	if code != 0 {
		t.Fatalf("kubectl webapp abort: exit %d, %s", code, errOut)
	}
	rolled := status(t, ns, "rolled back by the abort", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "RolledBack" && c.Reason == webappv2.ReasonAborted
	})
	failed := rolled.Status.Canary.FailedRevision
	if code, _, errOut := kubectlWebApp(t, "-n", ns, "promote", "web"); code != 1 || !strings.Contains(errOut, "no canary to promote: it is RolledBack") {
		t.Errorf("kubectl webapp promote after a rollback: exit %d, %q; want 1 and why", code, errOut)
	}

	code, _, errOut = kubectlWebApp(t, "-n", ns, "retry", "web")
	if code != 0 {
		t.Fatalf("kubectl webapp retry: exit %d, %s", code, errOut)
	}
	status(t, ns, "the rolled-back version's canary again", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "Canary" && c.CanaryRevision == failed && c.FailedRevision == ""
	})
	testutil.Eventually(t, wait10s, "the canary Deployment again", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, "web-canary")
	status(t, ns, "held at the first gate again", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	promoted := status(t, ns, "the WebApp", func(*webappv2.CanaryStatus) bool { return true })
	if promoted.Generation != generation {
		t.Errorf("the actions changed the generation %d to %d: they are metadata, never the spec", generation, promoted.Generation)
	}
	for _, f := range promoted.ManagedFields {
		if f.Manager == webappv2.FieldManager && f.Subresource == "" {
			t.Errorf("the operator wrote the WebApp itself (not its status): %s", f.FieldsV1.GetRawString())
		}
	}
	// All the way from the gate.
	if code, _, errOut := kubectlWebApp(t, "-n", ns, "promote", "web", "--full"); code != 0 {
		t.Fatalf("kubectl webapp promote --full: exit %d, %s", code, errOut)
	}
	status(t, ns, "promoting all the way", func(c *webappv2.CanaryStatus) bool { return c.Phase == "Promoting" })
	stableImage(t, ns, "web", "shop:2", "the stable Deployment rolling to the promoted version")
	// Aborted while being promoted: the stable Deployment goes back to the version it ran (its record kept it).
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "abort", "web"); code != 0 {
		t.Fatalf("kubectl webapp abort while promoting: exit %d, %s%s", code, out, errOut)
	}
	aborted := status(t, ns, "rolled back while being promoted", func(c *webappv2.CanaryStatus) bool { return c.Phase == "RolledBack" })
	if c := aborted.Status.Canary; c.Reason != webappv2.ReasonAborted || !strings.Contains(c.Message, "while being promoted") {
		t.Errorf("rolled back with %s: %s, want Aborted while being promoted", c.Reason, c.Message)
	}
	stableImage(t, ns, "web", "shop:1", "the stable Deployment back on the version it ran")
}
