package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoac "k8s.io/client-go/applyconfigurations"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	"github.com/example/webapp-operator/applyconfig"
	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// fakeEnv is a fake client set up for Server-Side Apply, counting the write requests sent through it.
//
// The fake client records a status apply in managedFields as an apply of the whole object, without its "status"
// subresource, so it cannot model the WebApp's own applies (status, finalizer): those are counted apart in
// webAppWrites, and the zero-write claim for them is proven against the real API server in test/integration.
type fakeEnv struct {
	client.Client
	writes       atomic.Int32 // writes to anything but the WebApp: the children
	webAppWrites atomic.Int32 // applies of the WebApp and its status
}

func newFakeEnv(t testing.TB, objs ...client.Object) *fakeEnv {
	t.Helper()
	scheme := NewScheme()
	env := &fakeEnv{}
	count := func() { env.writes.Add(1) }
	env.Client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithTypeConverters(clientgoac.NewTypeConverter(scheme), applyconfig.NewTypeConverter(scheme)).
		WithStatusSubresource(&webappv1.WebApp{}).
		WithReturnManagedFields().
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				count()
				return c.Create(ctx, o, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
				count()
				return c.Update(ctx, o, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, o, p, opts...)
			},
			Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				if w, ok := o.(*webappv1ac.WebAppApplyConfiguration); ok {
					env.webAppWrites.Add(1)
					// An apply with no fields releases what our manager owns on the WebApp: in the fake, whose
					// status applies claim the spec too, it would delete the spec. It has nothing to set; drop it.
					if len(w.Finalizers) == 0 {
						return nil
					}
				} else {
					count()
				}
				return c.Apply(ctx, o, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
				count()
				return c.SubResource(sub).Update(ctx, o, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				count()
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
			SubResourceApply: func(ctx context.Context, c client.Client, sub string, o runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
				env.webAppWrites.Add(1)
				return c.SubResource(sub).Apply(ctx, o, opts...)
			},
		}).
		Build()
	return env
}

func reqFor(app *webappv1.WebApp) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: app.Namespace, Name: app.Name}}
}

func (e *fakeEnv) reconcile(t *testing.T, r *WebAppReconciler, name string) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func TestReconcileCreatesOwnedChildrenAndStatus(t *testing.T) {
	env := newFakeEnv(t, newApp("web", 3, 80, "nginx:1.25"))
	r := &WebAppReconciler{Client: env}
	res := env.reconcile(t, r, "web")
	if res.RequeueAfter != DefaultRequeueAfter {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, DefaultRequeueAfter)
	}
	if got := env.writes.Load(); got != 3 {
		t.Errorf("first reconcile sent %d writes to children, want 3 (Deployment, Service, PodDisruptionBudget)", got)
	}
	dep := &appsv1.Deployment{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, dep); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{dep, svc} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != "uid-web" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner references = %+v", o, refs)
		}
		if !managedBy(o.GetManagedFields(), FieldManager, "") {
			t.Errorf("%T has no Apply entry of %s: %+v", o, FieldManager, o.GetManagedFields())
		}
	}
	app := &webappv1.WebApp{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, app); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady); app.Status.URL != "http://web.ns.svc:80" || ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("status = %+v", app.Status)
	}
	// The fake client drops the subresource of a status apply (see fakeEnv); the real server's entry is checked in
	// test/integration.
	if !managedBy(app.ManagedFields, FieldManager, "") {
		t.Errorf("status has no Apply entry of %s: %+v", FieldManager, app.ManagedFields)
	}
}

func managedBy(entries []metav1.ManagedFieldsEntry, manager, subresource string) bool {
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			return true
		}
	}
	return false
}

func TestSecondReconcileSendsNoWrite(t *testing.T) {
	env := newFakeEnv(t, newApp("web", 3, 80, "nginx:1.25"))
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, "web")
	env.writes.Store(0)
	for i := 0; i < 3; i++ {
		env.reconcile(t, r, "web")
	}
	if got := env.writes.Load(); got != 0 {
		t.Errorf("converged reconciles sent %d writes to children, want 0", got)
	}
}

func TestDriftIsRepairedAndForeignAnnotationKept(t *testing.T) {
	env := newFakeEnv(t, newApp("web", 3, 80, "nginx:1.25"))
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, "web")
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "web"}

	// Another manager scales our Deployment and adds an annotation of its own.
	dep := &appsv1.Deployment{}
	if err := env.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	seven := int32(7)
	dep.Spec.Replicas = &seven
	dep.Annotations = map[string]string{"team": "payments"}
	dep.ManagedFields = nil
	if err := env.Update(ctx, dep, client.FieldOwner("kubectl")); err != nil {
		t.Fatal(err)
	}

	env.writes.Store(0)
	env.reconcile(t, r, "web")
	if err := env.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3 (drift repaired)", *dep.Spec.Replicas)
	}
	if dep.Annotations["team"] != "payments" {
		t.Errorf("annotations = %v, want team=payments kept", dep.Annotations)
	}
	if got := env.writes.Load(); got != 1 {
		t.Errorf("repair sent %d writes, want 1 (the Deployment only)", got)
	}
}

func TestSpecChangeReachesDeployment(t *testing.T) {
	env := newFakeEnv(t, newApp("web", 3, 80, "nginx:1.25"))
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, "web")
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	app := &webappv1.WebApp{}
	if err := env.Get(ctx, key, app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Replicas, app.Spec.Image, app.Spec.Port = 5, "nginx:1.27", 8080
	app.ManagedFields = nil
	if err := env.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	env.reconcile(t, r, "web")
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	if err := env.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	if err := env.Get(ctx, key, svc); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if *dep.Spec.Replicas != 5 || c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("deployment replicas %d image %s port %d, service port %d", *dep.Spec.Replicas, c.Image, c.Ports[0].ContainerPort, svc.Spec.Ports[0].Port)
	}
}

func TestReconcileOfMissingWebAppIsANoop(t *testing.T) {
	env := newFakeEnv(t)
	env.reconcile(t, &WebAppReconciler{Client: env}, "gone")
	if got := env.writes.Load(); got != 0 {
		t.Errorf("sent %d writes for a missing WebApp", got)
	}
}

func TestApplyErrorsAreSortedAndReported(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
		field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")})
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	cases := []struct {
		name          string
		depErr        error
		svcErr        error
		retried       bool // returned as an error: rate-limited retry
		reason        string
		msgContaining string
	}{
		{"invalid child waits for the resync", invalid, nil, false, ReasonInvalidChild, "field is immutable"},
		{"server unavailable is retried", unavailable, nil, true, ReasonReconcileError, "etcd leader changed"},
		{"forbidden is retried", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("quota")), nil, true, ReasonApplyForbidden, "quota"},
		// One transient failure among refusals: the whole WebApp is retried soon.
		{"invalid and unavailable together are retried", invalid, unavailable, true, ReasonInvalidChild, "field is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newFakeEnv(t, newApp("web", 3, 80, "nginx:1.25"))
			failing := interceptor.NewClient(env.Client.(client.WithWatch), interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					switch o.(type) {
					case *appsv1ac.DeploymentApplyConfiguration:
						return tc.depErr
					case *corev1ac.ServiceApplyConfiguration:
						if tc.svcErr != nil {
							return tc.svcErr
						}
					}
					return c.Apply(ctx, o, opts...)
				},
			})
			r := &WebAppReconciler{Client: failing}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}})
			if (err != nil) != tc.retried {
				t.Errorf("err = %v, want retried %v", err, tc.retried)
			}
			if !tc.retried && res.RequeueAfter != DefaultRequeueAfter {
				t.Errorf("a refused child waits %v, want the resync period", res.RequeueAfter)
			}
			app := &webappv1.WebApp{}
			if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, app); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason || !strings.Contains(ready.Message, tc.msgContaining) {
				t.Errorf("Ready = %+v, want False/%s with the server's message", ready, tc.reason)
			}
		})
	}
}

// An object of the child's name that is not ours is never taken over: Ready says so and nothing is written to it.
func TestExistingObjectsThatAreNotOursAreLeftAlone(t *testing.T) {
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"team": "other"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	env := newFakeEnv(t, newApp("web", 1, 80, "nginx:1.25"), foreign)
	r := &WebAppReconciler{Client: env}
	res := env.reconcile(t, r, "web")
	if res.RequeueAfter != DefaultRequeueAfter {
		t.Errorf("RequeueAfter = %v", res.RequeueAfter)
	}
	svc := &corev1.Service{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector["app"] != "theirs" || len(svc.OwnerReferences) != 0 || svc.Labels[LabelManagedBy] != "" {
		t.Errorf("foreign Service was changed: %+v", svc)
	}
	app := &webappv1.WebApp{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, app); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
	if ready == nil || ready.Reason != ReasonChildNotOwned || !strings.Contains(ready.Message, "Service ns/web already exists and is not managed by webapp-operator") {
		t.Errorf("Ready = %+v", ready)
	}
}
