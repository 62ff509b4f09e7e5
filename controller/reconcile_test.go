package controller

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/applyconfig"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/test/testutil"
)

// fakeEnv is a fake client set up for Server-Side Apply, counting the write requests sent through it.
//
// The fake client records a status apply in managedFields as an apply of the whole object, without its "status"
// subresource, so what it stores cannot show where our manager's status went: the WebApp's own applies (status,
// finalizer) are recorded as sent instead, and the zero-write claim for them is proven against the real API
// server in test/integration.
type fakeEnv struct {
	client.Client
	writes        atomic.Int32  // writes to anything but the WebApp: the children
	webAppApplies []webAppApply // applies of the WebApp and its status, in order
}

// webAppApply is one apply of the WebApp as the reconciler sent it.
type webAppApply struct {
	subresource string // "" for the WebApp itself
	opts        client.ApplyOptions
	obj         *webappv2ac.WebAppApplyConfiguration
}

func newFakeEnv(t testing.TB, objs ...client.Object) *fakeEnv {
	t.Helper()
	scheme := NewScheme()
	env := &fakeEnv{}
	count := func() { env.writes.Add(1) }
	env.Client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithTypeConverters(clientgoac.NewTypeConverter(scheme), applyconfig.NewTypeConverter(scheme)).
		WithStatusSubresource(&webappv2.WebApp{}).
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
				if w, ok := o.(*webappv2ac.WebAppApplyConfiguration); ok {
					if err := env.recordWebAppApply("", *(&client.ApplyOptions{}).ApplyOptions(opts), o); err != nil {
						return err
					}
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
				if err := env.recordWebAppApply(sub, (&client.SubResourceApplyOptions{}).ApplyOpts(opts).ApplyOptions, o); err != nil {
					return err
				}
				return c.SubResource(sub).Apply(ctx, o, opts...)
			},
		}).
		Build()
	return env
}

// recordWebAppApply keeps a copy of what is sent: the client writes the server's answer back into o.
func (e *fakeEnv) recordWebAppApply(subresource string, opts client.ApplyOptions, o runtime.ApplyConfiguration) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	sent := &webappv2ac.WebAppApplyConfiguration{}
	if err := json.Unmarshal(data, sent); err != nil {
		return err
	}
	e.webAppApplies = append(e.webAppApplies, webAppApply{subresource, opts, sent})
	return nil
}

func reqFor(app *webappv2.WebApp) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: app.Namespace, Name: app.Name}}
}

func (e *fakeEnv) reconcile(t *testing.T, r *WebAppReconciler, app *webappv2.WebApp) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reqFor(app))
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// resync runs one walk of the resync loop and returns the names of the WebApps it enqueued.
func (e *fakeEnv) resync(t *testing.T, r *WebAppReconciler) []string {
	t.Helper()
	ch := make(chan event.GenericEvent, 100)
	r.resyncOnce(context.Background(), ch)
	close(ch)
	var names []string
	for ev := range ch {
		names = append(names, ev.Object.GetName())
	}
	return names
}

// get reads the object of app's name and namespace (the WebApp or a child) into obj.
func (e *fakeEnv) get(t *testing.T, app *webappv2.WebApp, obj client.Object) {
	t.Helper()
	if err := e.Get(context.Background(), client.ObjectKeyFromObject(app), obj); err != nil {
		t.Fatal(err)
	}
}

func TestReconcileCreatesOwnedChildrenAndStatus(t *testing.T) {
	app := apptest.NewApp("web", 3, 80, "nginx:1.25")
	env := newFakeEnv(t, app)
	r := &WebAppReconciler{Client: env}
	if res := env.reconcile(t, r, app); res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v, want none: the resync loop brings it back", res.RequeueAfter)
	}
	if got := env.resync(t, r); !slices.Equal(got, []string{"web"}) {
		t.Errorf("after a reconcile that wrote, the resync enqueues %v, want [web]", got)
	}
	if got := env.writes.Load(); got != 3 {
		t.Errorf("first reconcile sent %d writes to children, want 3 (Deployment, Service, PodDisruptionBudget)", got)
	}
	dep, svc := &appsv1.Deployment{}, &corev1.Service{}
	env.get(t, app, dep)
	env.get(t, app, svc)
	for _, o := range []client.Object{dep, svc} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != "uid-web" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner references = %+v", o, refs)
		}
		if len(testutil.AppliedBy(o.GetManagedFields(), webappv2.FieldManager, "")) == 0 {
			t.Errorf("%T has no Apply entry of %s: %+v", o, webappv2.FieldManager, o.GetManagedFields())
		}
	}
	got := &webappv2.WebApp{}
	env.get(t, app, got)
	if ready := meta.FindStatusCondition(got.Status.Conditions, webappv2.ConditionReady); got.Status.URL != "http://web.ns.svc:80" || ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("status = %+v", got.Status)
	}
	// The status goes through the status subresource, forced, under our manager, and carries nothing but status;
	// with the Delete policy the WebApp itself is not applied (no finalizer).
	if len(env.webAppApplies) != 1 {
		t.Fatalf("WebApp applies = %+v, want one, of the status", env.webAppApplies)
	}
	a := env.webAppApplies[0]
	if a.subresource != "status" || a.opts.FieldManager != webappv2.FieldManager || a.opts.Force == nil || !*a.opts.Force {
		t.Errorf("status apply through subresource %q, manager %q, force %v; want status, %s, forced", a.subresource, a.opts.FieldManager, a.opts.Force, webappv2.FieldManager)
	}
	if a.obj == nil || a.obj.Status == nil || a.obj.Spec != nil || len(a.obj.Finalizers) != 0 || len(a.obj.Labels) != 0 || len(a.obj.Annotations) != 0 {
		t.Errorf("status apply = %+v, want status only", a.obj)
	}
}

func TestSecondReconcileSendsNoWrite(t *testing.T) {
	app := apptest.NewApp("web", 3, 80, "nginx:1.25")
	env := newFakeEnv(t, app)
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, app)
	env.writes.Store(0)
	for range 3 {
		env.reconcile(t, r, app)
	}
	if got := env.writes.Load(); got != 0 {
		t.Errorf("converged reconciles sent %d writes to children, want 0", got)
	}
}

// The resync walk enqueues the WebApps without a converged reconcile, and those whose inputs changed since theirs
// (here the WebApp's status, which no watch brings back); a converged one costs no reconcile. (The fake client
// cannot show a converged status apply, so the memo is set here as a converged reconcile sets it; the integration
// tests show it with the real API server.)
func TestResyncEnqueuesWhatMayHaveChanged(t *testing.T) {
	web, api := apptest.NewApp("web", 1, 80, "nginx:1.25"), apptest.NewApp("api", 1, 80, "nginx:1.25")
	env := newFakeEnv(t, web, api)
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, web)
	env.reconcile(t, r, api)
	env.get(t, web, web)
	r.mem.settle(reqFor(web).NamespacedName, r.fingerprint(context.Background(), web), nil)
	if got := env.resync(t, r); !slices.Equal(got, []string{"api"}) {
		t.Errorf("the resync enqueues %v, want [api] (web converged, api never did)", got)
	}
	web.Status.AvailableReplicas = 99
	if err := env.Status().Update(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	if got := env.resync(t, r); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("web's status changed by someone else: the resync enqueues %v, want [api web]", got)
	}
	// A WebApp whose reconcile returned an error is the controller's backoff's to retry, not the resync's...
	env.get(t, api, api)
	r.mem.settle(reqFor(api).NamespacedName, r.fingerprint(context.Background(), api), errors.New("the server is currently unable to handle the request"))
	if got := env.resync(t, r); !slices.Equal(got, []string{"web"}) {
		t.Errorf("api failing: the resync enqueues %v, want [web]", got)
	}
	// ...until something it reads changes: that may be the fix, and is not left to wait out the backoff.
	api.Status.AvailableReplicas = 99
	if err := env.Status().Update(context.Background(), api); err != nil {
		t.Fatal(err)
	}
	if got := env.resync(t, r); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("api failing, its inputs changed: the resync enqueues %v, want [api web]", got)
	}
	if got := r.mem.failingIn(api.Namespace); !slices.Equal(got, []types.NamespacedName{reqFor(api).NamespacedName}) {
		t.Errorf("failing WebApps of the namespace: %v, want [api]", got)
	}
}

// Someone else changes what we own, or the WebApp's spec changes: the next reconcile puts the children in line,
// in one write per changed child, and keeps the fields of other managers.
func TestChildrenFollowTheWebApp(t *testing.T) {
	cases := []struct {
		name string
		// change is made between the first reconcile and the second.
		change func(t *testing.T, env *fakeEnv, app *webappv2.WebApp)
		writes int32
		check  func(t *testing.T, dep *appsv1.Deployment, svc *corev1.Service)
	}{
		{"drift is repaired, a foreign annotation kept", func(t *testing.T, env *fakeEnv, app *webappv2.WebApp) {
			dep := &appsv1.Deployment{}
			env.get(t, app, dep)
			dep.Spec.Replicas = ptr.To(int32(7))
			dep.Annotations = map[string]string{"team": "payments"}
			dep.ManagedFields = nil
			if err := env.Update(context.Background(), dep, client.FieldOwner("kubectl")); err != nil {
				t.Fatal(err)
			}
		}, 1, func(t *testing.T, dep *appsv1.Deployment, _ *corev1.Service) {
			if *dep.Spec.Replicas != 3 || dep.Annotations["team"] != "payments" {
				t.Errorf("replicas %d annotations %v, want 3 (drift repaired) and team=payments kept", *dep.Spec.Replicas, dep.Annotations)
			}
		}},
		{"a spec change reaches the Deployment and the Service", func(t *testing.T, env *fakeEnv, app *webappv2.WebApp) {
			env.get(t, app, app)
			app.Spec.Replicas, app.Spec.Image, app.Spec.Ports = ptr.To(int32(5)), "nginx:1.27", []webappv2.Port{{Name: "http", Port: 8080}}
			app.ManagedFields = nil
			if err := env.Update(context.Background(), app); err != nil {
				t.Fatal(err)
			}
		}, 2, func(t *testing.T, dep *appsv1.Deployment, svc *corev1.Service) {
			c := dep.Spec.Template.Spec.Containers[0]
			if *dep.Spec.Replicas != 5 || c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 || svc.Spec.Ports[0].Port != 8080 {
				t.Errorf("deployment replicas %d image %s port %d, service port %d", *dep.Spec.Replicas, c.Image, c.Ports[0].ContainerPort, svc.Spec.Ports[0].Port)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("web", 3, 80, "nginx:1.25")
			env := newFakeEnv(t, app)
			r := &WebAppReconciler{Client: env}
			env.reconcile(t, r, app)
			tc.change(t, env, app)
			env.writes.Store(0)
			env.reconcile(t, r, app)
			if got := env.writes.Load(); got != tc.writes {
				t.Errorf("sent %d writes to children, want %d", got, tc.writes)
			}
			dep, svc := &appsv1.Deployment{}, &corev1.Service{}
			env.get(t, app, dep)
			env.get(t, app, svc)
			tc.check(t, dep, svc)
		})
	}
}

func TestReconcileOfMissingWebAppIsANoop(t *testing.T) {
	env := newFakeEnv(t)
	env.reconcile(t, &WebAppReconciler{Client: env}, apptest.NewApp("gone", 1, 80, "nginx"))
	if got := env.writes.Load(); got != 0 || len(env.webAppApplies) != 0 {
		t.Errorf("sent %d writes and %d WebApp applies for a missing WebApp", got, len(env.webAppApplies))
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
		{"invalid child waits for the resync", invalid, nil, false, webappv2.ReasonInvalidChild, "field is immutable"},
		{"server unavailable is retried", unavailable, nil, true, webappv2.ReasonReconcileError, "etcd leader changed"},
		{"forbidden is retried", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("quota")), nil, true, webappv2.ReasonApplyForbidden, "quota"},
		// One transient failure among refusals: the whole WebApp is retried soon.
		{"invalid and unavailable together are retried", invalid, unavailable, true, webappv2.ReasonInvalidChild, "field is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("web", 3, 80, "nginx:1.25")
			env := newFakeEnv(t, app)
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
			res, err := r.Reconcile(context.Background(), reqFor(app))
			if (err != nil) != tc.retried {
				t.Errorf("err = %v, want retried %v", err, tc.retried)
			}
			if res.RequeueAfter != 0 {
				t.Errorf("RequeueAfter = %v, want none", res.RequeueAfter)
			}
			if got := (&fakeEnv{Client: failing}).resync(t, r); !tc.retried && !slices.Equal(got, []string{"web"}) {
				t.Errorf("a refused child: the resync enqueues %v, want [web]", got)
			}
			env.get(t, app, app)
			ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady)
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
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	env := newFakeEnv(t, app, foreign)
	r := &WebAppReconciler{Client: env}
	env.reconcile(t, r, app)
	env.reconcile(t, r, app)
	if got := env.resync(t, r); !slices.Equal(got, []string{"web"}) {
		t.Errorf("a child not ours: the resync enqueues %v, want [web] at every period", got)
	}
	svc := &corev1.Service{}
	env.get(t, app, svc)
	if svc.Spec.Selector["app"] != "theirs" || len(svc.OwnerReferences) != 0 || svc.Labels[webappv2.LabelManagedBy] != "" {
		t.Errorf("foreign Service was changed: %+v", svc)
	}
	env.get(t, app, app)
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady)
	if ready == nil || ready.Reason != webappv2.ReasonChildNotOwned || !strings.Contains(ready.Message, "Service ns/web already exists and is not managed by webapp-operator") {
		t.Errorf("Ready = %+v", ready)
	}
}

// What is remembered of a WebApp is one record, and a deleted WebApp leaves none behind: the memory is bounded by
// the WebApps that exist.
func TestADeletedWebAppLeavesNothingInMemory(t *testing.T) {
	apps := []*webappv2.WebApp{apptest.NewApp("web", 3, 80, "nginx:1.25"), apptest.NewApp("api", 1, 80, "nginx:1.25")}
	apps[1].Spec.Container.Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "k"}}}}
	env := newFakeEnv(t, apps[0], apps[1])
	r := &WebAppReconciler{Client: env}
	for _, app := range apps {
		env.reconcile(t, r, app)
	}
	if n := r.mem.size(); n != 2 {
		t.Fatalf("%d records for 2 WebApps", n)
	}
	for i, app := range apps {
		if err := env.Delete(context.Background(), app); err != nil {
			t.Fatal(err)
		}
		env.reconcile(t, r, app)
		if n := r.mem.size(); n != len(apps)-1-i {
			t.Errorf("%d records after %d of %d WebApps were deleted", n, i+1, len(apps))
		}
	}
}

// staleCache answers reads of one kind of object with a copy taken earlier, as an informer that has not yet seen
// our own last write does; everything else goes to the client.
type staleCache struct {
	client.Client
	stale client.Object // nil: no stale answer
}

func (c *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.stale != nil && reflect.TypeOf(obj) == reflect.TypeOf(c.stale) && key == client.ObjectKeyFromObject(c.stale) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(c.stale.DeepCopyObject()).Elem())
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A cache behind our own last write is not trusted even when it matches desired: desired may have come back to
// what the cache still shows, while our last write changed the object (A, we write B, desired is A again). Judged
// by the stale copy, the object would stay B with nothing left to bring it back.
func TestACacheBehindOurWriteIsNotTrustedWhenItMatches(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	env := newFakeEnv(t, app)
	cache := &staleCache{Client: env}
	r := &WebAppReconciler{Client: cache, APIReader: env}
	env.reconcile(t, r, app)
	before := &corev1.Service{}
	env.get(t, app, before)

	// The port changes: our apply writes it.
	setPort := func(port int32) {
		t.Helper()
		cur := &webappv2.WebApp{}
		env.get(t, app, cur)
		cur.Spec.Ports[0].Port = port
		cur.Generation++
		if err := env.Update(context.Background(), cur); err != nil {
			t.Fatal(err)
		}
	}
	setPort(81)
	env.reconcile(t, r, app)
	// It changes back while the cache still has the Service as it was before that write.
	setPort(80)
	cache.stale = before
	env.reconcile(t, r, app)

	got := &corev1.Service{}
	env.get(t, app, got)
	if len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 {
		t.Errorf("Service ports = %+v, want port 80: the reconcile trusted a cache behind its own write", got.Spec.Ports)
	}
}
