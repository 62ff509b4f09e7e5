package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/test/testutil"
)

// gone waits until the object name of obj's kind is deleted.
func gone[T client.Object](t *testing.T, ns, name string, obj T) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, name+" gone", func(ctx context.Context) error {
		err := get(ctx, ns, name, obj)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			return fmt.Errorf("%s is still there", name)
		}
		return err
	})
}

// TestBlueGreenThroughTheRoute walks two blue/green releases on the real API server (the Gateway API's own CRD
// validates every route), the Deployment controller's part played by the test. The first: previewed at full size
// (as many pods as the stable version) with none of the traffic, its preview host a route of its own, held at its
// gate; promoted by a person, all the traffic switches to it; aborted within the keep, all of it is back at once
// and the preview route is gone. The second, without a gate and with a short keep: switched once ready, promoted
// behind the route (the traffic stays on it while the stable Deployment rolls), then back on the stable Service
// and the canary's objects gone. At each hold a fresh operator sends no write.
func TestBlueGreenThroughTheRoute(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](3), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{
			PreviewHost: "preview.shop.example.com", Gate: &webappv2.CanaryGate{}, KeepSeconds: 3600,
		}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	stableOnly := "[/] web=1"
	waitRoute(t, ns, stableOnly)

	// The preview: the new version at full size, its own route for the preview host, none of the traffic.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryDep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "the new version at full size", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", canaryDep); err != nil {
			return err
		}
		if n := ptr.Deref(canaryDep.Spec.Replicas, 0); n != 3 {
			return fmt.Errorf("%d pods of the new version, want 3", n)
		}
		return nil
	})
	preview := &gwv1.HTTPRoute{}
	testutil.Eventually(t, wait10s, "the preview route", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", preview); err != nil {
			return err
		}
		rules, err := routeRules(ctx, ns, "web-canary")
		if err == nil && (rules != "[/] web-canary=1" || len(preview.Spec.Hostnames) != 1 || preview.Spec.Hostnames[0] != "preview.shop.example.com") {
			err = fmt.Errorf("the preview route: %s for %v", rules, preview.Spec.Hostnames)
		}
		return err
	})
	markAvailable(t, ns, "web-canary")
	held := status(t, ns, "held at the switch's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	if got, err := routeRules(ctx, ns, "web"); err != nil || got != stableOnly {
		t.Errorf("the route during the preview: %s %v, want %s", got, err, stableOnly)
	}
	if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil ||
		!strings.Contains(ready.Message, "Blue/green preview of revision "+held.Status.Canary.CanaryRevision+" at full size, with none of the production traffic") {
		t.Errorf("Ready does not say the new version is previewed: %+v", ready)
	} else if !strings.Contains(ready.Message, "; the preview host's route web-canary: no controller of Gateway "+ns+"/public has reported on the HTTPRoute yet") {
		// (No Gateway controller runs here: its verdict on the preview route is awaited, and said.)
		t.Errorf("Ready does not say the preview route waits for its Gateway: %s", ready.Message)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Promoted: all the traffic to the new version at once, the version before kept at full size.
	revision := held.Status.Canary.CanaryRevision
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(revision, 0)}
	})
	switched := canaryPhase(t, ns, "web", "Canary/1/100")
	waitRoute(t, ns, "[/] web=0,web-canary=100")
	if ready := meta.FindStatusCondition(switched.Status.Conditions, webappv2.ConditionReady); ready == nil ||
		!strings.Contains(ready.Message, "Revision "+revision+" serves all the traffic since the blue/green switch") {
		t.Errorf("Ready does not say the traffic switched: %+v", ready)
	}
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, "all the traffic goes to revision "+revision+" (web-canary) since the blue/green switch") {
		t.Errorf("explain does not say the traffic switched: exit %d, %s%s", code, out, errOut)
	}
	stable := &appsv1.Deployment{}
	if err := get(ctx, ns, "web", stable); err != nil || stable.Spec.Template.Spec.Containers[0].Image != "shop:1" || ptr.Deref(stable.Spec.Replicas, 0) != 3 {
		t.Errorf("the version before is not kept at full size: %v", err)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Aborted within the keep: all the traffic back at once, the preview route gone.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations[webappv2.AnnotationAction] = canary.Abort(revision)
	})
	canaryPhase(t, ns, "web", "RolledBack/1/0")
	waitRoute(t, ns, stableOnly)
	gone(t, ns, "web-canary", &gwv1.HTTPRoute{})
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	op = restartCostsNoWrites(t, op, ns)

	// The next version, no gate and a short keep: switched once ready (and warmed up), then promoted.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Image = "shop:3"
		a.Spec.Rollout.Canary.BlueGreen = &webappv2.BlueGreenSpec{KeepSeconds: 1}
	})
	canaryPhase(t, ns, "web", "Canary/0/0")
	markAvailable(t, ns, "web-canary")
	canaryPhase(t, ns, "web", "Promoting/2/100")
	waitRoute(t, ns, "[/] web=0,web-canary=100")
	stableImage(t, ns, "web", "shop:3", "promoted behind the route")
	markAvailable(t, ns, "web")
	waitRoute(t, ns, stableOnly)
	canaryPhase(t, ns, "web", "Stable/0/0")
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	restartCostsNoWrites(t, op, ns)
}

// TestBlueGreenRefusals: the CRD refuses a blue/green that is also steps, whose preview host is the WebApp's own,
// or has a preview host with no exposure; one without a Gateway (the Service switches, and a preview host is a
// second Ingress) and one that autoscales (TestBlueGreenBesideAnHPA) are accepted.
func TestBlueGreenRefusals(t *testing.T) {
	ns := newNamespace(t)
	gateway := &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
	ingress := &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "nginx"}}
	bg := &webappv2.BlueGreenSpec{PreviewSeconds: 30, KeepSeconds: 600, Gate: &webappv2.CanaryGate{TimeoutSeconds: 3600, OnTimeout: webappv2.GatePromote}, PreviewHost: "preview.shop.example.com", PreviewPercent: 50}
	for _, c := range []struct {
		name   string
		expose *webappv2.Expose
		canary webappv2.CanarySpec
		want   string // "" accepted
	}{
		{"every field", gateway, webappv2.CanarySpec{BlueGreen: bg, RollbackWindowSeconds: 60}, ""},
		{"no field", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}, ""},
		{"behind an Ingress: the Service switches", ingress, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 600}, RollbackWindowSeconds: 60, KeepPreviousWarm: true}, ""},
		{"without expose: the Service switches", nil, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{Gate: &webappv2.CanaryGate{}}}, ""},
		{"a preview host behind an Ingress: a second Ingress", ingress, webappv2.CanarySpec{BlueGreen: bg}, ""},
		{"steps kept warm without a Gateway", ingress, webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}, RollbackWindowSeconds: 60, KeepPreviousWarm: true}, "with steps, it needs expose.gateway (their split by replicas would send the kept pods their share of the traffic)"},
		{"kept warm without a window", nil, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, KeepPreviousWarm: true}, "keepPreviousWarm keeps the version before warm for the rollback window: it needs rollbackWindowSeconds"},
		{"a preview host without expose", nil, webappv2.CanarySpec{BlueGreen: bg}, "previewHost is a second HTTPRoute on expose's Gateway, or a second Ingress of expose's class: it needs expose.gateway or expose.ingress"},
		{"a preview host that is the WebApp's, behind an Ingress", ingress, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: "shop.example.com"}}, "previewHost must not be one of expose.hosts"},
		{"with steps too", gateway, webappv2.CanarySpec{BlueGreen: bg, Steps: []webappv2.CanaryStep{{Weight: 10}}}, "a canary has steps or blueGreen, exactly one of them"},
		{"neither", gateway, webappv2.CanarySpec{}, "a canary has steps or blueGreen, exactly one of them"},
		{"a preview host that is an address", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: "10.0.0.1"}}, "not an IP address"},
		{"retireSeconds of a minute", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, RetireSeconds: 60}, ""},
		{"retireSeconds of more than an hour", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, RetireSeconds: 3601}, "retireSeconds"},
		{"retireSeconds of a second", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, RetireSeconds: 1}, "retireSeconds"},
		{"a check of the preview and one of the keep", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, Checks: []webappv2.CanaryCheck{
			{Name: "smoke", Webhook: &webappv2.WebhookCheck{URL: "http://smoke.test/"}, Max: "0", During: webappv2.DuringPreview},
			{Name: "errors", Webhook: &webappv2.WebhookCheck{URL: "http://errors.test/"}, Max: "0.01", During: webappv2.DuringKeep}}}, ""},
		{"a check's during with steps", gateway, webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}, Checks: []webappv2.CanaryCheck{
			{Name: "smoke", Webhook: &webappv2.WebhookCheck{URL: "http://smoke.test/"}, Max: "0", During: webappv2.DuringPreview}}},
			"checks[].during picks a blue/green's preview or keep: it needs blueGreen (with steps, every check gates every step)"},
		{"a check during something else", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}, Checks: []webappv2.CanaryCheck{
			{Name: "smoke", Webhook: &webappv2.WebhookCheck{URL: "http://smoke.test/"}, Max: "0", During: "Promotion"}}}, `supported values: "Preview", "Keep"`},
		{"a preview at a tenth, without a Gateway", nil, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewPercent: 10}}, ""},
		{"a preview above the stable count", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewPercent: 101}}, "previewPercent"},
		{"a keep of more than a day", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 86401}}, "keepSeconds"},
		{"a preview host that is the WebApp's", gateway, webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: "shop.example.com"}}, "previewHost must not be one of expose.hosts"},
		{"with autoscaling", gateway, webappv2.CanarySpec{BlueGreen: bg}, ""},
	} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bg-"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
			Expose: c.expose, Rollout: webappv2.RolloutSpec{Canary: &c.canary}}}
		if c.name == "with autoscaling" {
			app.Spec.Autoscaling = &webappv2.Autoscaling{MaxReplicas: 4}
		}
		judgeCreate(t, c.name, app, c.want)
	}
}

// TestBlueGreenBesideAnHPA: a blue/green of an autoscaling WebApp previews the new version at the HPA's count; from
// the switch on, the HPA's floor (minReplicas) holds the stable count it had then, since the stable pods serve
// nothing and the HPA, which measures them, would shrink both versions; the new version follows the HPA's count
// up; an abort, and a promotion's end, give the floor back. The HPA's writes are made through /scale, as its
// controller makes them; the stable count is never ours.
func TestBlueGreenBesideAnHPA(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Autoscaling: &webappv2.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 12}, Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose:  &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{Gate: &webappv2.CanaryGate{}, KeepSeconds: 3600}}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the HPA, and the count no longer ours", func(ctx context.Context) error {
		if err := get(ctx, ns, "auto", &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
			return err
		}
		return countNotOurs(ctx, ns)
	})
	scaleAsHPA(t, cs, ns, 6)
	markAvailable(t, ns, "auto")
	canaryPhase(t, ns, "auto", "Stable/0/0")
	hpaFloor := func(want int32, why string) {
		t.Helper()
		testutil.Eventually(t, wait10s, fmt.Sprintf("the HPA's floor at %d: %s", want, why), func(ctx context.Context) error {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			if err := get(ctx, ns, "auto", hpa); err != nil {
				return err
			}
			if n := ptr.Deref(hpa.Spec.MinReplicas, 1); n != want {
				return fmt.Errorf("minReplicas %d", n)
			}
			return nil
		})
	}
	canaryCount := func(want int32, why string) {
		t.Helper()
		deploymentAt(t, ns, "auto-canary", want, why)
	}
	hpaFloor(2, "the spec's")

	// The preview: at the HPA's count, the floor the spec's.
	update(t, ns, "auto", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryCount(6, "the preview at the HPA's count")
	markAvailable(t, ns, "auto-canary")
	held := &webappv2.WebApp{}
	testutil.Eventually(t, 30*time.Second, "held at the switch's gate", func(ctx context.Context) error {
		if err := get(ctx, ns, "auto", held); err != nil {
			return err
		}
		if c := held.Status.Canary; c == nil || c.GateSince == nil {
			return fmt.Errorf("status.canary %+v", c)
		}
		return nil
	})
	hpaFloor(2, "nothing held before the switch")

	// The switch holds the stable count: the HPA may raise it (the new version follows), never lower it.
	update(t, ns, "auto", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(held.Status.Canary.CanaryRevision, 0)}
	})
	switched := canaryPhase(t, ns, "auto", "Canary/1/100")
	if n := switched.Status.Canary.HeldReplicas; n != 6 {
		t.Errorf("status.canary.heldReplicas %d after the switch, want the stable count then, 6", n)
	}
	hpaFloor(6, "the stable count at the switch")
	scaleAsHPA(t, cs, ns, 8)
	canaryCount(8, "the HPA's count, up")
	markAvailable(t, ns, "auto-canary")
	if ready := meta.FindStatusCondition(switched.Status.Conditions, webappv2.ConditionReady); ready == nil || !strings.Contains(ready.Message, "the HPA's floor holds it at 6 pods") {
		t.Errorf("Ready does not say the HPA's floor is held: %+v", ready)
	}
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "auto"); code != 0 || !strings.Contains(out, ".status.canary.heldReplicas: 6: the HorizontalPodAutoscaler's floor (minReplicas) holds auto at 6 pods") {
		t.Errorf("explain does not say the HPA's floor is held: exit %d, %s%s", code, out, errOut)
	}
	op = restartCostsNoWrites(t, op, ns)

	// An abort gives the floor back.
	update(t, ns, "auto", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations[webappv2.AnnotationAction] = canary.Abort(held.Status.Canary.CanaryRevision)
	})
	canaryPhase(t, ns, "auto", "RolledBack/1/0")
	hpaFloor(2, "the spec's again after the abort")
	gone(t, ns, "auto-canary", &appsv1.Deployment{})

	// The next version without a gate, promoted: the floor held through the promotion, then given back.
	update(t, ns, "auto", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Image = "shop:3"
		a.Spec.Rollout.Canary.BlueGreen = &webappv2.BlueGreenSpec{KeepSeconds: 1}
	})
	canaryCount(8, "the preview at the HPA's count")
	markAvailable(t, ns, "auto-canary")
	canaryPhase(t, ns, "auto", "Promoting/2/100")
	hpaFloor(8, "held through the promotion")
	stableImage(t, ns, "auto", "shop:3", "promoted behind the route")
	markAvailable(t, ns, "auto")
	canaryPhase(t, ns, "auto", "Stable/0/0")
	hpaFloor(2, "the spec's again once promoted")
	restartCostsNoWrites(t, op, ns)
}
