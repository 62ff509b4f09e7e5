package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/checks"
	"github.com/example/webapp-operator/test/testutil"
)

// canaryPhase waits until the WebApp's status.canary reads want (phase/step/weight) and returns the WebApp.
func canaryPhase(t *testing.T, ns, name, want string) *webappv2.WebApp {
	t.Helper()
	app := &webappv2.WebApp{}
	testutil.Eventually(t, 30*time.Second, "status.canary "+want, func(ctx context.Context) error {
		if err := get(ctx, ns, name, app); err != nil {
			return err
		}
		c := app.Status.Canary
		if c == nil {
			return fmt.Errorf("no status.canary")
		}
		if got := fmt.Sprintf("%s/%d/%d", c.Phase, c.Step, c.Weight); got != want {
			return fmt.Errorf("status.canary %s (%+v)", got, c)
		}
		return nil
	})
	return app
}

// canaryStarted creates the WebApp web (shop:1, 2 replicas, the canary strategy c) and takes it to a canary of
// shop:2 whose pods are available (there is no Deployment controller here: the test marks both Deployments so). It
// returns the WebApp as it is then (status.canary.stableRevision names the stable version).
func canaryStarted(t *testing.T, ns string, c *webappv2.CanarySpec) *webappv2.WebApp {
	t.Helper()
	const name = "web"
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}}, Rollout: webappv2.RolloutSpec{Canary: c},
	}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	startCanary(t, ns, name)
	if err := get(context.Background(), ns, name, app); err != nil {
		t.Fatal(err)
	}
	return app
}

// startCanary takes the WebApp name, created with a canary strategy at shop:1, to a canary of shop:2 whose pods are
// available.
func startCanary(t *testing.T, ns, name string) {
	t.Helper()
	waitChildren(t, ns, name)
	markAvailable(t, ns, name)
	canaryPhase(t, ns, name, "Stable/0/0")
	update(t, ns, name, &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, name+"-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, name+"-canary")
}

// backends are the backends of the route of the WebApp web as name=weight.
func backends(t *testing.T, ns string) string {
	t.Helper()
	return routeBackends(t, ns, "web")
}

// routeBackends are the backends of the WebApp name's route as name=weight.
func routeBackends(t *testing.T, ns, name string) string {
	t.Helper()
	route := &gwv1.HTTPRoute{}
	if err := get(context.Background(), ns, name, route); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range route.Spec.Rules[0].BackendRefs {
		out = append(out, fmt.Sprintf("%s=%d", b.Name, ptr.Deref(b.Weight, 1)))
	}
	return strings.Join(out, ",")
}

// TestCanaryOwnershipAndRestartAtEachStep walks a canary through a Gateway on the real API server, the Deployment
// controller's part played by the test: at each step a fresh operator sends nothing, the stable Deployment keeps
// its version until promotion, the route's weights follow the canary's readiness, fields other managers set on
// the canary's objects and the route stay theirs, and a Deployment a user made under the canary's name is never
// taken over.
func TestCanaryOwnershipAndRestartAtEachStep(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](4), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose:  &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 25, PauseSeconds: 1}, {Weight: 50, PauseSeconds: 3600}}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	stable := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary.StableRevision
	op = restartCostsNoWrites(t, op, ns)

	// Another manager's fields on the route: kept through every step.
	applyTheirs(t, "gateway.networking.k8s.io/v1", "HTTPRoute", ns, "web", "annotations", "team.example/owner", "shop")

	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	// A new version: the canary runs beside, no traffic until it is ready.
	{
		canaryPhase(t, ns, "web", "Canary/0/0")
		dep, canary := &appsv1.Deployment{}, &appsv1.Deployment{}
		testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", canary) })
		if err := get(ctx, ns, "web", dep); err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "shop:1" || dep.Annotations["webapp.example.com/revision"] != stable {
			t.Errorf("the stable Deployment runs %s (revision %s), want shop:1 (%s)", img, dep.Annotations["webapp.example.com/revision"], stable)
		}
		if img, n := canary.Spec.Template.Spec.Containers[0].Image, *canary.Spec.Replicas; img != "shop:2" || n != 1 {
			t.Errorf("the canary runs %d of %s, want 1 of shop:2", n, img)
		}
		if _, shared := canary.Spec.Template.Labels["app.kubernetes.io/instance"]; shared {
			t.Errorf("behind a route the canary's pods carry the stable Service's selector: %v", canary.Spec.Template.Labels)
		}
		if err := get(ctx, ns, "web-canary", &corev1.Service{}); err != nil {
			t.Errorf("the canary's Service: %v", err)
		}
		if got := backends(t, ns); got != "web=1" {
			t.Errorf("route backends %s before the canary is ready, want web=1", got)
		}
		// Another manager's label on the canary Deployment stays its own.
		applyTheirs(t, "apps/v1", "Deployment", ns, "web-canary", "labels", "team.example/cost-center", "42")
		op = restartCostsNoWrites(t, op, ns)
	}

	// Ready at each step: the route follows, the pause holds at no write.
	{
		canary := &appsv1.Deployment{}
		if err := get(ctx, ns, "web-canary", canary); err != nil || canary.Labels["team.example/cost-center"] != "42" {
			t.Errorf("another manager's label on the canary Deployment is gone: %v %v", canary.Labels, err)
		}
		markAvailable(t, ns, "web-canary")
		// Step 1 after the first's pause of 1 s: 2 canary pods for 50%, the route at 25% until they are ready.
		canaryPhase(t, ns, "web", "Canary/1/25")
		if got := backends(t, ns); got != "web=75,web-canary=25" {
			t.Errorf("route backends %s, want web=75,web-canary=25", got)
		}
		markAvailable(t, ns, "web-canary")
		paused := canaryPhase(t, ns, "web", "Canary/1/50")
		if paused.Status.Canary.StepStartedAt == nil {
			t.Fatalf("the pause has no start")
		}
		if got := backends(t, ns); got != "web=50,web-canary=50" {
			t.Errorf("route backends %s, want web=50,web-canary=50", got)
		}
		op = restartCostsNoWrites(t, op, ns)
		again := canaryPhase(t, ns, "web", "Canary/1/50")
		if !again.Status.Canary.StepStartedAt.Equal(paused.Status.Canary.StepStartedAt) {
			t.Errorf("the pause restarted: %v, was %v", again.Status.Canary.StepStartedAt, paused.Status.Canary.StepStartedAt)
		}
	}

	// Promotion: the stable Deployment rolls, then the canary goes.
	{
		update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary.Steps[1].PauseSeconds = 0 })
		canaryPhase(t, ns, "web", "Promoting/2/50")
		dep := &appsv1.Deployment{}
		testutil.Eventually(t, wait10s, "the stable Deployment at shop:2", func(ctx context.Context) error {
			if err := get(ctx, ns, "web", dep); err != nil {
				return err
			}
			if img := dep.Spec.Template.Spec.Containers[0].Image; img != "shop:2" {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
		markAvailable(t, ns, "web")
		final := &webappv2.WebApp{}
		testutil.Eventually(t, 30*time.Second, "promoted", func(ctx context.Context) error {
			if err := get(ctx, ns, "web", final); err != nil {
				return err
			}
			if c := final.Status.Canary; c == nil || c.Phase != "Stable" {
				return fmt.Errorf("status.canary %+v", c)
			}
			return nil
		})
		if final.Status.Canary.StableRevision == stable {
			t.Errorf("stableRevision unchanged after promotion")
		}
		testutil.Eventually(t, wait10s, "the canary gone", func(ctx context.Context) error {
			if err := get(ctx, ns, "web-canary", &appsv1.Deployment{}); err == nil {
				return fmt.Errorf("the canary Deployment is still there")
			}
			if err := get(ctx, ns, "web-canary", &corev1.Service{}); err == nil {
				return fmt.Errorf("the canary Service is still there")
			}
			return nil
		})
		if got := backends(t, ns); got != "web=1" {
			t.Errorf("route backends %s after promotion, want web=1", got)
		}
		// (The canary Deployment went with another manager's label on it: it was the operator's object.)
		r := &gwv1.HTTPRoute{}
		if err := get(ctx, ns, "web", r); err != nil || r.Annotations["team.example/owner"] != "shop" {
			t.Errorf("another manager's annotation on the route is gone: %v %v", r.Annotations, err)
		}
		op = restartCostsNoWrites(t, op, ns)
		op.writes.take()
	}

	// A Deployment of the canary's name that is not ours is never taken over.
	{
		theirDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-canary"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "theirs:1"}}}}}}
		if err := k8s.Create(ctx, theirDep); err != nil {
			t.Fatal(err)
		}
		rv := theirDep.ResourceVersion
		update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:3" })
		waitReady(t, ns, "web", metav1.ConditionFalse, "ChildNotOwned", "web-canary")
		if err := get(ctx, ns, "web-canary", theirDep); err != nil || theirDep.ResourceVersion != rv {
			t.Errorf("their Deployment was written: resourceVersion %s, was %s (%v)", theirDep.ResourceVersion, rv, err)
		}
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", dep); err != nil || dep.Spec.Template.Spec.Containers[0].Image != "shop:2" {
			t.Errorf("the stable Deployment left its version while the canary cannot run: %v", err)
		}
	}

	// A Service of the canary's name that is not ours: the canary runs, and the route gives that Service nothing.
	{
		other := app.DeepCopy()
		other.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "svc"}
		other.Spec.Image = "shop:1"
		if err := k8s.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		waitChildren(t, ns, "svc")
		markAvailable(t, ns, "svc")
		canaryPhase(t, ns, "svc", "Stable/0/0")
		theirSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-canary"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		if err := k8s.Create(ctx, theirSvc); err != nil {
			t.Fatal(err)
		}
		update(t, ns, "svc", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
		testutil.Eventually(t, 30*time.Second, "our canary Deployment", func(ctx context.Context) error {
			return get(ctx, ns, "svc-canary", &appsv1.Deployment{})
		})
		markAvailable(t, ns, "svc-canary")
		waitReady(t, ns, "svc", metav1.ConditionFalse, "ChildNotOwned", "Service", "svc-canary")
		// Never counted ready: no step starts, and over three resyncs the route keeps the stable Service alone.
		waitResyncs(t, 3, 30*time.Second)
		if got := routeBackends(t, ns, "svc"); got != "svc=1" {
			t.Errorf("route backends %s with a canary Service that is not ours, want svc=1", got)
		}
		if st := canaryPhase(t, ns, "svc", "Canary/0/0"); st.Status.Canary.StepStartedAt != nil {
			t.Errorf("a step started with a canary Service that is not ours: %+v", st.Status.Canary)
		}
	}
}

// applyTheirs applies, as the field manager "someone", one entry of an object's labels or annotations (field).
func applyTheirs(t *testing.T, apiVersion, kind, ns, name, field, key, value string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name, field: map[string]any{key: value}}}}
	if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
}

// TestCanaryBesideAnHPA: with autoscaling, the HPA keeps deciding the stable Deployment's count through a canary
// (never written by the operator, never dipping), and the canary's count follows it: without a Gateway, the fewest
// pods that make the step's share of all pods.
func TestCanaryBesideAnHPA(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	startOperator(t, ns, time.Second)
	cs := kubernetes.NewForConfigOrDie(cfg)
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](5), Autoscaling: &webappv2.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 12},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 25, PauseSeconds: 3600}}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	testutil.Eventually(t, 30*time.Second, "the HPA, and the count no longer ours", func(ctx context.Context) error {
		if err := get(ctx, ns, "auto", hpa); err != nil {
			return err
		}
		return countNotOurs(ctx, ns)
	})
	seen := watchReplicas(t, cs, ns, "auto")
	scaleAsHPA(t, cs, ns, 6)
	markAvailable(t, ns, "auto")
	canaryPhase(t, ns, "auto", "Stable/0/0")
	if err := get(ctx, ns, "auto", hpa); err != nil {
		t.Fatal(err)
	}

	update(t, ns, "auto", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	// 6 stable pods: 2 canary pods make 25% of 8.
	deploymentAt(t, ns, "auto-canary", 2, "the canary's share")
	// The HPA scales the stable Deployment mid-canary: the canary follows (3 of 12).
	scaleAsHPA(t, cs, ns, 9)
	deploymentAt(t, ns, "auto-canary", 3, "the canary following the HPA")
	deploymentReplicas(t, cs, ns, 9)
	if got := seen(); !slices.Equal(got, []int32{5, 6, 9}) {
		t.Errorf("the stable Deployment's counts %v, want the HPA's alone: [5 6 9]", got)
	}
	dep := &appsv1.Deployment{}
	if err := get(ctx, ns, "auto", dep); err != nil {
		t.Fatal(err)
	}
	if owners := replicaOwners(dep); strings.Contains(owners, webappv2.FieldManager) || !strings.Contains(owners, "kube-controller-manager/Update/scale;") {
		t.Errorf("the stable count's owners %q, want the HPA's, never ours", owners)
	}
	after := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := get(ctx, ns, "auto", after); err != nil || after.ResourceVersion != hpa.ResourceVersion || after.Spec.ScaleTargetRef.Name != "auto" {
		t.Errorf("the HPA was written during the canary (resourceVersion %s, was %s; target %s; %v)", after.ResourceVersion, hpa.ResourceVersion, after.Spec.ScaleTargetRef.Name, err)
	}
}

// TestCanaryRefusals: what would break a canary later is refused by the API server, with its reason.
func TestCanaryRefusals(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	strategy := webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}}}
	long := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a" + strings.Repeat("b", 56)},
		Spec: webappv2.WebAppSpec{Image: "shop:1", Rollout: strategy}}
	if err := k8s.Create(ctx, long); err == nil || !strings.Contains(err.Error(), "at most 56 characters") {
		t.Errorf("a 57-character name with a canary: %v, want refused", err)
	}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: webappv2.WebAppSpec{Image: "shop:1", Ports: []webappv2.Port{{Name: "http", Port: 8080}}, Rollout: strategy}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Ports[0].Name = "web"
	if err := k8s.Update(ctx, app); err == nil || !strings.Contains(err.Error(), "spec.ports cannot change while spec.rollout.canary is set") {
		t.Errorf("a ports change with a canary: %v, want refused", err)
	}
	// Without the strategy, the same change is accepted.
	if err := get(ctx, ns, "web", app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Rollout.Canary, app.Spec.Ports[0].Name = nil, "web"
	if err := k8s.Update(ctx, app); err != nil {
		t.Errorf("a ports change without a canary: %v", err)
	}
	bad := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 100}},
			Checks: []webappv2.CanaryCheck{{Name: "e", Prometheus: &webappv2.PrometheusQuery{Address: "prometheus:9090", Query: "up"}, Max: "1e3"}}}}}}
	err := k8s.Create(ctx, bad)
	for _, want := range []string{"steps[0].weight", "prometheus.address", "checks[0].max"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal of a weight of 100, an address without a scheme and max 1e3: %v, want it to name %s", err, want)
		}
	}
	// A check has exactly one source: a Prometheus query or a webhook.
	for _, c := range []struct {
		name  string
		check webappv2.CanaryCheck
	}{
		{"both", webappv2.CanaryCheck{Name: "e", Max: "1", Prometheus: &webappv2.PrometheusQuery{Address: "http://prometheus:9090", Query: "up"}, Webhook: &webappv2.WebhookCheck{URL: "http://judge:8080"}}},
		{"neither", webappv2.CanaryCheck{Name: "e", Max: "1"}},
	} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "source-"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
			Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}, Checks: []webappv2.CanaryCheck{c.check}}}}}
		if err := k8s.Create(ctx, app); err == nil || !strings.Contains(err.Error(), "a check has exactly one of prometheus or webhook") {
			t.Errorf("a check with %s of prometheus and webhook: %v, want refused", c.name, err)
		}
	}
	// A bound on waiting for data without the wait it bounds is refused; with it, accepted.
	check := webappv2.CanaryCheck{Name: "e", Prometheus: &webappv2.PrometheusQuery{Address: "http://prometheus:9090", Query: "up"}, Max: "1", NoDataWaitSeconds: 60}
	for _, c := range []struct {
		onNoData webappv2.CheckNoData
		refused  bool
	}{{"", true}, {webappv2.NoDataFail, true}, {webappv2.NoDataPass, true}, {webappv2.NoDataWait, false}} {
		check.OnNoData = c.onNoData
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "nodata-"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
			Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}, Checks: []webappv2.CanaryCheck{check}}}}}
		err := k8s.Create(ctx, app)
		if c.refused && (err == nil || !strings.Contains(err.Error(), "noDataWaitSeconds bounds onNoData: Wait")) {
			t.Errorf("noDataWaitSeconds with onNoData %q: %v, want refused", c.onNoData, err)
		}
		if !c.refused && err != nil {
			t.Errorf("noDataWaitSeconds with onNoData %q: %v", c.onNoData, err)
		}
	}
}

// TestCanaryCheckAnswers: without a Gateway, a 99% step's canary has no more pods than the WebApp's replicas (the
// split by replicas asked for 990 beside 10), and a check whose Prometheus (served by the test) answers what is no
// measurement rolls the canary back, saying why.
func TestCanaryCheckAnswers(t *testing.T) {
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   string
	}{
		{name: "-Inf", want: "value is -Inf", answer: func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"-Inf"]}}`)
		}},
		{name: "64 MiB", want: "larger than 4 MiB", answer: func(w http.ResponseWriter) {
			// Valid JSON whose value passes, were it read whole.
			testutil.WriteHugeCheckAnswer(w, 64)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				c.answer(w)
			}))
			defer prom.Close()
			ns := newNamespace(t)
			startOperator(t, ns, time.Second)
			ctx := context.Background()
			app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
				Image: "shop:1", Replicas: ptr.To[int32](10), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
				Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{
					Steps:  []webappv2.CanaryStep{{Weight: 99, PauseSeconds: 3600}},
					Checks: []webappv2.CanaryCheck{{Name: "errors", Prometheus: &webappv2.PrometheusQuery{Address: prom.URL, Query: "vector(0)"}, Max: "0.01"}},
				}},
			}}
			if err := k8s.Create(ctx, app); err != nil {
				t.Fatal(err)
			}
			waitChildren(t, ns, "web")
			markAvailable(t, ns, "web")
			canaryPhase(t, ns, "web", "Stable/0/0")
			update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
			canaryPhase(t, ns, "web", "Canary/0/0")
			canary := &appsv1.Deployment{}
			testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", canary) })
			if n := *canary.Spec.Replicas; n != 10 {
				t.Errorf("the canary has %d replicas at 99%% beside 10, want 10 (the WebApp's replicas)", n)
			}
			// Ready at its count: the check is queried, and its answer is no measurement.
			markAvailable(t, ns, "web-canary")
			rolled := canaryPhase(t, ns, "web", "RolledBack/0/0")
			if msg := rolled.Status.Canary.Message; rolled.Status.Canary.Reason != webappv2.ReasonCheckFailed || !strings.Contains(msg, c.want) {
				t.Errorf("rolled back for %s: %q, want %s saying %q", rolled.Status.Canary.Reason, msg, webappv2.ReasonCheckFailed, c.want)
			}
		})
	}
}

// TestCanaryNoData (issue 51, item 2): a quiet service's query gives no value (NaN), and each check says what that
// counts as. Fail rolls back; Pass goes on, its evaluation saying it passed on no value; Wait holds the step, with
// no failure counted and noDataSince in the status, until its bound, then rolls back. Each check's evaluation is in
// status.canary.checks, with the server and the query.
func TestCanaryNoData(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`)
	}))
	defer prom.Close()
	cases := []struct {
		onNoData webappv2.CheckNoData
		wait     int32
		// step is where the canary gets to; message, said by the rollback ("" when none).
		step    int32
		message string
		// error is the evaluation's words; held: the step holds, waiting, before the rollback.
		error string
		held  bool
	}{
		{onNoData: "", message: "check errors: no value (failures 1, allowed 0)", error: "no value"},
		{onNoData: webappv2.NoDataPass, step: 1, error: "no value, passed (onNoData: Pass)"},
		{onNoData: webappv2.NoDataWait, wait: 3, message: "check errors: no value for 3s (onNoData: Wait) (failures 1, allowed 0)", error: "no value for 3s (onNoData: Wait)", held: true},
	}
	for _, c := range cases {
		t.Run("onNoData "+string(c.onNoData), func(t *testing.T) {
			ns := newNamespace(t)
			startOperator(t, ns, time.Second)
			app := canaryStarted(t, ns, &webappv2.CanarySpec{
				Steps: []webappv2.CanaryStep{{Weight: 50}, {Weight: 60, PauseSeconds: 3600}},
				Checks: []webappv2.CanaryCheck{{Name: "errors", Prometheus: &webappv2.PrometheusQuery{Address: prom.URL, Query: "quiet_ratio"}, Max: "0.01",
					OnNoData: c.onNoData, NoDataWaitSeconds: c.wait}},
				CheckIntervalSeconds: 1,
			})
			var waited bool
			testutil.Eventually(t, 30*time.Second, "the canary's outcome", func(ctx context.Context) error {
				if err := get(ctx, ns, "web", app); err != nil {
					return err
				}
				st := app.Status.Canary
				if st == nil || len(st.Checks) != 1 {
					return fmt.Errorf("status.canary %+v", st)
				}
				e := st.Checks[0]
				if e.Address != prom.URL || e.Query != "quiet_ratio" || e.Max != "0.01" || e.Value != "" {
					return fmt.Errorf("the evaluation %+v: want no value, from %s: quiet_ratio, against 0.01", e, prom.URL)
				}
				if st.Phase == "Canary" && st.Step == 0 && e.NoDataSince != nil && strings.Contains(e.Error, "waiting up to 3s") {
					if len(st.Failures) > 0 {
						return fmt.Errorf("a failure counted while waiting for data: %+v", st.Failures)
					}
					waited = true
				}
				switch {
				case c.message != "" && st.Phase == "RolledBack":
					if st.Message != c.message || e.Error != c.error || e.Passed {
						return fmt.Errorf("rolled back with %q, evaluation %+v; want %q and %q", st.Message, e, c.message, c.error)
					}
					return nil
				case c.message == "" && st.Phase == "Canary" && st.Step == c.step:
					if e.Error != c.error || !e.Passed {
						return fmt.Errorf("at step %d with evaluation %+v, want it passed, saying %q", st.Step, e, c.error)
					}
					return nil
				}
				return fmt.Errorf("status.canary %s at step %d: %+v", st.Phase, st.Step, st)
			})
			if c.held && !waited {
				t.Errorf("the step never held waiting for data (no round seen with noDataSince and no failure)")
			}
		})
	}
}

// TestCanaryWebhookCheck (issue 51, item 2): a webhook check is POSTed a CheckRequest naming the canary it measures
// each round, and its answer's value is held against max: a passing value lets the step go on, a failing one rolls
// the canary back with the value in the message, and each evaluation names the webhook's URL.
func TestCanaryWebhookCheck(t *testing.T) {
	var value atomic.Value
	value.Store("0.001")
	requests := make(chan checks.CheckRequest, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req checks.CheckRequest
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want a POST of a CheckRequest", http.StatusBadRequest)
			return
		}
		select {
		case requests <- req:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"value": %s}`, value.Load())
	}))
	defer hook.Close()
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	app := canaryStarted(t, ns, &webappv2.CanarySpec{
		Steps:                []webappv2.CanaryStep{{Weight: 50}, {Weight: 60, PauseSeconds: 3600}},
		Checks:               []webappv2.CanaryCheck{{Name: "judge", Webhook: &webappv2.WebhookCheck{URL: hook.URL + "/judge", TimeoutSeconds: 2}, Max: "0.01"}},
		CheckIntervalSeconds: 1,
	})
	stable := app.Status.Canary.StableRevision
	// A passing value: the first step passes.
	testutil.Eventually(t, 30*time.Second, "the first step passed on the webhook's value", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		st := app.Status.Canary
		if st == nil || st.Step != 1 || len(st.Checks) != 1 || st.Checks[0].Value != "0.001" || !st.Checks[0].Passed || st.Checks[0].Address != hook.URL+"/judge" {
			return fmt.Errorf("status.canary %+v", st)
		}
		return nil
	})
	req := <-requests
	want := checks.CheckRequest{APIVersion: "webapp.example.com/v1", Kind: "CheckRequest", Namespace: ns, WebApp: "web", Check: "judge",
		CanaryRevision: app.Status.Canary.CanaryRevision, StableRevision: stable, Step: 0, Weight: 50, Time: req.Time}
	if req != want || req.Time.IsZero() {
		t.Errorf("the webhook was told %+v, want %+v", req, want)
	}
	// A failing value: rolled back, saying it.
	value.Store("0.9")
	rolled := canaryPhase(t, ns, "web", "RolledBack/1/0")
	if msg := rolled.Status.Canary.Message; msg != "check judge: 0.9 > 0.01 (failures 1, allowed 0)" {
		t.Errorf("rolled back with %q", msg)
	}
}

// stableImage waits until Deployment name (the WebApp name's stable one, or any other) runs want.
func stableImage(t *testing.T, ns, name, want, why string) {
	t.Helper()
	testutil.Eventually(t, wait10s, why, func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, name, dep); err != nil {
			return err
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != want {
			return fmt.Errorf("the stable Deployment runs %s", img)
		}
		return nil
	})
}

// setImage is `kubectl set image deployment/name app=image`: an Update under another field manager, which takes
// the field from ours.
func setImage(t *testing.T, ns, name, image string) {
	t.Helper()
	update(t, ns, name, &appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image },
		client.FieldOwner("kubectl-set"))
}

// TestCanaryKeepsTheStableVersionAsItsOwnData (issue 47, items 1, 2 and 8): the stable version's template is
// the record the operator keeps (ControllerRevision <name>-stable), not what its manager happens to own on the
// Deployment. So another writer's `kubectl set image` on the stable Deployment is put back during a canary's pause
// and after a rollback, a stable Deployment deleted after a rollback comes back running the stable version, and a
// canary being promoted stays promoted when steps are added to the plan, whatever its checks say then.
func TestCanaryKeepsTheStableVersionAsItsOwnData(t *testing.T) {
	var answer atomic.Value
	answer.Store("0")
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"scalar","result":[1,%q]}}`, answer.Load())
	}))
	defer prom.Close()
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	checks := []webappv2.CanaryCheck{{Name: "errors", Prometheus: &webappv2.PrometheusQuery{Address: prom.URL, Query: "vector(0)"}, Max: "0.5"}}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{CheckIntervalSeconds: 1, Checks: checks,
			Steps: []webappv2.CanaryStep{{Weight: 50, PauseSeconds: 3600}}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	stable := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary.StableRevision
	record := &appsv1.ControllerRevision{}
	testutil.Eventually(t, wait10s, "the stable version's record", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-stable", record); err != nil {
			return err
		}
		if rev := record.Annotations[webappv2.AnnotationRevision]; rev != stable {
			return fmt.Errorf("the record is of revision %s, want %s", rev, stable)
		}
		return nil
	})

	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryPhase(t, ns, "web", "Canary/0/0")
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", &appsv1.Deployment{}) })
	markAvailable(t, ns, "web-canary")
	canaryPhase(t, ns, "web", "Canary/0/50")

	// Item 1, in a step's pause: put back.
	since := time.Now()
	setImage(t, ns, "web", "evil:1")
	stableImage(t, ns, "web", "shop:1", "the stable version back in the pause")
	// (The recorder sends events apart from the write: the event may come a moment after the repair.)
	testutil.Eventually(t, wait10s, "a DriftRepaired event for the stable Deployment", func(context.Context) error {
		if ev := strings.Join(eventsSince(t, ns, since), "\n"); !strings.Contains(ev, "DriftRepaired") {
			return fmt.Errorf("events: %s", ev)
		}
		return nil
	})

	// A failing check rolls back; then item 1 after the rollback, and item 8.
	answer.Store("1")
	canaryPhase(t, ns, "web", "RolledBack/0/0")
	setImage(t, ns, "web", "evil:1")
	stableImage(t, ns, "web", "shop:1", "the stable version back after the rollback")
	dep := &appsv1.Deployment{}
	if err := get(ctx, ns, "web", dep); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "the stable Deployment again", func(ctx context.Context) error {
		again := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", again); err != nil {
			return err
		}
		if again.UID == dep.UID {
			return fmt.Errorf("not deleted yet")
		}
		if img, rev := again.Spec.Template.Spec.Containers[0].Image, again.Annotations[webappv2.AnnotationRevision]; img != "shop:1" || rev != stable {
			return fmt.Errorf("it runs %s (revision %s), want shop:1 (%s)", img, rev, stable)
		}
		return nil
	})
	markAvailable(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonRolledBack)

	// Item 2: promoting, a step added, then a failing check: still promoted, and promoted at the end.
	answer.Store("0")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Image = "shop:3"
		a.Spec.Rollout.Canary.Steps[0].PauseSeconds = 0
	})
	canaryPhase(t, ns, "web", "Canary/0/0")
	testutil.Eventually(t, wait10s, "the canary of shop:3", func(ctx context.Context) error {
		c := &appsv1.Deployment{}
		if err := get(ctx, ns, "web-canary", c); err != nil {
			return err
		}
		if img := c.Spec.Template.Spec.Containers[0].Image; img != "shop:3" {
			return fmt.Errorf("the canary runs %s", img)
		}
		return nil
	})
	markAvailable(t, ns, "web-canary")
	promoting := canaryPhase(t, ns, "web", "Promoting/1/50").Status.Canary.CanaryRevision
	stableImage(t, ns, "web", "shop:3", "the stable Deployment rolling to the promoted version")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Rollout.Canary.Steps = append(a.Spec.Rollout.Canary.Steps, webappv2.CanaryStep{Weight: 80, PauseSeconds: 3600})
	})
	answer.Store("1")
	waitResyncs(t, 3, 30*time.Second)
	if st := canaryPhase(t, ns, "web", "Promoting/2/80").Status.Canary; st.CanaryRevision != promoting || st.FailedRevision == promoting {
		t.Errorf("after a step was added while promoting: %+v, want %s still promoted", st, promoting)
	}
	stableImage(t, ns, "web", "shop:3", "the promoted version kept")
	markAvailable(t, ns, "web")
	final := canaryPhase(t, ns, "web", "Stable/0/0")
	if final.Status.Canary.StableRevision != promoting {
		t.Errorf("stable revision %s after the promotion, want %s", final.Status.Canary.StableRevision, promoting)
	}
	testutil.Eventually(t, wait10s, "the record of the promoted version", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-stable", record); err != nil {
			return err
		}
		if rev := record.Annotations[webappv2.AnnotationRevision]; rev != promoting {
			return fmt.Errorf("the record is of revision %s, want %s", rev, promoting)
		}
		return nil
	})
}

// TestOrphanDeletionMidCanaryKeepsTheStableVersionAlone (issue 47): a WebApp with the Orphan policy deleted while a
// canary takes 25% of the traffic through a Gateway, and one whose canary shares the one Service (no Gateway). What
// is left running without an owner is the stable version alone, serving all the traffic: the route first sends
// everything to the stable Service, the canary's Deployment and Service are deleted canaryRetire later (never
// released), then the rest is released and the WebApp goes.
func TestOrphanDeletionMidCanaryKeepsTheStableVersionAlone(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	steps := []webappv2.CanaryStep{{Weight: 25, PauseSeconds: 3600}}
	for _, name := range []string{"web", "shared"} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webappv2.WebAppSpec{
			Image: "shop:1", Replicas: ptr.To[int32](4), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
			DeletionPolicy: webappv2.DeletionPolicyOrphan,
			Rollout:        webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: steps}},
		}}
		if name == "web" {
			app.Spec.Expose = &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
		}
		if err := k8s.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
		waitChildren(t, ns, name)
		markAvailable(t, ns, name)
		canaryPhase(t, ns, name, "Stable/0/0")
		update(t, ns, name, &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
		canaryPhase(t, ns, name, "Canary/0/0")
		testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, name+"-canary", &appsv1.Deployment{}) })
		markAvailable(t, ns, name+"-canary")
		canaryPhase(t, ns, name, "Canary/0/25")
	}
	if got := backends(t, ns); got != "web=75,web-canary=25" {
		t.Fatalf("route backends %s before the deletion, want web=75,web-canary=25", got)
	}

	for _, name := range []string{"web", "shared"} {
		deleted := time.Now()
		if err := k8s.Delete(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		// Watched every 50 ms: when the route left the canary, when the canary went, when the WebApp went.
		var routeLeft, canaryGone, appGone time.Duration
		for appGone == 0 {
			if time.Since(deleted) > 60*time.Second {
				t.Fatalf("%s: after 60 s: route left the canary at %v, canary gone at %v, WebApp still there", name, routeLeft, canaryGone)
			}
			since := time.Since(deleted)
			if name == "shared" {
				routeLeft = max(routeLeft, time.Nanosecond)
			} else if routeLeft == 0 && !strings.Contains(routeBackends(t, ns, name), "canary") {
				routeLeft = since
			}
			if err := get(ctx, ns, name+"-canary", &appsv1.Deployment{}); apierrors.IsNotFound(err) && canaryGone == 0 {
				canaryGone = since
				if routeLeft == 0 {
					t.Errorf("%s: the canary Deployment went while the route still sent it traffic: %s", name, routeBackends(t, ns, name))
				}
			}
			if err := get(ctx, ns, name, &webappv2.WebApp{}); apierrors.IsNotFound(err) {
				appGone = since
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: the route left the canary %v after the deletion, the canary went at %v, the WebApp at %v", name, routeLeft.Round(time.Millisecond), canaryGone.Round(time.Millisecond), appGone.Round(time.Millisecond))
		switch {
		case canaryGone == 0:
			t.Errorf("%s: the canary Deployment is still there after the WebApp went", name)
		case canaryGone > appGone:
			t.Errorf("%s: the canary Deployment went at %v, after the WebApp at %v", name, canaryGone, appGone)
		case name == "web" && routeLeft == 0:
			t.Errorf("the route still sends the canary traffic: %s", routeBackends(t, ns, name))
		case name == "web" && canaryGone-routeLeft < 9500*time.Millisecond:
			t.Errorf("the canary went %v after the route left it: the gateway is given %v to follow the route", canaryGone-routeLeft, 10*time.Second)
		}
		if err := get(ctx, ns, name+"-canary", &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the canary Service: %v, want NotFound", name, err)
		}
		dep, svc := &appsv1.Deployment{}, &corev1.Service{}
		if err := get(ctx, ns, name, dep); err != nil {
			t.Fatalf("%s: the stable Deployment: %v", name, err)
		}
		if err := get(ctx, ns, name, svc); err != nil {
			t.Fatalf("%s: the Service: %v", name, err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "shop:1" || len(dep.OwnerReferences)+len(svc.OwnerReferences) != 0 {
			t.Errorf("%s: the stable Deployment runs %s, owners %v (Service %v); want shop:1, none", name, img, dep.OwnerReferences, svc.OwnerReferences)
		}
		// The stable version's record is the operator's: left to the garbage collector (which this API server does
		// not run), with our owner reference, never released.
		record := &appsv1.ControllerRevision{}
		if err := get(ctx, ns, name+"-stable", record); err != nil || len(record.OwnerReferences) != 1 {
			t.Errorf("%s: the stable version's record: owners %v (%v), want the WebApp's, for the garbage collector", name, record.OwnerReferences, err)
		}
		if name == "web" {
			route := &gwv1.HTTPRoute{}
			if err := get(ctx, ns, name, route); err != nil {
				t.Fatal(err)
			}
			if got := routeBackends(t, ns, name); got != "web=1" || len(route.OwnerReferences) != 0 {
				t.Errorf("the route after the deletion: backends %s, owners %v; want web=1, none", got, route.OwnerReferences)
			}
		}
	}
	testutil.Eventually(t, wait10s, "the events", func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Regarding.Name+" "+e.Reason+": "+e.Note)
		}
		for _, want := range []string{
			"web CanaryRemoved: Deleted Deployment web-canary and Service web-canary: the WebApp was deleted with deletionPolicy Orphan mid-canary",
			"shared CanaryRemoved: Deleted Deployment shared-canary: the WebApp was deleted with deletionPolicy Orphan mid-canary",
			"web Orphaned: Released HTTPRoute web", "web Orphaned: Released Deployment web", "shared Orphaned: Released Deployment shared",
		} {
			if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
				return fmt.Errorf("no event %q in %q", want, got)
			}
		}
		return nil
	})
}

// TestHangingChecksHoldNoWorker (issue 47, item 4): a canary whose five checks hang (each until its 5 s bound) holds
// no worker: with the one worker these tests run, another WebApp's changes are applied within moments, each of
// them, while the hanging rounds go on (they run apart from the reconcile, and their end brings the next one).
func TestHangingChecksHoldNoWorker(t *testing.T) {
	var asked atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		<-r.Context().Done()
	}))
	defer hang.Close()
	defer hang.CloseClientConnections()
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	var checks []webappv2.CanaryCheck
	for i := range 5 {
		checks = append(checks, webappv2.CanaryCheck{Name: fmt.Sprint("hangs-", i), Prometheus: &webappv2.PrometheusQuery{Address: hang.URL, Query: "vector(0)"},
			Max: "1", FailuresAllowed: 100})
	}
	slow := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{CheckIntervalSeconds: 1, Checks: checks,
			Steps: []webappv2.CanaryStep{{Weight: 50, PauseSeconds: 3600}}}},
	}}
	other := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: webappv2.WebAppSpec{Image: "other:0"}}
	for _, a := range []*webappv2.WebApp{slow, other} {
		if err := k8s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	startCanary(t, ns, "slow")
	testutil.Eventually(t, wait10s, "the checks hanging", func(context.Context) error {
		if n := asked.Load(); n < 5 {
			return fmt.Errorf("%d checks asked", n)
		}
		return nil
	})
	// In each of the next three rounds, while its five queries hang: a change of the other WebApp, its time measured.
	// (One change per round: a WebApp whose spec changed goes first in the queue, so a stream of them would starve the
	// canary's own reconciles, which is the queue's design, not the checks'.)
	var took []string
	worst := time.Duration(0)
	for round := 2; round <= 4; round++ {
		testutil.Eventually(t, 15*time.Second, fmt.Sprintf("round %d of the checks hanging", round), func(context.Context) error {
			if n := asked.Load(); n < int32(5*round) {
				return fmt.Errorf("%d checks asked", n)
			}
			return nil
		})
		image := fmt.Sprintf("other:%d", round)
		changed := time.Now()
		update(t, ns, "other", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = image })
		stableImage(t, ns, "other", image, "the other WebApp's change applied")
		d := time.Since(changed)
		worst = max(worst, d)
		took = append(took, fmt.Sprintf("%.2fs", d.Seconds()))
	}
	t.Logf("the other WebApp's changes applied in %s, each while a round of 5 checks hung (one worker)", strings.Join(took, ", "))
	if worst > 3*time.Second {
		t.Errorf("a change of another WebApp waited %v behind hanging checks (each hangs 5 s), want under 3 s: %s", worst, strings.Join(took, ", "))
	}
}

// TestANewVersionWhenTheStableOneNeverRanIsNotHeldBack: a WebApp with a canary strategy whose first version the
// Deployment API refuses (a pod label value it does not accept) has no stable Deployment; the user's fix is then not
// a canary beside a version that cannot run (stuck for ever, the fix never applied) but the stable version at once.
// Found by the actions test (seed 1).
func TestANewVersionWhenTheStableOneNeverRanIsNotHeldBack(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Pod: webappv2.PodSpec{Labels: map[string]string{"tier": "has space"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50, PauseSeconds: 3600}}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "Ready says the Deployment API refuses the spec", func(ctx context.Context) error {
		got := &webappv2.WebApp{}
		if err := get(ctx, ns, "web", got); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(got.Status.Conditions, "Ready"); r == nil || r.Reason != webappv2.ReasonInvalidChild {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image, a.Spec.Pod.Labels = "shop:2", map[string]string{"tier": "web"} })
	stableImage(t, ns, "web", "shop:2", "the fixed version runs as the stable one")
	canaryPhase(t, ns, "web", "Stable/0/0")
	if err := get(ctx, ns, "web-canary", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a canary Deployment beside a stable version that never ran: %v", err)
	}
}

// deploymentAt waits until Deployment name of namespace ns asks for want pods (why says why it should).
func deploymentAt(t *testing.T, ns, name string, want int32, why string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s at %d: %s", name, want, why), func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, name, dep); err != nil {
			return err
		}
		if n := ptr.Deref(dep.Spec.Replicas, 0); n != want {
			return fmt.Errorf("at %d", n)
		}
		return nil
	})
}
