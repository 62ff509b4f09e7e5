package integration

// The promise under other actors (issue 15): what people and other controllers do between the operator's reads and
// writes. Each test makes one interleaving deterministic, with the fault hook of startOperatorWith acting at the
// exact request where the race would fall.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// applyPatchTo reports whether req is a Server-Side Apply of the object at path (e.g. "deployments/web").
func applyPatchTo(req *http.Request, ns, path string) bool {
	return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/"+path) &&
		req.Header.Get("Content-Type") == string(types.ApplyYAMLPatchType)
}

// exported is obj as `kubectl get -o yaml` prints it, ready for `kubectl create -f` or an apply: without the fields
// the server sets.
func exported[T client.Object](obj T) T {
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	obj.SetGeneration(0)
	return obj
}

// deleteWebApp deletes WebApp web and waits until it is gone.
func deleteWebApp(t *testing.T, ns string) {
	t.Helper()
	if err := k8s.Delete(context.Background(), &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	waitWebAppGone(t, ns)
}

// waitWebAppGone waits until WebApp web is gone (its deletion complete).
func waitWebAppGone(t *testing.T, ns string) {
	t.Helper()
	testutil.Eventually(t, wait10s, "WebApp gone", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", &webappv1.WebApp{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		return nil
	})
}

// A child deleted while the release reads it (`kubectl delete webapp/web deployment/web`) stays deleted: the
// release's apply carries the child's UID, which the server refuses for a missing object instead of creating one.
func TestAReleaseNeverResurrectsADeletedChild(t *testing.T) {
	ns := newNamespace(t)
	var armed atomic.Bool
	var deleted atomic.Int32
	startOperatorWith(t, ns, time.Second, operatorOptions{fault: func(req *http.Request) *http.Response {
		// The user's delete of the Deployment lands between the release's read and its apply.
		if armed.Load() && applyPatchTo(req, ns, "deployments/web") && deleted.Add(1) == 1 {
			if err := k8s.Delete(req.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
				t.Errorf("deleting the Deployment: %v", err)
			}
		}
		return nil
	}})
	createWebApp(t, ns, "web", 1, 80)
	waitChildren(t, ns, "web")
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)
	armed.Store(true)
	deleteWebApp(t, ns)
	if deleted.Load() == 0 {
		t.Fatal("the release sent no apply of the Deployment: the race was not exercised")
	}
	// Two resyncs later it is still missing, and the Service was released, not deleted.
	waitResyncs(t, 2, 30*time.Second)
	if err := get(context.Background(), ns, "web", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment the user deleted is back (err %v)", err)
	}
	svc := &corev1.Service{}
	if err := get(context.Background(), ns, "web", svc); err != nil || len(svc.OwnerReferences) != 0 {
		t.Errorf("Service: err %v, owner references %+v; want it kept without an owner", err, svc.OwnerReferences)
	}
}

// `kubectl delete deployment/web webapp/web`, the operator's cache seeing the Deployment's deletion before the
// WebApp's: the reconcile that would re-create the Deployment asks the server first, and it stays deleted.
func TestAChildDeletedWithItsWebAppIsNotRecreated(t *testing.T) {
	ns := newNamespace(t)
	var armed atomic.Bool
	var once sync.Once
	startOperatorWith(t, ns, time.Second, operatorOptions{fault: func(req *http.Request) *http.Response {
		// The operator reads the missing Deployment before re-creating it: the user's delete of the WebApp lands now,
		// after the cache showed the WebApp alive.
		if armed.Load() && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/deployments/web") {
			once.Do(func() {
				if err := k8s.Delete(req.Context(), &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
					t.Errorf("deleting the WebApp: %v", err)
				}
			})
		}
		return nil
	}})
	createWebApp(t, ns, "web", 1, 80)
	dep, _ := waitChildren(t, ns, "web")
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)
	armed.Store(true)
	if err := k8s.Delete(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	waitWebAppGone(t, ns)
	waitResyncs(t, 2, 30*time.Second)
	if err := get(context.Background(), ns, "web", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment deleted with its WebApp was re-created (err %v)", err)
	}
}

// Another manager that applied the exported Deployment co-owns our owner reference: the release still takes it off
// (the garbage collector would otherwise delete the "released" child), with the guarded patch.
func TestAReleasedChildLosesAnOwnerReferenceAnotherManagerHolds(t *testing.T) {
	ns, app := runningWebApp(t, 1, time.Second)
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)
	ctx := context.Background()
	dep := &appsv1.Deployment{}
	if err := get(ctx, ns, "web", dep); err != nil {
		t.Fatal(err)
	}
	dep = exported(dep)
	dep.Labels["team"] = "ops"
	dep.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	dep.Status = appsv1.DeploymentStatus{}
	// `kubectl apply --server-side --field-manager=ops -f exported.yaml`
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner("ops"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	deleteWebApp(t, ns)
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		if err := get(ctx, ns, "web", o); err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == app.UID }); i >= 0 {
			t.Errorf("%T keeps the owner reference to the deleted WebApp: the garbage collector would delete it", o)
		}
	}
	if err := get(ctx, ns, "web", dep); err != nil || dep.Labels["team"] != "ops" {
		t.Errorf("the other manager's label is gone (err %v, labels %v)", err, dep.Labels)
	}
}

// A Deployment re-created from its export (`kubectl create -f`) is co-owned field by field by its creator: a field
// the WebApp then stops setting stays. Status says which, whose, and is not Ready until it goes; after a restart
// it still says so, without a write.
func TestAFieldAnotherManagerKeepsIsReportedUntilItGoes(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: webappv1.WebAppSpec{Image: "nginx:1.25", Env: []corev1.EnvVar{{Name: "DEBUG", Value: "true"}, {Name: "MODE", Value: "prod"}}}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	dep, _ := waitChildren(t, ns, "web")
	op.stop()
	// The user deletes the Deployment and creates it again from the export, while the operator is away.
	if err := k8s.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	dep = exported(dep)
	dep.Status = appsv1.DeploymentStatus{}
	testutil.Eventually(t, wait10s, "Deployment re-created from its export", func(ctx context.Context) error {
		return k8s.Create(ctx, dep.DeepCopy(), client.FieldOwner("kubectl-create"))
	})
	op = startOperator(t, ns, time.Second)
	markAvailable(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)

	// The WebApp stops setting DEBUG: kubectl-create still holds it.
	updateSpec(t, ns, func(app *webappv1.WebApp) { app.Spec.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}} })
	markAvailable(t, ns, "web")
	debug := `.spec.template.spec.containers[name="app"].env[name="DEBUG"]`
	got := waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonFieldsRetained, debug, "kubectl-create")
	want := []webappv1.RetainedField{{Kind: "Deployment", Field: debug, Managers: []string{"kubectl-create"}}}
	if !slices.EqualFunc(got.Status.RetainedFields, want, func(a, b webappv1.RetainedField) bool {
		return a.Kind == b.Kind && a.Field == b.Field && slices.Equal(a.Managers, b.Managers)
	}) {
		t.Errorf("status.retainedFields = %+v, want %+v", got.Status.RetainedFields, want)
	}
	if p := meta.FindStatusCondition(got.Status.Conditions, webappv1.ConditionProgressing); p == nil || p.Reason != webappv2.ReasonRolloutComplete {
		t.Errorf("Progressing = %+v, want RolloutComplete (the rollout is done; a field is left)", p)
	}

	// A restarted operator remembers nothing, and still reports it without writing.
	restartCostsNoWrites(t, op, ns)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonFieldsRetained, debug)

	// The user removes it (`kubectl edit`): Ready.
	intrude(t, ns, "web", &appsv1.Deployment{}, func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "DEBUG" })
	})
	markAvailable(t, ns, "web")
	got = waitReady(t, ns, "web", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)
	if len(got.Status.RetainedFields) != 0 {
		t.Errorf("status.retainedFields = %+v after the field went", got.Status.RetainedFields)
	}
}

// A spec the Deployment API refuses: status never reports the old Deployment's finished rollout as this
// generation's.
func TestARefusedDeploymentIsNeverReportedRolledOut(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Second)
	markAvailable(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)
	gen := updateSpec(t, ns, func(app *webappv1.WebApp) {
		app.Spec.Image = "nginx:1.27"
		app.Spec.PodLabels = map[string]string{"tier": "has space"}
	})
	got := waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonInvalidChild)
	p := meta.FindStatusCondition(got.Status.Conditions, webappv1.ConditionProgressing)
	if p == nil || p.ObservedGeneration != gen || p.Status != metav1.ConditionFalse || p.Reason != webappv2.ReasonInvalidChild ||
		!strings.Contains(p.Message, fmt.Sprintf("Generation %d of the spec was not applied", gen)) {
		t.Errorf("Progressing = %+v, want False InvalidChild at generation %d: the Deployment still runs nginx:1.25", p, gen)
	}
}

// A write denied by a quota, and the quota then removed: the WebApp is retried at once, not at the end of its
// backoff (here 10 s and more by then).
func TestAFixedQuotaIsNotWaitedOutInTheBackoff(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-deployments"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}}
	if err := k8s.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// What the quota controller would write (none runs here): admission then denies every Deployment (403).
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, ns, time.Second)
	createWebApp(t, ns, "web", 1, 80)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonApplyForbidden)
	// Eleven denials: the controller's backoff (5 ms doubling) waits 10 s before the next.
	testutil.Eventually(t, time.Minute, "11 denied Deployment applies", func(context.Context) error {
		n := 0
		for _, w := range op.writes.snapshot() {
			if strings.HasSuffix(w, "/namespaces/"+ns+"/deployments/web") {
				n++
			}
		}
		if n < 11 {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
	if err := k8s.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	testutil.Eventually(t, 3*time.Second, "Deployment created within 3 s of the fix", func(ctx context.Context) error {
		return get(ctx, ns, "web", &appsv1.Deployment{})
	})
	t.Logf("Deployment created %v after the quota went", time.Since(fixed).Round(time.Millisecond))
}

// A WebApp at rest that cannot take over a Service of its name sends nothing after a restart, not even a request
// the server refuses: its status says the Service is not ours, so the Service is read before anything is sent.
func TestAChildNotOursCostsNoRequestAfterARestart(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81}}}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, ns, time.Second)
	createWebApp(t, ns, "web", 1, 80)
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonChildNotOwned)
	restartCostsNoWrites(t, op, ns)
}

// A Service created by someone else between the operator's read (the child is gone) and its re-creation is never
// taken over: re-creation is create-only too.
func TestRecreationNeverTakesOverAnObjectCreatedMeanwhile(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	var armed atomic.Bool
	var once sync.Once
	startOperatorWith(t, ns, time.Second, operatorOptions{fault: func(req *http.Request) *http.Response {
		if armed.Load() && applyPatchTo(req, ns, "services/web") {
			once.Do(func() {
				foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"owner": "someone"}},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 81}}}}
				if err := k8s.Create(req.Context(), foreign); err != nil {
					t.Errorf("creating the foreign Service: %v", err)
				}
			})
		}
		return nil
	}})
	createWebApp(t, ns, "web", 1, 80)
	_, svc := waitChildren(t, ns, "web")
	armed.Store(true)
	if err := k8s.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonChildNotOwned, "Service")
	got := &corev1.Service{}
	if err := get(ctx, ns, "web", got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Labels["owner"] != "someone" || len(testutil.AppliedBy(got.ManagedFields, webappv2.FieldManager, "")) != 0 ||
		len(got.Spec.Ports) != 1 {
		t.Errorf("the foreign Service was taken over: owners %+v labels %v ports %+v", got.OwnerReferences, got.Labels, got.Spec.Ports)
	}
}

// A WebApp deleted and created again under the same name is another WebApp: its first status is written at once,
// not held by the old one's pace. The operator (one worker) is kept busy with another WebApp meanwhile, so it never
// sees the name missing: the deletion and the creation reach it as one event, as on a busy cluster.
func TestAWebAppReplacedUnderItsNameGetsItsStatusAtOnce(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	release := make(chan struct{})
	var armed atomic.Bool
	var once sync.Once
	startOperatorWith(t, ns, time.Minute, operatorOptions{fault: func(req *http.Request) *http.Response {
		if armed.Load() && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps/busy") {
			once.Do(func() { <-release })
		}
		return nil
	}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}, Data: map[string]string{"k": "1"}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	busy := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}, Spec: webappv1.WebAppSpec{Image: "nginx:1.25",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "busy"}}}}}}
	if err := k8s.Create(ctx, busy); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "busy")
	createWebApp(t, ns, "web", 1, 80)
	waitChildren(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)

	// The worker blocks reading the busy WebApp's ConfigMap; meanwhile web is replaced.
	armed.Store(true)
	cm.Data["k"] = "2"
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	// What the garbage collector would do (none runs here).
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		o.SetNamespace(ns)
		o.SetName("web")
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	app := createWebApp(t, ns, "web", 1, 80)
	created := time.Now()
	close(release)
	testutil.Eventually(t, 3*time.Second, "the new WebApp's status within 3 s", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		c := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
		if c == nil || c.Reason != webappv2.ReasonDeploymentProgressing {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	t.Logf("status written %v after the new WebApp was created", time.Since(created).Round(time.Millisecond))
}

// kubectl's last-applied annotation cannot be asked for on the Service: the cache drops it, so it would cost a
// write after every restart. The API server refuses it, naming it.
func TestLastAppliedInServiceAnnotationsIsRefused(t *testing.T) {
	ns := newNamespace(t)
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv1.WebAppSpec{Image: "nginx:1.25",
		Service: webappv1.ServiceSpec{Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}}
	err := k8s.Create(context.Background(), app)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must not set kubectl.kubernetes.io/last-applied-configuration") {
		t.Errorf("create: %v, want Invalid naming the annotation", err)
	}
}

// TestAChildReleasedByAnotherWebAppIsNeverTakenOver: WebApp "web-canary", deleted with the Orphan policy, leaves its
// Deployment "web-canary", which is also the name of WebApp web's canary. web's canary never takes it over (it was
// another WebApp's, by its instance label): Ready says whose it was, and the Deployment is never written. A WebApp
// "web-canary" made again takes it up, as a released child is meant to be.
func TestAChildReleasedByAnotherWebAppIsNeverTakenOver(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	released := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-canary"}, Spec: webappv2.WebAppSpec{
		Image: "other:1", Replicas: ptr.To[int32](1), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		DeletionPolicy: webappv2.DeletionPolicyOrphan,
	}}
	if err := k8s.Create(ctx, released.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web-canary")
	waitReady(t, ns, "web-canary", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	if err := k8s.Delete(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-canary"}}); err != nil {
		t.Fatal(err)
	}
	theirs := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "WebApp web-canary gone, its Deployment kept without an owner", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", &webappv2.WebApp{}); err == nil {
			return fmt.Errorf("WebApp still there")
		}
		if err := get(ctx, ns, "web-canary", theirs); err != nil {
			return err
		}
		if refs := theirs.GetOwnerReferences(); len(refs) != 0 {
			return fmt.Errorf("owner references %+v", refs)
		}
		return nil
	})
	rv := theirs.ResourceVersion

	stableWeb(t, ns, &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50, PauseSeconds: 3600}}})
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonChildNotOwned, "Deployment", "web-canary", `released by WebApp "web-canary"`)
	// Over three resyncs: never written, and the stable Deployment keeps its version.
	waitResyncs(t, 3, 30*time.Second)
	if err := get(ctx, ns, "web-canary", theirs); err != nil || theirs.ResourceVersion != rv {
		t.Errorf("WebApp web-canary's Deployment was written: resourceVersion %s, was %s (%v)", theirs.ResourceVersion, rv, err)
	}
	if img := theirs.Spec.Template.Spec.Containers[0].Image; img != "other:1" {
		t.Errorf("WebApp web-canary's Deployment runs %s, want other:1", img)
	}
	dep := &appsv1.Deployment{}
	if err := get(ctx, ns, "web", dep); err != nil || dep.Spec.Template.Spec.Containers[0].Image != "shop:1" {
		t.Errorf("the stable Deployment left its version while the canary cannot run: %v", err)
	}

	// Its own WebApp, made again, takes it up.
	if err := k8s.Create(ctx, released.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "WebApp web-canary takes its Deployment up again", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", theirs); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(theirs); ref == nil || ref.Name != "web-canary" {
			return fmt.Errorf("controller %+v", ref)
		}
		return nil
	})
}
