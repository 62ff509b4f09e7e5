package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapplyconfiguration "sigs.k8s.io/gateway-api/applyconfiguration"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/gen"
	"github.com/example/webapp-operator/test/testutil"
)

// promiseSeedAndCount: TestEveryAcceptedWebAppConvergesThenCostsZeroWrites runs WEBAPP_FUZZ_COUNT generated
// WebApps (200 by default) from WEBAPP_FUZZ_SEED (1 by default); `make fuzz` sets both.
// keepClaim makes next's owned claim the one cur has, where both have one: the CRD allows a claim's size only to
// grow and its class and access mode not to change, and a claim one pod at a time mounts keeps the WebApp at one
// replica (so next's count, autoscaling and surge give way). A claim next drops or adds is a change like any other.
func keepClaim(cur, next *webappv2.WebAppSpec) {
	var old *webappv2.OwnedClaim
	for _, v := range cur.Volumes {
		if v.Claim != nil {
			old = v.Claim
		}
	}
	for i := range next.Volumes {
		if next.Volumes[i].Claim == nil || old == nil {
			continue
		}
		next.Volumes[i].Claim = old.DeepCopy()
		if old.SingleWriter() {
			next.Replicas, next.Autoscaling, next.Rollout.MaxSurge, next.Rollout.MaxUnavailable = nil, nil, nil, nil
		}
	}
}

func promiseSeedAndCount(t *testing.T) (uint64, int) {
	t.Helper()
	return testutil.SeedAndCount(t, "WEBAPP_FUZZ_SEED", "WEBAPP_FUZZ_COUNT", 200)
}

// The whole promise, for every WebApp the API server accepts: it converges (children written, or Ready=False with
// the server's refusal), what our manager owns is exactly what it sends, three resyncs and a restart of the
// operator then cost zero writes, and deleting it never gets stuck (Orphan releases, Delete lets go).
func TestEveryAcceptedWebAppConvergesThenCostsZeroWrites(t *testing.T) {
	seed, count := promiseSeedAndCount(t)
	t.Logf("seed %d, %d cases (WEBAPP_FUZZ_SEED=%d WEBAPP_FUZZ_COUNT=%d make fuzz)", seed, count, seed, count)
	fmt.Printf("promise test: seed %d, %d cases\n", seed, count)
	// HTTPRoute is a child only where the Gateway API is installed.
	installGatewayAPI(t)
	ns := newNamespace(t)
	noops := metricSum(t, "webapp_operator_noop_applies_total", nil)
	first := startOperatorWith(t, ns, promiseRequeue, operatorOptions{workers: 4})

	g := gen.New(seed)
	apps := map[string]*webappv1.WebApp{}
	ctx := context.Background()
	for i := range count {
		// Every other case is drawn and created as v2; the others as v1, which the operator reads as v2.
		app := g.WebApp(ns, fmt.Sprintf("case-%d", i))
		var create client.Object = app.DeepCopy()
		if i%2 == 1 {
			create, app = g.WebAppV2(ns, fmt.Sprintf("case-%d", i))
		}
		if err := k8s.Create(ctx, create); err != nil {
			t.Fatalf("the generator drew a WebApp the API server refuses: %v\n%s", err, gen.Manifest(app))
		}
		apps[app.Name] = app
	}
	refused := waitConverged(t, ns, apps, time.Minute+time.Duration(count)*time.Second)
	t.Logf("%d cases converged, %d of them refused by the Deployment API", len(apps), len(refused))
	for name := range refused {
		// What the CRD lets through and the Deployment API refuses: each is a candidate for a rule in the CRD.
		app := &webappv1.WebApp{}
		if err := get(ctx, ns, name, app); err == nil {
			if c := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady); c != nil {
				t.Logf("refused %s: %s", name, c.Message)
			}
		}
	}

	// What our manager owns on each child is exactly the field set of the last apply it sent there.
	for name, app := range apps {
		if refused[name] {
			continue
		}
		for _, child := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &corev1.PersistentVolumeClaim{},
			&networkingv1.Ingress{}, &gwv1.HTTPRoute{}} {
			if msg := ownedIsSent(t, first, ns, name, child); msg != "" {
				t.Errorf("%s\n%s", msg, gen.Manifest(app))
			}
		}
	}

	// At rest: three resyncs of every WebApp send nothing and record no event, refused ones included. (Events
	// recorded during convergence may still be on their way: they are told apart by their time.)
	first.writes.take()
	rest := time.Now()
	resyncs(t, count)
	failIfWrites(t, "at rest", first.writes.take(), eventsSince(t, ns, rest), apps, nil)

	// After a restart (empty cache, nothing remembered): nothing either, but one more try of each refused child.
	first.stop()
	restart := time.Now()
	second := startOperatorWith(t, ns, promiseRequeue, operatorOptions{workers: 4})
	waitRetried(t, second, refused, count)
	resyncs(t, count)
	failIfWrites(t, "after a restart", second.writes.take(), eventsSince(t, ns, restart), apps, refused)

	// Changes from one accepted WebApp to another: every third case is redrawn (as v2, every field) and updated in
	// place, as a user's next apply would; the same promise holds after the change.
	changed := map[string]*webappv1.WebApp{}
	// A change to a WebApp with a canary strategy starts a canary (never ready here: no Deployment controller), so
	// its own Deployment keeps running the version before.
	previous := map[string]*webappv1.WebApp{}
	for i := 0; i < count; i += 3 {
		name := fmt.Sprintf("case-%d", i)
		cur := &webappv2.WebApp{}
		if err := get(ctx, ns, name, cur); err != nil {
			t.Fatal(err)
		}
		next, _ := g.WebAppV2(ns, name)
		keepClaim(&cur.Spec, &next.Spec)
		if cur.Spec.Rollout.Canary != nil && next.Spec.Rollout.Canary != nil {
			// The CRD keeps the ports while a canary strategy stays (the stable version's Service serves them).
			next.Spec.Ports = cur.Spec.Ports
		}
		spoke := gen.Spoke(next)
		cur.Spec = next.Spec
		if err := k8s.Update(ctx, cur); err != nil {
			t.Fatalf("the API server refuses a change to a WebApp it accepted: %v\nfrom:\n%s\nto:\n%s", err, gen.Manifest(apps[name]), gen.Manifest(spoke))
		}
		if next.Spec.Rollout.Canary != nil {
			previous[name] = apps[name]
		}
		apps[name], changed[name] = spoke, spoke
	}
	refusedAfter := waitConverged(t, ns, apps, time.Minute+time.Duration(len(changed))*time.Second)
	for name := range changed {
		if refusedAfter[name] {
			continue
		}
		for _, child := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &corev1.PersistentVolumeClaim{},
			&networkingv1.Ingress{}, &gwv1.HTTPRoute{}} {
			// The last apply of the child: the second operator's, or the first's for a child the change left alone.
			msg := ownedIsSent(t, second, ns, name, child)
			if strings.Contains(msg, "no apply of it was seen") {
				msg = ownedIsSent(t, first, ns, name, child)
			}
			if msg != "" {
				t.Errorf("after a change: %s\n%s", msg, gen.Manifest(apps[name]))
			}
		}
	}
	t.Logf("%d cases changed, %d of them refused by the Deployment API", len(changed), len(refusedAfter))
	second.writes.take()
	rest = time.Now()
	resyncs(t, count)
	failIfWrites(t, "at rest after the changes", second.writes.take(), eventsSince(t, ns, rest), apps, nil)
	second.stop()
	restart = time.Now()
	second = startOperatorWith(t, ns, promiseRequeue, operatorOptions{workers: 4})
	waitRetried(t, second, refusedAfter, count)
	resyncs(t, count)
	failIfWrites(t, "after a restart after the changes", second.writes.take(), eventsSince(t, ns, restart), apps, refusedAfter)

	// The safety net was never needed: no apply found the server's object already as we sent it.
	if n := metricSum(t, "webapp_operator_noop_applies_total", nil) - noops; n != 0 {
		t.Errorf("%v applies changed nothing on the server (webapp_operator_noop_applies_total); the operator log says which", n)
	}

	// Deleting never gets stuck; Orphan children are released and keep their spec.
	for name := range apps {
		if err := k8s.Delete(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, time.Minute+time.Duration(count)*100*time.Millisecond, "every WebApp deleted", func(ctx context.Context) error {
		list := &webappv1.WebAppList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d WebApps left, e.g. %s with finalizers %v:\n%s", len(list.Items), list.Items[0].Name, list.Items[0].Finalizers, gen.Manifest(apps[list.Items[0].Name]))
		}
		return nil
	})
	for name, app := range apps {
		// A refused child is not there, or (a change refused) still has the spec of the last one accepted.
		if app.Spec.DeletionPolicy != webappv1.DeletionPolicyOrphan || refused[name] || refusedAfter[name] {
			continue
		}
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, name, dep); err != nil {
			t.Errorf("orphaned Deployment %s: %v", name, err)
			continue
		}
		image := dep.Spec.Template.Spec.Containers[0].Image
		if len(dep.OwnerReferences) != 0 || image != app.Spec.Image && (previous[name] == nil || image != previous[name].Spec.Image) {
			t.Errorf("orphaned Deployment %s: owners %v, image %s\n%s", name, dep.OwnerReferences, dep.Spec.Template.Spec.Containers[0].Image, gen.Manifest(app))
		}
	}
}

// promiseRequeue is the promise test's resync period.
const promiseRequeue = 2 * time.Second

// waitRetried waits until op, just started, has tried each refused WebApp's Deployment once more (a restarted
// operator remembers no refusal), so that try is judged in its own phase: the resync's walks only enqueue, and a
// queue that serves changed WebApps first may reach an unchanged one after the next phase has begun.
func waitRetried(t *testing.T, op *operator, refused map[string]bool, count int) {
	t.Helper()
	testutil.Eventually(t, time.Minute+time.Duration(count)*100*time.Millisecond, "one more try of each refused Deployment", func(context.Context) error {
		tried := map[string]bool{}
		for _, w := range op.writes.snapshot() {
			if method, p, _ := strings.Cut(w, " "); method == "PATCH" && path.Base(path.Dir(p)) == "deployments" {
				// A canary's Deployment is its WebApp's child too.
				tried[strings.TrimSuffix(path.Base(p), "-canary")] = true
			}
		}
		for name := range refused {
			if !tried[name] {
				return fmt.Errorf("%s's Deployment not tried yet", name)
			}
		}
		return nil
	})
}

// resyncs waits for three resyncs of count WebApps, resynced every promiseRequeue.
func resyncs(t *testing.T, count int) {
	t.Helper()
	const n, period = 3, promiseRequeue
	waitResyncs(t, n, time.Duration(n+1)*period+time.Minute+time.Duration(count*n)*20*time.Millisecond)
}

// waitConverged waits until every WebApp's status describes its generation and its children exist (and where its
// HPA exists, the count was handed to it: the status says so), or its Ready condition carries the Deployment API's
// refusal; it returns the names of the refused ones.
func waitConverged(t *testing.T, ns string, apps map[string]*webappv1.WebApp, timeout time.Duration) map[string]bool {
	t.Helper()
	refused := map[string]bool{}
	testutil.Eventually(t, timeout, "every WebApp converged", func(ctx context.Context) error {
		list := &webappv1.WebAppList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		deps := &appsv1.DeploymentList{}
		if err := k8s.List(ctx, deps, client.InNamespace(ns)); err != nil {
			return err
		}
		hpas := &autoscalingv2.HorizontalPodAutoscalerList{}
		if err := k8s.List(ctx, hpas, client.InNamespace(ns)); err != nil {
			return err
		}
		exists, autoscaled := map[string]bool{}, map[string]bool{}
		for _, d := range deps.Items {
			exists[d.Name] = true
		}
		for _, h := range hpas.Items {
			autoscaled[h.Name] = true
		}
		pending := 0
		var example string
		for _, app := range list.Items {
			ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
			switch {
			case ready == nil || ready.ObservedGeneration != app.Generation || app.Status.ObservedGeneration != app.Generation:
			case ready.Reason == webappv2.ReasonInvalidChild:
				if !strings.Contains(ready.Message, "Invalid value") && !strings.Contains(ready.Message, "invalid") {
					return fmt.Errorf("%s: Ready says %q, not the server's refusal", app.Name, ready.Message)
				}
				refused[app.Name] = true
				continue
			case ready.Status == metav1.ConditionUnknown || ready.Reason == webappv2.ReasonReconcileError:
				return fmt.Errorf("%s: Ready = %+v\n%s", app.Name, ready, gen.Manifest(apps[app.Name]))
			case app.Status.Canary != nil && app.Status.Canary.Phase == "RolledBack" && exists[app.Name+"-canary"]:
				// A canary rolled back (by a plan its Gateway cannot do, say) whose pods retire for canary.Retire
				// after the traffic left them: not at rest yet.
			case exists[app.Name] && (!autoscaled[app.Name] || app.Status.ReplicasSetBy == "HorizontalPodAutoscaler"):
				continue
			}
			pending++
			example = fmt.Sprintf("%s: status %+v", app.Name, app.Status)
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d not converged, e.g. %s", pending, len(list.Items), example)
		}
		return nil
	})
	return refused
}

// ownedIsSent compares what our manager owns on the child named name with the field set of the last apply the
// operator sent to it; "" when they are the same (or neither exists).
func ownedIsSent(t *testing.T, op *operator, ns, name string, child client.Object) string {
	t.Helper()
	ctx := context.Background()
	err := get(ctx, ns, name, child)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	gvk, err := k8s.GroupVersionKindFor(child)
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := k8s.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "/api/v1"
	if gvk.Group != "" {
		prefix = path.Join("/apis", gvk.Group, gvk.Version)
	}
	body := op.writes.lastApply(path.Join(prefix, "namespaces", ns, mapping.Resource.Resource, name))
	if body == nil {
		return fmt.Sprintf("%s %s exists but no apply of it was seen", gvk.Kind, name)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(body, &u.Object); err != nil {
		t.Fatal(err)
	}
	// The Gateway API's kinds are typed by its own module's schema.
	converter := applyconfigurations.NewTypeConverter(k8s.Scheme())
	if gvk.Group == gwv1.GroupName {
		converter = gwapplyconfiguration.NewTypeConverter(k8s.Scheme())
	}
	tv, err := converter.ObjectToTyped(u)
	if err != nil {
		t.Fatalf("typing the apply of %s %s: %v", gvk.Kind, name, err)
	}
	sent, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	// The server never records the object's identity as owned, nor the resourceVersion of a create-only apply or
	// the UID of an apply to an existing object (preconditions, not fields).
	sent = sent.Difference(fieldpath.NewSet(fieldpath.MakePathOrDie("apiVersion"), fieldpath.MakePathOrDie("kind"),
		fieldpath.MakePathOrDie("metadata", "name"), fieldpath.MakePathOrDie("metadata", "namespace"),
		fieldpath.MakePathOrDie("metadata", "resourceVersion"), fieldpath.MakePathOrDie("metadata", "uid")))
	owned := &fieldpath.Set{}
	for _, e := range child.GetManagedFields() {
		if e.Manager == webappv2.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			if err := owned.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !owned.Leaves().Equals(sent.Leaves()) {
		return fmt.Sprintf("%s %s: owned but not sent %v; sent but not owned %v", gvk.Kind, name,
			owned.Leaves().Difference(sent.Leaves()), sent.Leaves().Difference(owned.Leaves()))
	}
	return ""
}

// eventsSince lists the events of namespace ns recorded (or repeated) since t, as "reason: note".
func eventsSince(t *testing.T, ns string, since time.Time) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		last := e.EventTime.Time
		if e.Series != nil {
			last = e.Series.LastObservedTime.Time
		}
		if !last.Before(since) {
			out = append(out, e.Regarding.Name+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// failIfWrites fails with the writes and events seen, and the manifest of a WebApp they concern, to reproduce.
// Each child refused by the server (of a WebApp in retried) may be tried once, with its ApplyFailed event.
func failIfWrites(t *testing.T, when string, writes, events []string, apps map[string]*webappv1.WebApp, retried map[string]bool) {
	t.Helper()
	var bad []string
	tried := map[string]bool{}
	for _, w := range writes {
		name := strings.TrimSuffix(path.Base(w), "/status")
		// A canary's Deployment is its WebApp's child too (the promise test's names never end in -canary).
		name = strings.TrimSuffix(name, "-canary")
		switch {
		case strings.Contains(w, "/events"):
			// Judged by the events themselves, below.
		case retried[name] && strings.HasPrefix(w, "PATCH /apis/apps/v1/") && !tried[w]:
			// Once per child: a canary's spec the Deployment API refuses is refused for both Deployments.
			tried[w] = true
		default:
			bad = append(bad, w)
		}
	}
	for _, e := range events {
		name, rest, _ := strings.Cut(e, " ")
		if !retried[name] || !strings.HasPrefix(rest, "ApplyFailed: ") {
			bad = append(bad, "event "+e)
		}
	}
	if len(bad) == 0 {
		return
	}
	slices.Sort(bad)
	name := strings.TrimSuffix(path.Base(strings.Fields(bad[0])[1]), "/status")
	if strings.HasSuffix(bad[0], "/status") {
		name = path.Base(path.Dir(strings.Fields(bad[0])[1]))
	}
	// (A canary's Deployment is its WebApp's.)
	name = strings.TrimSuffix(name, "-canary")
	example := ""
	if app, ok := apps[name]; ok {
		live := &webappv1.WebApp{}
		if err := get(context.Background(), app.Namespace, name, live); err == nil {
			if ready := meta.FindStatusCondition(live.Status.Conditions, webappv1.ConditionReady); ready != nil {
				example = fmt.Sprintf("\n%s's Ready: %s/%s: %s", name, ready.Status, ready.Reason, ready.Message)
			}
		}
		example += "\nto reproduce, apply:\n" + gen.Manifest(app)
	}
	t.Errorf("%s: %d writes, want 0: %q%s", when, len(bad), bad, example)
}
