package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// updateSpec changes the WebApp's spec as its user would; it returns the new generation.
func updateSpec(t *testing.T, ns string, change func(*webappv1.WebApp)) int64 {
	t.Helper()
	app := &webappv1.WebApp{}
	update(t, ns, "web", app, change)
	return app.Generation
}

// waitCondition waits until WebApp web's condition of type cond, at the WebApp's generation, passes ok.
func waitCondition(t *testing.T, ns, cond string, ok func(*webappv1.WebApp, *metav1.Condition) bool) *webappv1.WebApp {
	t.Helper()
	app := &webappv1.WebApp{}
	testutil.Eventually(t, wait10s, cond+" as expected", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		c := meta.FindStatusCondition(app.Status.Conditions, cond)
		if c == nil || c.ObservedGeneration != app.Generation || !ok(app, c) {
			return fmt.Errorf("%s = %+v, status %+v (generation %d)", cond, c, app.Status, app.Generation)
		}
		return nil
	})
	return app
}

// The downward API and sub-milli quantities: the server defaults and rounds fields we own; nothing is written again.
func TestServerDefaultsInsideOwnedFieldsCostNoWrites(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv1.WebAppSpec{Image: "nginx:1.25",
		Env:       []corev1.EnvVar{{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1n"), corev1.ResourceMemory: resource.MustParse("1.5")}},
	}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	op.writes.take()
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("%d writes at rest: %q", len(w), w)
	}
	// A restarted operator remembers nothing: only the comparison can tell that nothing changed.
	restartCostsNoWrites(t, op, ns)
}

// Another writer adds a duplicate entry to a list we own; reconciling goes on, repairs it and rolls out spec changes.
func TestADuplicateListEntryIsRepairedAndDoesNotStopReconciling(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Second)
	updateSpec(t, ns, func(app *webappv1.WebApp) { app.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}} })
	dep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "env applied", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		if len(dep.Spec.Template.Spec.Containers[0].Env) != 1 {
			return fmt.Errorf("env %v", dep.Spec.Template.Spec.Containers[0].Env)
		}
		return nil
	})
	patch := []byte(`[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"A","value":"2"}}]`)
	if err := k8s.Patch(context.Background(), dep, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner("intruder")); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, ns, func(app *webappv1.WebApp) { app.Spec.Image = "nginx:1.27" })
	testutil.Eventually(t, wait10s, "new image rolled out and the duplicate gone", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		c := dep.Spec.Template.Spec.Containers[0]
		if c.Image != "nginx:1.27" || len(c.Env) != 1 || c.Env[0].Value != "1" {
			return fmt.Errorf("image %s env %v", c.Image, c.Env)
		}
		return nil
	})
	waitCondition(t, ns, webappv1.ConditionReady, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Reason != webappv2.ReasonReconcileError
	})
}

// A WebApp whose manifest carried our finalizer (a restore) under the Delete policy: the finalizer goes, and so
// does the WebApp when deleted.
func TestAFinalizerSetBySomeoneElseNeverBlocksDeletion(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Minute)
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Finalizers: []string{webappv1.Finalizer, "example.org/keep"}},
		Spec: webappv1.WebAppSpec{Image: "nginx:1.25"}}
	if err := k8s.Create(context.Background(), app, client.FieldOwner("restore")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "our finalizer removed, the other kept", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		if !slices.Equal(app.Finalizers, []string{"example.org/keep"}) {
			return fmt.Errorf("finalizers %v", app.Finalizers)
		}
		return nil
	})
	// Set again by someone else during the deletion: removed again, and the deletion completes. (The operator may
	// write the WebApp's status between the read and the update: read again on a conflict.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(context.Background(), ns, "web", app); err != nil {
			return err
		}
		app.Finalizers = []string{webappv1.Finalizer}
		return k8s.Update(context.Background(), app, client.FieldOwner("restore"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "WebApp deleted", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", &webappv1.WebApp{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// The Orphan release changes ownership only: a spec the Deployment API refuses cannot block it, and a spec change
// never applied does not roll out during the deletion.
func TestOrphanReleaseChangesOwnershipOnly(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Minute)
	setPolicy(t, ns, webappv1.DeletionPolicyOrphan)
	waitFinalizer(t, ns, true)
	updateSpec(t, ns, func(app *webappv1.WebApp) {
		app.Spec.Image = "nginx:1.27"
		app.Spec.PodLabels = map[string]string{"refused": "has space"}
	})
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonInvalidChild, "has space")
	if err := k8s.Delete(context.Background(), &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait10s, "WebApp gone, children released as they were", func(ctx context.Context) error {
		if err := get(ctx, ns, "web", &webappv1.WebApp{}); err == nil {
			return fmt.Errorf("WebApp still there")
		}
		dep, svc := &appsv1.Deployment{}, &corev1.Service{}
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		if err := get(ctx, ns, "web", svc); err != nil {
			return err
		}
		if len(dep.OwnerReferences)+len(svc.OwnerReferences) != 0 {
			return fmt.Errorf("owners: Deployment %v, Service %v", dep.OwnerReferences, svc.OwnerReferences)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" || dep.Spec.Template.Labels["refused"] != "" {
			return fmt.Errorf("the release rolled out the new spec: image %s, labels %v", img, dep.Spec.Template.Labels)
		}
		return nil
	})
}

// statusEvents watches the WebApp and returns a function that stops the watch and returns every version seen.
func statusEvents(t *testing.T, ns, name string) func() []webappv1.WebApp {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &webappv1.WebAppList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan []webappv1.WebApp, 1)
	go func() {
		var all []webappv1.WebApp
		for ev := range w.ResultChan() {
			if app, ok := ev.Object.(*webappv1.WebApp); ok && ev.Type != watch.Error {
				all = append(all, *app)
			}
		}
		seen <- all
	}()
	return func() []webappv1.WebApp {
		w.Stop()
		return <-seen
	}
}

// After a stuck rollout is fixed by a spec change, no status ever says ProgressDeadlineExceeded at the new
// generation while the Deployment controller has not seen the new spec.
func TestAFixedRolloutIsNotReportedStuck(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Minute)
	intrudeStatus(t, ns, "web", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: webappv2.ReasonProgressDeadlineExceeded, Message: "stuck"}}}
	})
	waitCondition(t, ns, webappv1.ConditionProgressing, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Reason == webappv2.ReasonProgressDeadlineExceeded
	})
	stop := statusEvents(t, ns, "web")
	gen := updateSpec(t, ns, func(app *webappv1.WebApp) { app.Spec.Image = "nginx:1.27" })
	waitCondition(t, ns, webappv1.ConditionProgressing, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == webappv2.ReasonRollingOut
	})
	for _, app := range stop() {
		if c := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionProgressing); c != nil && c.ObservedGeneration == gen && c.Status == metav1.ConditionFalse {
			t.Errorf("status at generation %d said Progressing=False %s", gen, c.Reason)
		}
	}
}

// While spec changes pour in, no status claims a generation whose image had not reached the Deployment first.
func TestStatusNeverClaimsAGenerationTheDeploymentDidNotGet(t *testing.T) {
	ns, _ := runningWebApp(t, 1, time.Minute)
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	depWatch, err := wc.Watch(context.Background(), &appsv1.DeploymentList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	imageAt := map[string]int64{} // image -> resourceVersion at which the Deployment first had it
	depDone := make(chan struct{})
	go func() {
		defer close(depDone)
		for ev := range depWatch.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				rv, _ := strconv.ParseInt(d.ResourceVersion, 10, 64)
				if img := d.Spec.Template.Spec.Containers[0].Image; imageAt[img] == 0 {
					imageAt[img] = rv
				}
			}
		}
	}()
	stop := statusEvents(t, ns, "web")
	images := map[int64]string{}
	var last int64
	for i := range 10 {
		img := fmt.Sprintf("nginx:1.%d", 30+i)
		last = updateSpec(t, ns, func(app *webappv1.WebApp) { app.Spec.Image = img })
		images[last] = img
	}
	waitCondition(t, ns, webappv1.ConditionReady, func(app *webappv1.WebApp, _ *metav1.Condition) bool {
		return app.Status.ObservedGeneration == last
	})
	waitChildrenImage(t, ns, images[last])
	apps := stop()
	depWatch.Stop()
	<-depDone
	for _, app := range apps {
		img, ok := images[app.Status.ObservedGeneration]
		if !ok {
			continue
		}
		rv, _ := strconv.ParseInt(app.ResourceVersion, 10, 64)
		if at := imageAt[img]; at == 0 || at > rv {
			t.Errorf("status claimed generation %d (image %s) at resourceVersion %d; the Deployment got it at %d", app.Status.ObservedGeneration, img, rv, at)
		}
	}
}

func waitChildrenImage(t *testing.T, ns, img string) {
	t.Helper()
	testutil.Eventually(t, wait10s, "image "+img, func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != img {
			return fmt.Errorf("image %s", got)
		}
		return nil
	})
}

// A Deployment of the WebApp's name that is not ours: its numbers never show in the WebApp's status or scale.
func TestAForeignDeploymentsNumbersAreNotReported(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	labels := map[string]string{"app": "theirs"}
	theirs := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(5)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "theirs:1"}}}},
	}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Status = appsv1.DeploymentStatus{ObservedGeneration: theirs.Generation, Replicas: 5, UpdatedReplicas: 5, ReadyReplicas: 5, AvailableReplicas: 5}
	if err := k8s.Status().Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	startOperator(t, ns, time.Minute)
	createWebApp(t, ns, "web", 1, 80)
	app := waitCondition(t, ns, webappv1.ConditionReady, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Reason == webappv2.ReasonChildNotOwned
	})
	progressing := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionProgressing)
	if app.Status.Replicas != 0 || app.Status.AvailableReplicas != 0 || progressing == nil || progressing.Status != metav1.ConditionUnknown {
		t.Errorf("status reports someone else's Deployment: %+v", app.Status)
	}
	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(ctx, app, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Status.Replicas != 0 {
		t.Errorf("scale status replicas = %d, want 0", scale.Status.Replicas)
	}
}

// An input that cannot be read (here a ConfigMap the config hash needs): Ready is Unknown with the error, and the
// last observation stays; the Deployment is not reported missing.
func TestAReadErrorIsReportedAsUnknownNotMissing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	var failing atomic.Bool
	startOperatorWith(t, ns, time.Second, operatorOptions{fault: func(req *http.Request) *http.Response {
		if failing.Load() && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps/settings") {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/plain"}},
				Body: io.NopCloser(strings.NewReader("injected: the API server is unavailable")), Request: req}
		}
		return nil
	}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"key": "1"}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv1.WebAppSpec{Image: "nginx:1.25", Replicas: 1,
		Env: []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "key"}}}}}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	waitReady(t, ns, "web", metav1.ConditionTrue, webappv2.ReasonDeploymentReady)

	failing.Store(true)
	cm.Data["key"] = "2"
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, ns, webappv1.ConditionReady, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Status == metav1.ConditionUnknown && strings.Contains(c.Message, "reading configmap/settings for the config hash")
	})
	progressing := meta.FindStatusCondition(got.Status.Conditions, webappv1.ConditionProgressing)
	if got.Status.Replicas != 1 || got.Status.AvailableReplicas != 1 || progressing.Reason == webappv2.ReasonDeploymentMissing {
		t.Errorf("status lost the last observation: %+v", got.Status)
	}
	// Once the read works again, the new configuration rolls out and Ready comes back.
	failing.Store(false)
	waitCondition(t, ns, webappv1.ConditionReady, func(_ *webappv1.WebApp, c *metav1.Condition) bool {
		return c.Status != metav1.ConditionUnknown
	})
}
