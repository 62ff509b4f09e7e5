package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
