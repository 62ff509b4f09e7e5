package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// markAvailable writes the Deployment's status as the Deployment controller would once all pods are available
// (envtest runs no controller-manager).
func markAvailable(t *testing.T, ns, name string) {
	t.Helper()
	intrudeStatus(t, ns, name, func(d *appsv1.Deployment) {
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	})
}

func intrudeStatus(t *testing.T, ns, name string, change func(*appsv1.Deployment)) {
	t.Helper()
	testutil.Eventually(t, wait10s, "deployment status written", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := get(ctx, ns, name, d); err != nil {
			return err
		}
		change(d)
		return k8s.Status().Update(ctx, d)
	})
}

// waitReady waits until the WebApp's Ready condition, for its current generation, has status and reason and a
// message containing each of inMessage, and returns the WebApp as it was then.
func waitReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string, inMessage ...string) *webappv1.WebApp {
	t.Helper()
	return waitReadyWithin(t, wait10s, ns, name, status, reason, inMessage...)
}

// waitReadyWithin is waitReady with its own deadline.
func waitReadyWithin(t *testing.T, timeout time.Duration, ns, name string, status metav1.ConditionStatus, reason string, inMessage ...string) *webappv1.WebApp {
	t.Helper()
	app := &webappv1.WebApp{}
	testutil.Eventually(t, timeout, fmt.Sprintf("Ready=%s %s %q", status, reason, inMessage), func(ctx context.Context) error {
		if err := get(ctx, ns, name, app); err != nil {
			return err
		}
		c := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != app.Generation ||
			slices.ContainsFunc(inMessage, func(s string) bool { return !strings.Contains(c.Message, s) }) {
			return fmt.Errorf("ready = %+v (generation %d)", c, app.Generation)
		}
		return nil
	})
	return app
}

// waitReconciles waits until the webapp controllers have finished at least n more reconciles than before.
func waitReconciles(t *testing.T, before, n float64) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%v reconciles", n), func(context.Context) error {
		if got := reconcileCount(t) - before; got < n {
			return fmt.Errorf("%v reconciles so far", got)
		}
		return nil
	})
}

func TestConvergedWebAppsCostZeroWritesEvenAfterARestart(t *testing.T) {
	ns := newNamespace(t)
	const requeue = time.Second
	names := []string{"a", "b", "c"}

	// The first operator converges three WebApps; one becomes Ready (its Deployment reports all pods available).
	first := startOperator(t, ns, requeue)
	for i, n := range names {
		createWebApp(t, ns, n, int32(i+1), 80)
		waitChildren(t, ns, n)
	}
	markAvailable(t, ns, "a")
	readyApp := waitReady(t, ns, "a", metav1.ConditionTrue, webappv2.ReasonDeploymentReady, "Deployment has 1/1 replicas available")
	if readyApp.Status.AvailableReplicas != 1 {
		t.Errorf("availableReplicas %d, want 1", readyApp.Status.AvailableReplicas)
	}
	for _, n := range names[1:] {
		waitReady(t, ns, n, metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	}
	transition := meta.FindStatusCondition(readyApp.Status.Conditions, webappv1.ConditionReady).LastTransitionTime

	// Converged: three requeue periods of resyncs for every WebApp send nothing.
	first.writes.take()
	waitResyncs(t, 3, 30*time.Second)
	if w := first.writes.take(); len(w) != 0 {
		t.Errorf("converged operator sent %d writes: %q", len(w), w)
	}

	// A restarted operator (new process state, empty cache) reconciles everything again and sends nothing.
	second := restartCostsNoWrites(t, first, ns)
	again := waitReady(t, ns, "a", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)
	if got := meta.FindStatusCondition(again.Status.Conditions, webappv1.ConditionReady).LastTransitionTime; !got.Equal(&transition) {
		t.Errorf("lastTransitionTime changed from %v to %v without a status change", transition, got)
	}

	// A real change costs exactly the writes it needs: a new replica count touches the Deployment and the status.
	second.writes.take()
	update(t, ns, "a", &webappv1.WebApp{}, func(app *webappv1.WebApp) { app.Spec.Replicas = 2 })
	waitReady(t, ns, "a", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	markAvailable(t, ns, "a")
	waitReady(t, ns, "a", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)
	waitResyncs(t, 2, 30*time.Second)
	writes := second.writes.take()
	depWrites, pdbWrites, statusWrites, other := 0, 0, 0, 0
	for _, w := range writes {
		switch {
		case w == "POST /apis/events.k8s.io/v1/namespaces/"+ns+"/events" || strings.HasPrefix(w, "PATCH /apis/events.k8s.io/v1/namespaces/"+ns+"/events/"):
			// The "Updated" event of the change.
		case w == "PATCH /apis/policy/v1/namespaces/"+ns+"/poddisruptionbudgets/a":
			// Two replicas now: a PodDisruptionBudget is created.
			pdbWrites++
		case w == "PATCH /apis/apps/v1/namespaces/"+ns+"/deployments/a":
			depWrites++
		case w == "PATCH /apis/example.com/v2/namespaces/"+ns+"/webapps/a/status":
			statusWrites++
		default:
			other++
		}
	}
	// One apply each for the Deployment and the PDB; status goes False then True (and its counts change).
	if depWrites != 1 || pdbWrites != 1 || other != 0 || statusWrites < 2 || statusWrites > 5 {
		t.Errorf("scaling sent %d deployment, %d PDB, %d status and %d other writes: %q", depWrites, pdbWrites, statusWrites, other, writes)
	}
}
