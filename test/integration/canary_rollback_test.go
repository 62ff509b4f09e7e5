package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// TestRollbackWithinTheWindowNeedsNoCanary (issue 51, item 5): after a promotion, the spec set back to the version
// before it (a reverted commit) within rollbackWindowSeconds is stable at once: the stable Deployment rolls back to
// it, no canary Deployment is created, status.canary says so, and a fresh operator then sends nothing. The version
// it replaced is not kept for a second rollback: setting the spec forward again is a canary.
func TestRollbackWithinTheWindowNeedsNoCanary(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	app := canaryStarted(t, ns, &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50}}, RollbackWindowSeconds: 600})
	first := app.Status.Canary.StableRevision
	// The canary is ready (canaryStarted), passes its one step, and the stable Deployment rolls to it.
	canaryPhase(t, ns, "web", "Promoting/1/50")
	stableImage(t, ns, "web", "shop:2", "promoted")
	markAvailable(t, ns, "web")
	promoted := status(t, ns, "promoted, the version before kept known", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "Stable" && c.PreviousRevision == first && c.PreviousUntil != nil
	})
	if left := time.Until(promoted.Status.Canary.PreviousUntil.Time); left < 9*time.Minute || left > 10*time.Minute {
		t.Errorf("previousUntil is %s away, want about 10m", left)
	}
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, ".status.canary.previousRevision: "+first+": the version before the last promotion: setting the spec back to it within") {
		t.Errorf("explain does not say the version before can be rolled back to at once: exit %d, %s%s", code, out, errOut)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Reverted: stable at once, the Deployment rolls back, no canary.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:1" })
	back := status(t, ns, "rolled back to the version before", func(c *webappv2.CanaryStatus) bool {
		return c.Phase == "Stable" && c.StableRevision == first
	})
	if c := back.Status.Canary; c.Reason != webappv2.ReasonRolledBackToPrevious || c.PreviousRevision != "" || c.CanaryRevision != "" {
		t.Errorf("status.canary after the rollback: %+v", c)
	}
	stableImage(t, ns, "web", "shop:1", "rolled back to the version before")
	if err := get(context.Background(), ns, "web-canary", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a canary Deployment for a rollback within the window: %v", err)
	}
	testutil.Eventually(t, wait10s, "a RolledBack event", func(context.Context) error {
		if ev := strings.Join(eventsSince(t, ns, time.Time{}), "\n"); !strings.Contains(ev, "web RolledBack: Rolled back to revision "+first+": the spec was set back") {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	markAvailable(t, ns, "web")
	op = restartCostsNoWrites(t, op, ns)

	// Forward again: the version rolled away from is a new canary (no window kept for it).
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryPhase(t, ns, "web", "Canary/0/0")
	restartCostsNoWrites(t, op, ns)
}

// TestAVersionKeptWarmTakesTheWayBackAtOnce (issue 51, item 5): with keepPreviousWarm, after a promotion the version
// it replaced runs in web-canary at the stable count, from the record of its pod template, with none of the
// traffic, and nothing is written at rest (a fresh operator too). The spec set back to it within the window sends it
// all the traffic in the route's next write, its Deployment not written (no pod of it rolls); the stable Deployment
// then rolls back behind the route, the traffic moves back to it, and the kept pods go after canary.Retire, with no
// window kept for the version left. Kept again after the next promotion, the pods go when the window ends.
func TestAVersionKeptWarmTakesTheWayBackAtOnce(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	spec := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50}}, RollbackWindowSeconds: 600, KeepPreviousWarm: true}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](3), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose:  &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: spec},
	}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	first := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary.StableRevision
	stableOnly := "[/] web=1"
	waitRoute(t, ns, stableOnly)
	// promoted takes image through its canary's one step to the end of its promotion (the Deployment controller's
	// part played by the test), and returns the revision it replaced.
	promoted := func(image string) string {
		t.Helper()
		update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = image })
		stableImage(t, ns, "web-canary", image, "web-canary running "+image)
		markAvailable(t, ns, "web-canary")
		stableImage(t, ns, "web", image, "promoted")
		markAvailable(t, ns, "web")
		a := status(t, ns, "promoted, the version before kept known", func(c *webappv2.CanaryStatus) bool {
			return c.Phase == "Stable" && c.PreviousRevision != "" && c.PreviousUntil != nil
		})
		return a.Status.Canary.PreviousRevision
	}
	if prev := promoted("shop:2"); prev != first {
		t.Fatalf("previousRevision %s, want %s", prev, first)
	}

	// Kept warm: web-canary runs shop:1 at the stable count, behind its Service, with none of the traffic.
	stableImage(t, ns, "web-canary", "shop:1", "the version before kept warm")
	deploymentAt(t, ns, "web-canary", 3, "the version before kept warm at the stable count")
	waitRoute(t, ns, stableOnly)
	if err := get(ctx, ns, "web-canary", &corev1.Service{}); err != nil {
		t.Errorf("no canary Service beside the pods kept warm: %v", err)
	}
	explains := func(want string) {
		t.Helper()
		testutil.Eventually(t, wait10s, "explain: "+want, func(context.Context) error {
			if code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web"); code != 0 || !strings.Contains(out, want) {
				return fmt.Errorf("exit %d, %s%s", code, out, errOut)
			}
			return nil
		})
	}
	explains(first + ": the version before the last promotion, to be kept warm in web-canary until")
	markAvailable(t, ns, "web-canary")
	explains(first + ": the version before the last promotion, its pods kept warm in web-canary with none of the traffic")
	op = restartCostsNoWrites(t, op, ns)

	// Set back within the window: all the traffic to the kept pods at once, their Deployment as it was.
	warm := &appsv1.Deployment{}
	if err := get(ctx, ns, "web-canary", warm); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:1" })
	waitRoute(t, ns, "[/] web=0,web-canary=100")
	back := canaryPhase(t, ns, "web", "Promoting/1/100")
	if c := back.Status.Canary; c.Reason != webappv2.ReasonRolledBackToPrevious || c.CanaryRevision != first || c.PreviousRevision != "" {
		t.Errorf("status.canary on the way back: %+v", c)
	}
	if dep := (&appsv1.Deployment{}); get(ctx, ns, "web-canary", dep) != nil || dep.UID != warm.UID || dep.Generation != warm.Generation || ourWrite(dep) != ourWrite(warm) {
		t.Errorf("the kept pods' Deployment was written on the way back (generation %d, was %d): its pods roll", dep.Generation, warm.Generation)
	}
	explains("All the traffic goes to revision " + first + " (web-canary), the version before the last promotion, whose pods were kept warm")
	testutil.Eventually(t, wait10s, "a RolledBack event", func(context.Context) error {
		if ev := strings.Join(eventsSince(t, ns, time.Time{}), "\n"); !strings.Contains(ev, "web RolledBack: Rolled back to revision "+first+": the spec was set back to revision "+first+", the version before revision") ||
			!strings.Contains(ev, "all the traffic went to its pods kept warm at once") {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	// The stable Deployment rolls back behind the route; then the traffic moves back to it, and the kept pods go.
	stableImage(t, ns, "web", "shop:1", "rolled back behind the route")
	waitRoute(t, ns, "[/] web=0,web-canary=100")
	markAvailable(t, ns, "web")
	waitRoute(t, ns, stableOnly)
	gone(t, ns, "web-canary", &appsv1.Deployment{})
	if c := canaryPhase(t, ns, "web", "Stable/0/0").Status.Canary; c.StableRevision != first || c.PreviousRevision != "" || c.CanaryRevision != "" {
		t.Errorf("status.canary after the way back: %+v (no window for the version left)", c)
	}
	gone(t, ns, "web-canary", &corev1.Service{})
	op = restartCostsNoWrites(t, op, ns)

	// Forward again, with a window of 20 s: kept warm after the promotion, gone when the window ends.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Rollout.Canary.RollbackWindowSeconds = 20 })
	promoted("shop:2")
	stableImage(t, ns, "web-canary", "shop:1", "the version before kept warm")
	end := status(t, ns, "the window's end", func(c *webappv2.CanaryStatus) bool { return c.PreviousUntil != nil }).Status.Canary.PreviousUntil.Time
	testutil.Eventually(t, 40*time.Second, "the kept pods gone at the window's end", func(ctx context.Context) error {
		err := get(ctx, ns, "web-canary", &appsv1.Deployment{})
		switch {
		case apierrors.IsNotFound(err):
			if now := time.Now(); now.Before(end.Add(-time.Second)) {
				t.Errorf("the kept pods went at %s, before their window's end %s", now.UTC().Format(time.RFC3339Nano), end)
			}
			return nil
		case err == nil:
			return fmt.Errorf("still there")
		}
		return err
	})
	gone(t, ns, "web-canary", &corev1.Service{})
	restartCostsNoWrites(t, op, ns)
}
