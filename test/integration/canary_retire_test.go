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

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/test/testutil"
)

// retiresAfterTheRoute checks, once the spec has left the canary Deployment was (its UID) while the route sent it
// traffic, that the route sends the canary nothing while that Deployment is still there, as it was (its UID, count
// and image), with its Service, status.canary naming its revision as retiring; and that the Deployment goes only
// once canary.Retire has passed since the route left it.
func retiresAfterTheRoute(t *testing.T, ns string, was *appsv1.Deployment, stableOnly string) {
	t.Helper()
	waitRoute(t, ns, stableOnly)
	app := &webappv2.WebApp{}
	dep := &appsv1.Deployment{}
	ctx := context.Background()
	if err := get(ctx, ns, "web", app); err != nil {
		t.Fatal(err)
	}
	c := app.Status.Canary
	if c == nil || c.RetiringRevision != was.Annotations[webappv2.AnnotationRevision] || c.RetiringSince == nil {
		t.Fatalf("the route left revision %s, but status.canary does not say it retires: %+v", was.Annotations[webappv2.AnnotationRevision], c)
	}
	if err := get(ctx, ns, "web-canary", dep); err != nil || dep.UID != was.UID || ptr.Deref(dep.Spec.Replicas, 0) != ptr.Deref(was.Spec.Replicas, 0) ||
		dep.Spec.Template.Spec.Containers[0].Image != was.Spec.Template.Spec.Containers[0].Image {
		t.Fatalf("the route has just left the canary, but its Deployment is not as it was (%s, %d pods of %s): %v", was.UID,
			ptr.Deref(was.Spec.Replicas, 0), was.Spec.Template.Spec.Containers[0].Image, err)
	}
	if err := get(ctx, ns, "web-canary", &corev1.Service{}); err != nil {
		t.Fatalf("the retiring pods' Service: %v", err)
	}
	testutil.Eventually(t, wait10s, "the CanaryLeft event", func(context.Context) error {
		want := "web CanaryLeft: The spec left revision " + c.RetiringRevision + ": the route sends it nothing from now on"
		if events := eventsSince(t, ns, time.Time{}); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, want) }) {
			return fmt.Errorf("no event %q in %q", want, events)
		}
		return nil
	})
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, c.RetiringRevision+": the spec left this version at") {
		t.Errorf("explain does not say the canary's pods retire: exit %d, %s%s", code, out, errOut)
	}
	// (retiringSince is kept to the second: the Deployment may go up to a second before Retire from the route's
	// change, never sooner.)
	earliest := c.RetiringSince.Add(canary.Retire - time.Second)
	testutil.Eventually(t, 30*time.Second, "the retiring canary's Deployment gone", func(ctx context.Context) error {
		err := get(ctx, ns, "web-canary", dep)
		switch {
		case apierrors.IsNotFound(err) || err == nil && dep.UID != was.UID:
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
// newer version mid-canary, and a strategy taken out mid-canary each move the route off the canary at once and
// keep its pods as they are for canary.Retire (the gateway follows the route first: requests already on their way
// are answered), then let them go, a new version's canary starting only then. The Deployment controller's part is
// played by the test; a fresh operator writes nothing once it is over.
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
	canaryAt := func(image string) *appsv1.Deployment {
		t.Helper()
		dep := &appsv1.Deployment{}
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
		return dep
	}

	// Set back to the stable version mid-canary (a reverted commit): the route first, the pods 10 s later.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	was := canaryAt("shop:2")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:1" })
	retiresAfterTheRoute(t, ns, was, stableOnly)
	gone(t, ns, "web-canary", &corev1.Service{})
	if c := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary; c.RetiringRevision != "" || c.RetiringSince != nil {
		t.Errorf("the canary is gone, but status.canary still says it retires: %+v", c)
	}

	// A newer version mid-canary: the new one's canary starts once the one it replaces has retired.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:3" })
	was = canaryAt("shop:3")
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:4" })
	retiresAfterTheRoute(t, ns, was, stableOnly)
	canaryAt("shop:4")

	// The strategy taken out mid-canary: the spec's version rolls in the Deployment, the canary's pods retire.
	was = &appsv1.Deployment{}
	if err := get(ctx, ns, "web-canary", was); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary = nil })
	retiresAfterTheRoute(t, ns, was, stableOnly)
	stableImage(t, ns, "web", "shop:4", "the spec's version, without a strategy")
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
