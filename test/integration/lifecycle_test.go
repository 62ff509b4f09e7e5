package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// setPolicy sets the deletion policy of WebApp web.
func setPolicy(t *testing.T, ns string, p webappv1.DeletionPolicy) {
	t.Helper()
	update(t, ns, "web", &webappv1.WebApp{}, func(app *webappv1.WebApp) { app.Spec.DeletionPolicy = p })
}

// waitFinalizer waits until WebApp web carries our finalizer, applied by our manager, or neither.
func waitFinalizer(t *testing.T, ns string, want bool) {
	t.Helper()
	testutil.Eventually(t, wait10s, fmt.Sprintf("finalizer present = %v", want), func(ctx context.Context) error {
		app := &webappv1.WebApp{}
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		if got := slices.Contains(app.Finalizers, webappv1.Finalizer); got != want {
			return fmt.Errorf("finalizers %v", app.Finalizers)
		}
		// The finalizer is ours through Apply, like everything else we write.
		if owns := slices.Contains(ownedLeaves(t, app, webappv2.FieldManager, ""), `.metadata.finalizers[="example.com/finalizer"]`); owns != want {
			return fmt.Errorf("%s owns the finalizer: %v", webappv2.FieldManager, owns)
		}
		return nil
	})
}

func TestDeletionPolicyDeleteNeedsNoFinalizer(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Second)
	waitResyncs(t, 2, 30*time.Second)
	app := &webappv1.WebApp{}
	if err := get(context.Background(), ns, "web", app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.DeletionPolicy != webappv1.DeletionPolicyDelete || len(app.Finalizers) != 0 {
		t.Errorf("deletionPolicy %q finalizers %v, want Delete and none", app.Spec.DeletionPolicy, app.Finalizers)
	}
}

func TestDeletionPolicyOrphanReleasesTheChildren(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Minute)

	// Switching the policy adds and removes the finalizer.
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)
	setPolicy(t, ns, webappv1.DeletionPolicyDelete)
	waitFinalizer(t, ns, false)
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)

	if err := k8s.Delete(context.Background(), &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "WebApp gone, children kept without an owner", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", &webappv1.WebApp{}); err == nil {
			return fmt.Errorf("WebApp still there")
		}
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			if err := get(ctx, ns, "web", o); err != nil {
				return err
			}
			if refs := o.GetOwnerReferences(); len(refs) != 0 {
				return fmt.Errorf("%T still has owner references %+v", o, refs)
			}
		}
		return nil
	})
}

func TestEventsTellWhatHappened(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Minute)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	intrude(t, ns, "web", &appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(4)) })
	testutil.Eventually(t, wait10s, "events recorded", func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		var got []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "WebApp" && e.Regarding.Name == "web" {
				got = append(got, e.Reason+": "+e.Note)
			}
		}
		for _, want := range []string{"Created: Created Deployment web, Service web", "DriftRepaired: Put back Deployment web"} {
			if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
				return fmt.Errorf("no event %q in %q", want, got)
			}
		}
		return nil
	})
}

// The scale subresource is how an HorizontalPodAutoscaler (or `kubectl scale webapp`) sets replicas: as another
// field manager writing the WebApp's /scale. The operator carries it to the Deployment.
func TestScaleSubresourceWrittenByAnotherManager(t *testing.T) {
	ns, _ := runningWebApp(t, 2, time.Minute)
	ctx := context.Background()
	app := &webappv1.WebApp{}
	testutil.Eventually(t, wait10s, "scale read", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		scale := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(ctx, app, scale); err != nil {
			return err
		}
		if scale.Spec.Replicas != 2 || scale.Status.Selector != "app.kubernetes.io/instance=web,app.kubernetes.io/name=webapp" {
			return fmt.Errorf("scale = %+v", scale)
		}
		return nil
	})
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 6}}
	if err := k8s.SubResource("scale").Update(ctx, app, client.WithSubResourceBody(scale), client.FieldOwner("autoscaler")); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "web", 6)
	if err := get(ctx, ns, "web", app); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range app.ManagedFields {
		found = found || (e.Manager == "autoscaler" && e.Subresource == "scale" && strings.Contains(e.FieldsV1.GetRawString(), "f:replicas"))
	}
	if app.Spec.Replicas != 6 || !found {
		t.Errorf("spec.replicas %d; managedFields %+v: want 6 set by autoscaler through /scale", app.Spec.Replicas, app.ManagedFields)
	}
}

func TestProgressDeadlineShowsInConditions(t *testing.T) {
	ns, _ := runningWebApp(t, 2, time.Minute)
	// What the Deployment controller reports when a rollout made no progress within progressDeadlineSeconds.
	intrudeStatus(t, ns, "web", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
			Message: `ReplicaSet "web-1" has timed out progressing.`,
		}}}
	})
	app := waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonProgressDeadlineExceeded)
	if prog := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionProgressing); prog == nil || prog.Status != metav1.ConditionFalse ||
		prog.Reason != webappv2.ReasonProgressDeadlineExceeded {
		t.Errorf("progressing = %+v, want False %s", prog, webappv2.ReasonProgressDeadlineExceeded)
	}
}

// denyingPolicy creates a ValidatingAdmissionPolicy name that denies, in namespace ns, the requests of rule whose
// object fails expression, saying message, and its binding, both deleted when the test ends; it returns the binding
// (deleting it lifts the policy).
func denyingPolicy(t *testing.T, ns, name string, rule admissionregistrationv1.RuleWithOperations, expression, message string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule}}},
			Validations:      []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	return binding
}

// An admission policy refusing our Service: Ready says so with the server's message, and the retries back off
// instead of hammering the API server.
func TestApplyFailureShowsInReadyWithoutARetryStorm(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	denyingPolicy(t, ns, "no-port-81-"+ns, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
	}, "object.spec.ports.all(p, p.port != 81)", "port 81 is reserved by the platform team")
	// The policy takes a moment to be enforced: probe with a Service of our own until it is refused.
	testutil.Eventually(t, wait10s, "policy enforced", func(ctx context.Context) error {
		probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81}}}}
		if err := k8s.Create(ctx, probe, client.DryRunAll); err == nil {
			return fmt.Errorf("port 81 still accepted")
		}
		return nil
	})

	startOperator(t, ns, time.Minute)
	createWebApp(t, ns, "web", 1, 81)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonInvalidChild, "port 81 is reserved by the platform team", "applying Service "+ns+"/web")
	// The Deployment is applied all the same: one child's failure does not hold back the other.
	if err := get(ctx, ns, "web", &appsv1.Deployment{}); err != nil {
		t.Errorf("deployment: %v", err)
	}
	// A refusal waits for the resync (a minute here): over the next five seconds the WebApp is reconciled at most
	// a couple of times (late events of its children), never in a loop. A loop is the absence of a pause, which
	// only a window can show: the window is what is measured, and a loop fails the test as soon as it shows.
	before := reconcileCount(t)
	testutil.Consistently(t, 5*time.Second, "no retry loop for a refused Service", func(context.Context) error {
		if n := reconcileCount(t) - before; n > 3 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
}

// A Service of the WebApp's name that someone else created is never taken over: not its selector, not its owner.
func TestAServiceThatIsNotOursIsLeftAlone(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "payments"}, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	startOperator(t, ns, time.Minute)
	createWebApp(t, ns, "web", 1, 80)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonChildNotOwned, "Service "+ns+"/web already exists")
	svc := &corev1.Service{}
	if err := get(ctx, ns, "web", svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector["app"] != "payments" || len(svc.OwnerReferences) != 0 || svc.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("their Service was changed: %+v", svc)
	}
	// The Deployment, which is free, is created all the same.
	if err := get(ctx, ns, "web", &appsv1.Deployment{}); err != nil {
		t.Errorf("deployment: %v", err)
	}
}
