package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeCache is controller-runtime's fake informers, taught a metadata-only object's kind (its TypeMeta), reading
// from reader (controller-runtime's fake reads find nothing).
type fakeCache struct {
	*informertest.FakeInformers
	reader client.Reader
}

func (c *fakeCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return c.GetInformerForKind(ctx, m.GroupVersionKind(), opts...)
	}
	return c.FakeInformers.GetInformer(ctx, obj, opts...)
}

func (c *fakeCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		delete(c.InformersByGVK, m.GroupVersionKind())
		return nil
	}
	return c.FakeInformers.RemoveInformer(ctx, obj)
}

func (c *fakeCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

func (c *fakeCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// TestPodWatchRunsOnlyWhileARolloutNeedsIt: no pod or ReplicaSet informer until a WebApp needs its pods; its pods'
// events reconcile it and no other WebApp; the informers go once none needs them for the linger time, and come back
// when one needs them again.
func TestPodWatchRunsOnlyWhileARolloutNeedsIt(t *testing.T) {
	ctx := context.Background()
	informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, reader: newFakeEnv(t, replicaSetOf(newApp("a", 1, 80, "x"), "a-1",
		controllerRef("Deployment", "a", "uid-dep-a")), replicaSetOf(newApp("b", 1, 80, "x"), "b-1", controllerRef("Deployment", "b", "uid-dep-b")))}
	w := newPodWatch(ctx, informers, 20*time.Millisecond)
	running := func() int { return len(informers.InformersByGVK) }
	a, b := client.ObjectKey{Namespace: "ns", Name: "a"}, client.ObjectKey{Namespace: "ns", Name: "b"}

	w.set(ctx, a, false)
	if running() != 0 || testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("an informer runs though no WebApp needs one")
	}
	w.set(ctx, a, true)
	if running() != 2 || testutil.ToFloat64(podWatchActive) != 1 {
		t.Fatalf("%d informers while a WebApp needs its pods, want 2 (pods, ReplicaSets)", running())
	}
	inf, err := informers.FakeInformerFor(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	inf.Add(podOf("a", "a-1", "uid-a-1"))
	inf.Add(podOf("b", "b-1", "uid-b-1")) // b needs nothing: no reconcile
	if got := received(w); len(got) != 1 || got[0] != a {
		t.Fatalf("reconciles for the pods' events: %v, want [%v]", got, a)
	}

	// Needed by two, released by one: they keep running.
	w.set(ctx, b, true)
	w.set(ctx, a, false)
	time.Sleep(50 * time.Millisecond) // longer than the linger: nothing may stop it
	if running() != 2 {
		t.Fatal("the informers stopped while b still needs them")
	}
	w.set(ctx, b, false)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !w.active() && running() == 0, nil
	}); err != nil {
		t.Fatal("the informers still run after the linger with no WebApp needing them")
	}
	if testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("webapp_operator_pod_watch_active is not 0")
	}
	w.set(ctx, a, true)
	if running() != 2 || !w.active() {
		t.Fatal("the informers did not come back for a WebApp that needs them again")
	}
	w.set(ctx, a, false)
}

// TestPodEventsReconcileTheWebAppWhoseDeploymentMadeThePod: a pod's event reconciles the WebApp whose Deployment's
// ReplicaSet controls it (by UID), none for a pod that only carries its labels; a ReplicaSet's arrival or change
// of controller reconciles its Deployment's WebApp (its pods' events may have come before it), its other changes
// do not.
func TestPodEventsReconcileTheWebAppWhoseDeploymentMadeThePod(t *testing.T) {
	ctx := context.Background()
	app := newApp("a", 1, 80, "x")
	rs := replicaSetOf(app, "a-1", controllerRef("Deployment", "a", "uid-dep-a"))
	informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, reader: newFakeEnv(t, rs)}
	w := newPodWatch(ctx, informers, time.Millisecond)
	a := client.ObjectKeyFromObject(app)
	w.set(ctx, a, true)
	defer stopWatch(t, w, a)
	pods, err := informers.FakeInformerFor(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	rsInf, err := informers.FakeInformerForKind(ctx, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	if err != nil {
		t.Fatal(err)
	}
	meta := func(rs *appsv1.ReplicaSet) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: replicaSetMetadata().TypeMeta, ObjectMeta: rs.ObjectMeta}
	}
	adopted := meta(rs)
	adopted.OwnerReferences = []metav1.OwnerReference{controllerRef("Deployment", "a", "uid-dep-other")}
	relabelled := meta(rs)
	relabelled.ResourceVersion = "2"
	cases := []struct {
		name  string
		event func()
		want  []client.ObjectKey
	}{
		{"a pod of the Deployment's ReplicaSet", func() { pods.Add(podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
		{"its update", func() { pods.Update(podOf("a", "a-1", "uid-a-1"), podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
		{"its deletion", func() { pods.Delete(podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
		{"a bare pod with the WebApp's labels", func() { pods.Add(podOf("a", "", "")) }, nil},
		{"a pod that names the ReplicaSet with another UID", func() { pods.Add(podOf("a", "a-1", "uid-forged")) }, nil},
		{"a pod of a ReplicaSet the watch does not have", func() { pods.Add(podOf("a", "a-2", "uid-a-2")) }, nil},
		{"the ReplicaSet arrives", func() { rsInf.Add(meta(rs)) }, []client.ObjectKey{a}},
		{"its counts change", func() { rsInf.Update(meta(rs), relabelled) }, nil},
		{"another Deployment of the name adopts it", func() { rsInf.Update(meta(rs), adopted) }, []client.ObjectKey{a}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.event()
			if got := received(w); !slices.Equal(got, tc.want) {
				t.Errorf("reconciles %v, want %v", got, tc.want)
			}
		})
	}
}

// podOf is a pod with WebApp webApp's labels, controlled by the ReplicaSet rs of uid (none when rs is "").
func podOf(webApp, rs string, uid types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: webApp + "-x",
		Labels: map[string]string{LabelName: appName, LabelInstance: webApp, LabelManagedBy: ManagedBy}}}
	if rs != "" {
		p.OwnerReferences = []metav1.OwnerReference{controllerRef("ReplicaSet", rs, uid)}
	}
	return p
}

// stopWatch says key no longer needs its pods and waits until w stops, so the next test finds no watch running.
func stopWatch(t *testing.T, w *podWatch, key client.ObjectKey) {
	t.Helper()
	w.set(context.Background(), key, false)
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !w.active(), nil
	}); err != nil {
		t.Fatalf("the pod watch still runs %v after the last WebApp released it (linger %v)", 5*time.Second, w.linger)
	}
}

// received drains the watch's events.
func received(w *podWatch) []client.ObjectKey {
	var keys []client.ObjectKey
	for {
		select {
		case e := <-w.events:
			keys = append(keys, client.ObjectKeyFromObject(e.Object))
		default:
			return keys
		}
	}
}
