package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/testutil"
)

// TestConversionThroughTheAPIServer: the API server calls the conversion webhook over TLS; a v2 WebApp read as v1,
// changed by a v1 client and written back keeps what only v2 can say; a v1 WebApp reads as v2.
func TestConversionThroughTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	v2app := &webappv2.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"},
		Spec:       webappv2.WebAppSpec{Image: "nginx:1.25", Ports: []webappv2.Port{{Name: "web", Port: 8080}, {Name: "metrics", Port: 9090}}},
	}
	if err := k8s.Create(ctx, v2app); err != nil {
		t.Fatal(err)
	}
	// As v1: the primary port, the count unset means, and the rest in the status's conversion data.
	v1app := &webappv1.WebApp{}
	if err := get(ctx, ns, "two", v1app); err != nil {
		t.Fatal(err)
	}
	if v1app.Spec.Port != 8080 || v1app.Spec.Replicas != 1 || v1app.Status.ConversionData == "" || v1app.Annotations != nil {
		t.Fatalf("read as v1: port %d replicas %d conversion data %q annotations %v", v1app.Spec.Port, v1app.Spec.Replicas, v1app.Status.ConversionData, v1app.Annotations)
	}
	// A v1 client's read, change and write (the status it sends is the API server's to ignore: it keeps its own).
	v1app.Spec.Image, v1app.Spec.Port = "nginx:1.27", 8081
	v1app.Status.ConversionData = ""
	if err := k8s.Update(ctx, v1app); err != nil {
		t.Fatal(err)
	}
	got := &webappv2.WebApp{}
	if err := get(ctx, ns, "two", got); err != nil {
		t.Fatal(err)
	}
	want := []webappv2.Port{{Name: "web", Port: 8081}, {Name: "metrics", Port: 9090}}
	if got.Spec.Image != "nginx:1.27" || !slices.Equal(got.Spec.Ports, want) || got.Spec.Replicas != nil {
		t.Fatalf("after a v1 update: image %s ports %v replicas %v", got.Spec.Image, got.Spec.Ports, got.Spec.Replicas)
	}
	if got.Annotations != nil || got.Status.ConversionDropped != nil || got.Spec.Pod.Security != "" || got.Spec.Rollout.ProgressDeadlineSeconds != 0 {
		t.Errorf("after a v1 update: annotations %v, dropped %+v, pod.security %q, progress deadline %d", got.Annotations, got.Status.ConversionDropped, got.Spec.Pod.Security, got.Spec.Rollout.ProgressDeadlineSeconds)
	}

	// A v1 WebApp reads as v2 with its one port named http, and its count set.
	one := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"}, Spec: webappv1.WebAppSpec{Image: "nginx", Replicas: 3, Port: 81}}
	if err := k8s.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	oneV2 := &webappv2.WebApp{}
	if err := get(ctx, ns, "one", oneV2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(oneV2.Spec.Ports, []webappv2.Port{{Name: "http", Port: 81}}) || ptr.Deref(oneV2.Spec.Replicas, 0) != 3 || oneV2.Spec.Pod.Security != webappv2.PodSecurityRestricted {
		t.Fatalf("v1 read as v2: %+v", oneV2.Spec)
	}
}

// TestV2RefusesInItsOwnTerms: what v2's schema or CEL refuses is refused with v2's field names, and nothing is stored.
func TestV2RefusesInItsOwnTerms(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name string
		spec webappv2.WebAppSpec
		want string
	}{
		{"repeated port", webappv2.WebAppSpec{Image: "x", Ports: []webappv2.Port{{Name: "a", Port: 80}, {Name: "b", Port: 80}}}, "ports must not repeat a port number"},
		{"bad port name", webappv2.WebAppSpec{Image: "x", Ports: []webappv2.Port{{Name: "Web", Port: 80}}}, "spec.ports[0].name"},
		{"probe twice", webappv2.WebAppSpec{Image: "x", Container: webappv2.ContainerSpec{HealthCheckPath: "/h", ReadinessProbe: ptrProbe()}}, "set container.healthCheckPath or container.readinessProbe, not both"},
		{"replicas zero", webappv2.WebAppSpec{Image: "x", Replicas: ptr.To(int32(0))}, "spec.replicas"},
		{"own pod label", webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{Labels: map[string]string{"app.kubernetes.io/name": "x"}}}, "pod.labels must not set"},
		{"expose both ways", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"},
			Gateway: &webappv2.GatewayRef{Name: "gw"}, Ingress: &webappv2.IngressRef{ClassName: "c"}}}, "expose needs exactly one of gateway"},
		{"expose neither way", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}}}, "expose needs exactly one of gateway"},
		{"TLS with a gateway", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"},
			Gateway: &webappv2.GatewayRef{Name: "gw"}, TLS: &webappv2.ExposeTLS{SecretName: "s"}}}, "expose.tls is for an Ingress"},
		{"an IP as host", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"10.0.0.1"}, Ingress: &webappv2.IngressRef{ClassName: "c"}}}, "not an IP address"},
		{"an escaped slash", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Paths: []webappv2.PathPrefix{"/a%2Fb"},
			Ingress: &webappv2.IngressRef{ClassName: "c"}}}, "escaped '/'"},
		{"a bad escape", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Paths: []webappv2.PathPrefix{"/a%zz"},
			Ingress: &webappv2.IngressRef{ClassName: "c"}}}, "spec.expose.paths[0]"},
		{"no host", webappv2.WebAppSpec{Image: "x", Expose: &webappv2.Expose{Ingress: &webappv2.IngressRef{ClassName: "c"}}}, "spec.expose.hosts"},
	}
	for i, tc := range cases {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tc.spec}
		err := k8s.Create(context.Background(), app)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
		if err := get(context.Background(), ns, app.Name, &webappv2.WebApp{}); err == nil {
			t.Errorf("%s: stored anyway", tc.name)
		}
	}
}

// TestApplyAcrossVersions: a user who created a WebApp by applying a v1 manifest can apply it again (no change, no
// conflict) and can move to a v2 manifest under the same field manager; the operator's entries stay exact and it
// sends nothing while the user does.
func TestApplyAcrossVersions(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	v1doc := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"web","namespace":%q},
		"spec":{"image":"nginx:1.25","replicas":2,"port":8080}}`, ns)
	first := applyAs(t, v1doc, "kubectl")
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	op.writes.take()
	rv := readRV(t, ns)

	// The same v1 manifest again: nothing changes.
	again := applyAs(t, v1doc, "kubectl")
	if again.GetResourceVersion() != rv || first.GetGeneration() != again.GetGeneration() {
		t.Errorf("re-applying the v1 manifest changed the WebApp: resourceVersion %s -> %s", rv, again.GetResourceVersion())
	}
	// The same WebApp as a v2 manifest, under the same manager: no conflict, no change.
	v2doc := fmt.Sprintf(`{"apiVersion":"example.com/v2","kind":"WebApp","metadata":{"name":"web","namespace":%q},
		"spec":{"image":"nginx:1.25","replicas":2,"ports":[{"name":"http","port":8080}]}}`, ns)
	moved := applyAs(t, v2doc, "kubectl")
	if moved.GetGeneration() != first.GetGeneration() {
		t.Errorf("moving to the v2 manifest changed the spec: generation %d -> %d", first.GetGeneration(), moved.GetGeneration())
	}
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("the operator wrote while the user re-applied across versions: %q", w)
	}
	// A change in v2 terms reaches the Deployment; v1's manifest no longer owns what v2's now does.
	applyAs(t, strings.Replace(v2doc, `"replicas":2`, `"replicas":3`, 1), "kubectl")
	testutil.Eventually(t, 30*time.Second, "Deployment scaled to 3", func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "web", dep); err != nil {
			return err
		}
		if ptr.Deref(dep.Spec.Replicas, 0) != 3 {
			return fmt.Errorf("spec.replicas %d", ptr.Deref(dep.Spec.Replicas, 0))
		}
		return nil
	})
	// The operator's status entry is its apply of v2, and no other entry of its manager exists.
	app := &webappv2.WebApp{}
	if err := get(ctx, ns, "web", app); err != nil {
		t.Fatal(err)
	}
	for _, e := range app.ManagedFields {
		if e.Manager == webappv2.FieldManager && (e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "status") {
			t.Errorf("operator entry %s %s %s", e.APIVersion, e.Operation, e.Subresource)
		}
	}
	restartCostsNoWrites(t, op, ns)
}

// TestStorageMigration: WebApps stored at v1 (the CRD's storage version before v2) are rewritten at v2 by the
// operator's migration, which then leaves status.storedVersions at [v2]; a second pass has nothing to do; the
// WebApps' specs, generations and field managers are unchanged, and the operator sends nothing for them.
func TestStorageMigration(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	setStorage(t, "v1")
	restored := false
	defer func() {
		if !restored {
			setStorage(t, "v2")
		}
	}()
	before := map[string]*webappv2.WebApp{}
	for i := range 5 {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%d", i)},
			Spec: webappv2.WebAppSpec{Image: "nginx", Ports: []webappv2.Port{{Name: "web", Port: 80 + int32(i)}, {Name: "m", Port: 9000}}}}
		if err := k8s.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	// The operator converges them while they are stored at v1 (its status writes too).
	op := startOperator(t, ns, time.Second)
	for i := range 5 {
		waitReady(t, ns, fmt.Sprintf("m-%d", i), metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	}
	waitResyncs(t, 2, 30*time.Second)
	op.writes.take()

	// The upgrade: v2 becomes the storage version; what is stored stays at v1 until rewritten.
	setStorage(t, "v2")
	restored = true
	if stored := storedVersions(t); !slices.Contains(stored, "v1") {
		t.Fatalf("storedVersions %v, want v1 in it", stored)
	}
	list := &webappv2.WebAppList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		before[list.Items[i].Name] = &list.Items[i]
	}

	migrated := metricSum(t, "webapp_operator_storage_migrated_total", nil)
	done := make(chan struct{})
	close(done)
	m := &conversion.StorageMigrator{Reader: k8s, Client: k8s, Ready: done}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if stored := storedVersions(t); !slices.Equal(stored, []string{"v2"}) {
		t.Fatalf("after the migration storedVersions is %v, want [v2]", stored)
	}
	if n := metricSum(t, "webapp_operator_storage_migrated_total", nil) - migrated; n < 5 {
		t.Errorf("webapp_operator_storage_migrated_total rose by %v, want at least 5", n)
	}
	after := &webappv2.WebAppList{}
	if err := k8s.List(ctx, after, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, app := range after.Items {
		b := before[app.Name]
		if app.ResourceVersion == b.ResourceVersion {
			t.Errorf("%s was not rewritten (resourceVersion %s)", app.Name, app.ResourceVersion)
		}
		if app.Generation != b.Generation || !slices.Equal(app.Spec.Ports, b.Spec.Ports) || app.Spec.Image != b.Spec.Image {
			t.Errorf("%s changed: generation %d -> %d, spec %+v -> %+v", app.Name, b.Generation, app.Generation, b.Spec, app.Spec)
		}
		if managers(app.ManagedFields) != managers(b.ManagedFields) {
			t.Errorf("%s: field managers %s became %s", app.Name, managers(b.ManagedFields), managers(app.ManagedFields))
		}
	}
	// Idempotent: nothing left to do, nothing written.
	rv := after.ResourceVersion
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	again := &webappv2.WebAppList{}
	if err := k8s.List(ctx, again, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i, app := range again.Items {
		if app.ResourceVersion != after.Items[i].ResourceVersion {
			t.Errorf("the second pass rewrote %s (list at %s)", app.Name, rv)
		}
	}
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("the operator wrote after the migration: %q", w)
	}
}

func ptrProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
}

// applyAs server-side applies the JSON document as field manager m and returns the result.
func applyAs(t *testing.T, doc, m string) *unstructured.Unstructured { //nolint:unparam // the manager is part of what a case says
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(m)); err != nil {
		t.Fatalf("applying as %s: %v\n%s", m, err, doc)
	}
	return u
}

func readRV(t *testing.T, ns string) string {
	t.Helper()
	app := &webappv2.WebApp{}
	if err := get(context.Background(), ns, "web", app); err != nil {
		t.Fatal(err)
	}
	return app.ResourceVersion
}

func crd(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: conversion.CRDName}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// setStorage makes version the CRD's storage version, and waits until the API server stores at it.
func setStorage(t *testing.T, version string) {
	t.Helper()
	u := crd(t)
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m := v.(map[string]any)
		m["storage"] = m["name"] == version
	}
	if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "storage version "+version+" in storedVersions", func(context.Context) error {
		if !slices.Contains(storedVersions(t), version) {
			return fmt.Errorf("storedVersions %v", storedVersions(t))
		}
		return nil
	})
	// The API server's handlers for the CRD are rebuilt on a change: a probe WebApp written now is stored at the
	// new version once its create succeeds.
	probe := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "storage-probe-" + version}, Spec: webappv2.WebAppSpec{Image: "x"}}
	testutil.Eventually(t, 30*time.Second, "a write after the storage change", func(ctx context.Context) error {
		return client.IgnoreAlreadyExists(k8s.Create(ctx, probe.DeepCopy()))
	})
	_ = k8s.Delete(context.Background(), probe)
}

func storedVersions(t *testing.T) []string {
	t.Helper()
	s, _, _ := unstructured.NestedStringSlice(crd(t).Object, "status", "storedVersions")
	return s
}

// managers is the set of (manager, operation, subresource) entries, as a string.
func managers(entries []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s/%s/%s", e.Manager, e.Operation, e.Subresource))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestConversionWebhookDown: with no conversion webhook answering, every request in v1 fails with an error naming
// the webhook, and nothing is stored from it; requests in v2 (the storage version) and the operator (which reads
// and writes v2 only) keep working; when the webhook is back, v1 reads the same as before.
func TestConversionWebhookDown(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	if err := k8s.Create(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}, Spec: webappv1.WebAppSpec{Image: "nginx", Replicas: 2, Port: 80}}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "old", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)
	beforeV1 := &webappv1.WebApp{}
	if err := get(ctx, ns, "old", beforeV1); err != nil {
		t.Fatal(err)
	}

	stopConversion()
	restarted := false
	defer func() {
		if !restarted {
			_ = startConversion()
		}
	}()
	var v1err error
	testutil.Eventually(t, 30*time.Second, "v1 reads fail", func(ctx context.Context) error {
		if v1err = get(ctx, ns, "old", &webappv1.WebApp{}); v1err == nil {
			return fmt.Errorf("a v1 read still works")
		}
		return nil
	})
	t.Logf("v1 read with the webhook down: %v", v1err)
	if !strings.Contains(v1err.Error(), "conversion webhook") {
		t.Errorf("the v1 error does not name the conversion webhook: %v", v1err)
	}
	v1list := &webappv1.WebAppList{}
	err := k8s.List(ctx, v1list, client.InNamespace(ns))
	t.Logf("v1 list with the webhook down: %d items, error %v", len(v1list.Items), err)
	for _, it := range v1list.Items {
		t.Logf("  listed %s rv %s spec %+v", it.Name, it.ResourceVersion, it.Spec)
	}
	err = k8s.Create(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new-v1"}, Spec: webappv1.WebAppSpec{Image: "nginx", Replicas: 1, Port: 80}})
	t.Logf("v1 create with the webhook down: %v", err)
	if err == nil || get(ctx, ns, "new-v1", &webappv2.WebApp{}) == nil {
		t.Errorf("a v1 create was stored with the webhook down (error %v)", err)
	}
	// v2 keeps working: reads, lists, creates, and the operator's reconciling of a spec change.
	if err := k8s.List(ctx, &webappv2.WebAppList{}, client.InNamespace(ns)); err != nil {
		t.Errorf("v2 list with the webhook down: %v", err)
	}
	if err := k8s.Create(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new-v2"}, Spec: webappv2.WebAppSpec{Image: "nginx"}}); err != nil {
		t.Errorf("v2 create with the webhook down: %v", err)
	}
	app := &webappv2.WebApp{}
	if err := get(ctx, ns, "old", app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Image = "nginx:1.27"
	if err := k8s.Update(ctx, app); err != nil {
		t.Fatalf("v2 update with the webhook down: %v", err)
	}
	// The operator reads and writes v2 only: the change reaches the Deployment, and a WebApp whose field managers
	// all wrote v2 gets its status. The status of one with a manager that wrote v1 ("old", created in v1) cannot be
	// written: Server-Side Apply converts the object to every manager's version to compute field sets, and that
	// needs the webhook; it is written once the webhook is back.
	testutil.Eventually(t, 30*time.Second, "the operator reconciles with the webhook down", func(ctx context.Context) error {
		for _, name := range []string{"new-v2"} {
			app := &webappv2.WebApp{}
			if err := get(ctx, ns, name, app); err != nil {
				return err
			}
			if app.Status.ObservedGeneration != app.Generation {
				return fmt.Errorf("%s: status at generation %d of %d", name, app.Status.ObservedGeneration, app.Generation)
			}
		}
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "old", dep); err != nil {
			return err
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
			return fmt.Errorf("Deployment image %s", img)
		}
		return nil
	})

	// Back: v1 reads work again and show the change made meanwhile.
	if err := startConversion(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	after := &webappv1.WebApp{}
	testutil.Eventually(t, 30*time.Second, "v1 reads work again", func(ctx context.Context) error {
		return get(ctx, ns, "old", after)
	})
	if after.Spec.Image != "nginx:1.27" || after.Spec.Port != beforeV1.Spec.Port || after.Spec.Replicas != beforeV1.Spec.Replicas {
		t.Errorf("after the webhook came back, v1 reads %+v", after.Spec)
	}
	testutil.Eventually(t, 60*time.Second, "the held status is written", func(ctx context.Context) error {
		app := &webappv2.WebApp{}
		if err := get(ctx, ns, "old", app); err != nil {
			return err
		}
		if app.Status.ObservedGeneration != app.Generation {
			return fmt.Errorf("status at generation %d of %d", app.Status.ObservedGeneration, app.Generation)
		}
		return nil
	})
	restartCostsNoWrites(t, op, ns)
}

// TestV1CreateWithForgedConversionData: a v1 create whose conversion-data annotation (the earlier releases' form,
// written here by hand) repeats a host stores no duplicate and no annotation: expose is dropped, the valid
// autoscaling kept, status.conversionDropped says what and why, the operator warns once with an event and writes
// its status as for any WebApp.
func TestV1CreateWithForgedConversionData(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Annotations: map[string]string{
		conversion.LegacyDataAnnotation: `{"expose":{"hosts":["a.example.com","a.example.com"],"gateway":{"name":"public"}},"autoscaling":{"maxReplicas":3}}`}},
		Spec: webappv1.WebAppSpec{Image: "nginx:1.25", Replicas: 2, Port: 8080}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	got := &webappv2.WebApp{}
	if err := get(ctx, ns, "forged", got); err != nil {
		t.Fatal(err)
	}
	d := got.Status.ConversionDropped
	if got.Spec.Expose != nil || got.Spec.Autoscaling == nil || got.Spec.Autoscaling.MaxReplicas != 3 || got.Annotations != nil ||
		d == nil || !slices.Equal(d.Fields, []string{"spec.expose"}) || d.Generation != 1 || !strings.Contains(d.Message, "Duplicate value") {
		t.Fatalf("stored: expose %+v, autoscaling %+v, annotations %v, dropped %+v", got.Spec.Expose, got.Spec.Autoscaling, got.Annotations, d)
	}
	// The operator writes its status (no apply of it fails on the stored object), and warns once.
	testutil.Eventually(t, 30*time.Second, "the status written and one warning", func(ctx context.Context) error {
		if err := get(ctx, ns, "forged", got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != 1 {
			return fmt.Errorf("status.observedGeneration %d", got.Status.ObservedGeneration)
		}
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		return oneDroppedWarning(list.Items)
	})
	// Still one after more reconciles (a repeat would be a second event, or a series on the first).
	waitResyncs(t, 3, 30*time.Second)
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := oneDroppedWarning(list.Items); err != nil {
		t.Error(err)
	}
}

func oneDroppedWarning(events []eventsv1.Event) error {
	n := 0
	for _, e := range events {
		if e.Reason == "ConversionDataDropped" && e.Regarding.Name == "forged" && strings.Contains(e.Note, "spec.expose") {
			n++
			if e.Series != nil {
				return fmt.Errorf("the ConversionDataDropped warning repeated: %+v", e.Series)
			}
		}
	}
	if n != 1 {
		return fmt.Errorf("%d ConversionDataDropped events", n)
	}
	return nil
}
