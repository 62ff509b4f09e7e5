package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/test/testutil"
)

// ourWrite is when our field manager last wrote obj, and what our entry says of it.
func ourWrite(obj client.Object) string {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == webappv2.FieldManager && e.Subresource == "" {
			return e.Time.String() + " " + e.FieldsV1.GetRawString()
		}
	}
	return "none"
}

// canaryObjects are the canary's Deployment and Service as they were.
type canaryObjects struct {
	dep *appsv1.Deployment
	svc *corev1.Service
}

// retiresAfterTheRoute checks, once the spec has left the canary was (its objects) while the route sent it
// traffic, that the route sends the canary nothing while its Deployment and Service are still there as they were
// (the same objects, not written since: the same generation, Service resourceVersion and entry of our field
// manager), status.canary naming its revision as retiring, with a CanaryLeft event and explain's words; and that
// the Deployment goes only once canary.Retire has passed since the route left it.
func retiresAfterTheRoute(t *testing.T, ns string, was canaryObjects) {
	t.Helper()
	waitRoute(t, ns, "[/] web=1")
	app := &webappv2.WebApp{}
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	ctx := context.Background()
	// (The route is written before the status, in the same reconcile.)
	testutil.Eventually(t, 5*time.Second, "status.canary saying the canary retires", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		if c := app.Status.Canary; c == nil || c.RetiringRevision != was.dep.Annotations[webappv2.AnnotationRevision] || c.RetiringSince == nil {
			return fmt.Errorf("the route left revision %s, but status.canary does not say it retires: %+v", was.dep.Annotations[webappv2.AnnotationRevision], c)
		}
		return nil
	})
	c := app.Status.Canary
	if err := get(ctx, ns, "web-canary", dep); err != nil || dep.UID != was.dep.UID || dep.Generation != was.dep.Generation || ourWrite(dep) != ourWrite(was.dep) {
		t.Fatalf("the route has just left the canary, but its Deployment is not as it was (%s, generation %d, our entry %s): %v", was.dep.UID,
			was.dep.Generation, ourWrite(was.dep), err)
	}
	if err := get(ctx, ns, "web-canary", svc); err != nil || svc.UID != was.svc.UID || svc.ResourceVersion != was.svc.ResourceVersion {
		t.Fatalf("the route has just left the canary, but its Service is not as it was (%s at %s): %v", was.svc.UID, was.svc.ResourceVersion, err)
	}
	testutil.Eventually(t, wait10s, "the CanaryLeft event", func(context.Context) error {
		want := "web CanaryLeft: The spec left revision " + c.RetiringRevision + ": no traffic is sent to it from now on"
		if events := eventsSince(t, ns, time.Time{}); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, want) }) {
			return fmt.Errorf("no event %q in %q", want, events)
		}
		return nil
	})
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, c.RetiringRevision+": the spec left this version") {
		t.Errorf("explain does not say the canary's pods retire: exit %d, %s%s", code, out, errOut)
	}
	// (retiringSince is kept to the second: the Deployment may go up to a second before Retire from the route's
	// change, never sooner.)
	earliest := c.RetiringSince.Add(canary.Retire - time.Second)
	testutil.Eventually(t, 30*time.Second, "the retiring canary's Deployment gone", func(ctx context.Context) error {
		err := get(ctx, ns, "web-canary", dep)
		switch {
		case apierrors.IsNotFound(err) || err == nil && dep.UID != was.dep.UID:
			if now := time.Now(); now.Before(earliest) {
				t.Errorf("the retiring canary's Deployment went at %s, before %s (retiring since %s)", now.UTC().Format(time.RFC3339Nano), earliest, c.RetiringSince)
			}
			return nil
		case err == nil:
			return fmt.Errorf("still there")
		}
		return err
	})
}

// TestASpecThatLeavesACanaryRetiresItsPodsAfterTheRoute: on the real API server, a spec set back mid-canary, a
// newer version mid-canary (twice, an operator restart in the second's retire), and a strategy taken out mid-canary
// with a port added each move the route off the canary at once and keep its objects as they are for canary.Retire
// (the gateway follows the route first: requests already on their way are answered), then let them go, a new
// version's canary starting only then. The Deployment controller's part is played by the test; a fresh operator
// writes nothing once it is over.
func TestASpecThatLeavesACanaryRetiresItsPodsAfterTheRoute(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	steps := []webappv2.CanaryStep{{Weight: 50, Gate: &webappv2.CanaryGate{}}}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose:  &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: steps}},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	stableOnly, split := "[/] web=1", "[/] web=50,web-canary=50"
	waitRoute(t, ns, stableOnly)
	canaryAt := func(image string) canaryObjects {
		t.Helper()
		dep, svc := &appsv1.Deployment{}, &corev1.Service{}
		testutil.Eventually(t, wait10s, "the canary of "+image, func(ctx context.Context) error {
			if err := get(ctx, ns, "web-canary", dep); err != nil {
				return err
			}
			if img := dep.Spec.Template.Spec.Containers[0].Image; img != image {
				return fmt.Errorf("the canary runs %s", img)
			}
			return nil
		})
		markAvailable(t, ns, "web-canary")
		canaryPhase(t, ns, "web", "Canary/0/50")
		waitRoute(t, ns, split)
		if err := get(ctx, ns, "web-canary", dep); err != nil {
			t.Fatal(err)
		}
		if err := get(ctx, ns, "web-canary", svc); err != nil {
			t.Fatal(err)
		}
		return canaryObjects{dep: dep, svc: svc}
	}

	// Set back to the stable version mid-canary (a reverted commit): the route first, the pods 10 s later.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	was := canaryAt("shop:2")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:1" })
	retiresAfterTheRoute(t, ns, was)
	gone(t, ns, "web-canary", &corev1.Service{})
	if c := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary; c.RetiringRevision != "" || c.RetiringSince != nil {
		t.Errorf("the canary is gone, but status.canary still says it retires: %+v", c)
	}

	// A newer version mid-canary: the new one's canary starts once the one it replaces has retired.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:3" })
	was = canaryAt("shop:3")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:4" })
	retiresAfterTheRoute(t, ns, was)
	was = canaryAt("shop:4")

	// An operator restart while the pods of a version the spec left retire: they go when they would have.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:5" })
	op.stop()
	op = startOperator(t, ns, time.Second)
	retiresAfterTheRoute(t, ns, was)
	was = canaryAt("shop:5")

	// The strategy taken out mid-canary, with a port added (allowed only then): the spec's version rolls in the
	// Deployment, the canary's pods retire, their Service with its ports as it was.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Spec.Rollout.Canary = nil
		a.Spec.Ports = append(a.Spec.Ports, webappv2.Port{Name: "admin", Port: 9090})
	})
	retiresAfterTheRoute(t, ns, was)
	stableImage(t, ns, "web", "shop:5", "the spec's version, without a strategy")
	gone(t, ns, "web-canary", &corev1.Service{})
	markAvailable(t, ns, "web")
	testutil.Eventually(t, wait10s, "status.canary gone with the strategy", func(ctx context.Context) error {
		a := &webappv2.WebApp{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, a); err != nil {
			return err
		}
		if a.Status.Canary != nil {
			return fmt.Errorf("status.canary: %+v", a.Status.Canary)
		}
		return nil
	})
	restartCostsNoWrites(t, op, ns)
}
